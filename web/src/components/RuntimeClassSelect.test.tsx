import { fireEvent, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../test/render';
import { RuntimeClassSelect, runtimeClassOptions } from './RuntimeClassSelect';

afterEach(() => vi.restoreAllMocks());

/** Serves a default backend offering `offered` at GET /api/backends. */
function serve(offered: string[]) {
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    expect(new URL((input as Request).url).pathname).toBe('/api/backends');
    const body = [{ name: 'kubernetes', default: true, runtime_classes: offered, capabilities: {} }];
    return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });
  });
}

describe('runtime class options', () => {
  it('are the default, then what the server offers, and a stored class it no longer offers', () => {
    expect(runtimeClassOptions(['gvisor', 'kata'], '')).toEqual([
      { value: '', label: 'server default' },
      { value: 'gvisor', label: 'gvisor' },
      { value: 'kata', label: 'kata' },
    ]);
    expect(runtimeClassOptions(['gvisor'], 'old').map((o) => o.label)).toEqual(['server default', 'gvisor', 'old (no longer offered)']);
  });
});

describe('the runtime class select', () => {
  it('offers the server’s classes and reports the one chosen', async () => {
    serve(['gvisor', 'kata']);
    const onChange = vi.fn();
    renderInApp(<RuntimeClassSelect value="" onChange={onChange} description="help" />);
    const input = await screen.findByRole('textbox', { name: 'Runtime class' });
    await vi.waitFor(() => expect(input).not.toBeDisabled());
    fireEvent.click(input);
    fireEvent.click(await screen.findByRole('option', { name: 'kata' }));
    expect(onChange).toHaveBeenCalledWith('kata');
  });

  it('is disabled, saying how an operator offers some, when the server offers none', async () => {
    serve([]);
    renderInApp(<RuntimeClassSelect value="" onChange={() => {}} description="help" />);
    expect(await screen.findByText(/--kubernetes-runtime-classes/)).toBeInTheDocument();
    expect(screen.getByRole('textbox', { name: 'Runtime class' })).toBeDisabled();
  });
});
