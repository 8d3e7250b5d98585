import { screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../../test/render';
import UsagePage from './UsagePage';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const zero = { input_tokens: 0, output_tokens: 0, total_tokens: 0, requests: 0, runs: 0, active_seconds: 0, sandbox_seconds: 0 };

describe('the usage page', () => {
  it('asks for whole days, today included, and shows the totals the API summed', async () => {
    const asked: URL[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const url = new URL((input as Request).url);
      asked.push(url);
      const group = { ...zero, key: '2026-12-01', input_tokens: 1200, output_tokens: 34, total_tokens: 1234, requests: 3 };
      return json({ from: '2026-11-01T00:00:00Z', to: '2026-12-02T00:00:00Z', group_by: 'day', groups: [group], total: group });
    });
    renderInApp(<UsagePage />);
    expect(await screen.findAllByText('1,200')).toHaveLength(2);
    expect(asked).toHaveLength(1);
    expect(asked[0].pathname).toBe('/api/usage');
    const q = asked[0].searchParams;
    expect(q.get('group_by')).toBe('day');
    expect(q.get('to')).toBe(new Date().toISOString().slice(0, 10));
    expect(q.get('from')).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
});
