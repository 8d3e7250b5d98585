import { afterEach, describe, expect, it, vi } from 'vitest';
import { openPreview } from './openPreview';

describe('openPreview', () => {
  afterEach(() => vi.restoreAllMocks());
  it('opens the preview URL in a new tab with noopener noreferrer, and nothing added to it', () => {
    const clicked: HTMLAnchorElement[] = [];
    vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      clicked.push(this);
    });
    const url = 'http://127.0.0.1:9/preview/tok-en-sig/';
    expect(openPreview(url)).toBe(true);
    expect(clicked).toHaveLength(1);
    expect(clicked[0].href).toBe(url);
    expect(clicked[0].target).toBe('_blank');
    expect(clicked[0].rel).toBe('noopener noreferrer');
    expect(document.body.contains(clicked[0])).toBe(false);
  });
  it('refuses anything but http(s)', () => {
    const click = vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(() => {});
    expect(openPreview('javascript:alert(1)')).toBe(false);
    expect(openPreview('data:text/html,hi')).toBe(false);
    expect(click).not.toHaveBeenCalled();
  });
});
