import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../../test/render';
import UsagePage from './UsagePage';
import { AgentUsage } from './AgentUsage';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const zero = { input_tokens: 0, output_tokens: 0, total_tokens: 0, requests: 0, runs: 0, active_seconds: 0, sandbox_seconds: 0, memory_tokens: 0, memory_requests: 0, cost_usd: 0, unpriced_requests: 0 };

/** Answers `GET /api/usage` with these groups (and their sum), and records what was asked. */
function serve(groups: Record<string, number | string>[]) {
  const asked: URL[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const url = new URL((input as Request).url);
    asked.push(url);
    const full = groups.map((g) => ({ ...zero, ...g }));
    const total = { ...zero };
    for (const g of full) for (const k of Object.keys(zero) as (keyof typeof zero)[]) total[k] += g[k] as number;
    return json({ from: '2026-11-01T00:00:00Z', to: '2026-12-02T00:00:00Z', group_by: url.searchParams.get('group_by') ?? 'day', groups: full, total });
  });
  return asked;
}

describe('the usage page', () => {
  it('asks for whole days, today included, and shows the totals the API summed', async () => {
    const asked = serve([{ key: '2026-12-01', input_tokens: 1200, output_tokens: 34, total_tokens: 1234, requests: 3, cost_usd: 0.0042 }]);
    renderInApp(<UsagePage />);
    expect(await screen.findAllByText('1,200')).toHaveLength(2);
    expect(asked).toHaveLength(1);
    expect(asked[0].pathname).toBe('/api/usage');
    const q = asked[0].searchParams;
    expect(q.get('group_by')).toBe('day');
    expect(q.get('to')).toBe(new Date().toISOString().slice(0, 10));
    expect(q.get('from')).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(q.has('agent')).toBe(false);
    // The spend: in its card, and in the day's row.
    expect(screen.getByTestId('usage-spend-value')).toHaveTextContent('$0.0042');
    expect(screen.queryByTestId('usage-spend-note')).toBeNull();
    expect(screen.getByRole('columnheader', { name: 'Spend' })).toBeInTheDocument();
    expect(within(screen.getByTestId('usage-row')).getByTestId('usage-row-spend')).toHaveTextContent('$0.0042');
    expect(screen.getByTestId('spend-chart')).toBeInTheDocument();
    expect(screen.queryByTestId('spend-chart-unpriced')).toBeNull();
  });

  it('never shows unpriced calls as $0.00', async () => {
    serve([{ key: 'local-model', input_tokens: 10, output_tokens: 5, total_tokens: 15, requests: 3, unpriced_requests: 3 }]);
    renderInApp(<UsagePage />, { route: '/usage?group_by=model' });
    expect(await screen.findByTestId('usage-spend-value')).toHaveTextContent('Unpriced');
    expect(screen.getByTestId('usage-spend-note')).toHaveTextContent('3 calls unpriced');
    expect(screen.getByTestId('usage-row-spend')).toHaveTextContent('Unpriced3 calls unpriced');
    // No bars of zero dollars: the chart says why it is empty.
    expect(screen.getByTestId('spend-chart')).toHaveTextContent('No model call in this period has a price');
    expect(screen.getByTestId('spend-chart-unpriced')).toHaveTextContent('3 calls unpriced');
    expect(document.body).not.toHaveTextContent('$0.00');
  });

  it('says a total is a floor when some calls had no price, group by group', async () => {
    serve([
      { key: 'priced-model', requests: 4, cost_usd: 0.0123 },
      { key: 'local-model', requests: 2, unpriced_requests: 2 },
    ]);
    renderInApp(<UsagePage />, { route: '/usage?group_by=model' });
    expect(await screen.findByTestId('usage-spend-value')).toHaveTextContent('≥ $0.0123');
    expect(screen.getByTestId('usage-spend-note')).toHaveTextContent('+ 2 unpriced calls');
    const [priced, local] = screen.getAllByTestId('usage-row-spend');
    expect(priced).toHaveTextContent(/^\$0\.0123$/);
    expect(local).toHaveTextContent('Unpriced2 calls unpriced');
    expect(screen.getByTestId('spend-chart-unpriced')).toHaveTextContent('+ 2 calls without a price, not in these bars');
  });

  it("shows one agent's usage when the URL names it, and every agent again when asked", async () => {
    const asked = serve([{ key: '2026-12-01', requests: 1, cost_usd: 1.5 }]);
    renderInApp(<UsagePage />, { route: '/usage?agent=e2e-analyst' });
    expect(await screen.findByTestId('usage-agent')).toHaveTextContent('Agent: e2e-analyst');
    expect(asked.at(-1)!.searchParams.get('agent')).toBe('e2e-analyst');
    await screen.findByTestId('usage-row');
    expect(screen.getByTestId('usage-spend-value')).toHaveTextContent('$1.50');
    await userEvent.click(screen.getByRole('button', { name: 'Show every agent' }));
    expect(screen.queryByTestId('usage-agent')).toBeNull();
    await vi.waitFor(() => expect(asked.at(-1)!.searchParams.has('agent')).toBe(false));
  });
});

describe("an agent's usage", () => {
  it('asks for the agent by id over the default window, and shows its cost and runs', async () => {
    const asked = serve([{ key: '2026-12-01', requests: 5, runs: 2, total_tokens: 4321, cost_usd: 0.25, unpriced_requests: 1 }]);
    renderInApp(<AgentUsage agent={{ id: 'a1b2', slug: 'e2e-analyst' }} />);
    expect(await screen.findByText('≥ $0.25')).toHaveAttribute('data-testid', 'agent-cost-value');
    expect(screen.getByTestId('agent-cost-note')).toHaveTextContent('+ 1 unpriced call');
    expect(screen.getByRole('heading', { name: 'Usage, last 30 days' })).toBeInTheDocument();
    expect(screen.getByText('4,321')).toBeInTheDocument();
    const q = asked[0].searchParams;
    expect(q.get('agent')).toBe('a1b2');
    // The API's default window (the last 30 days) and grouping.
    expect([q.has('from'), q.has('to'), q.has('group_by')]).toEqual([false, false, false]);
    expect(screen.getByRole('link', { name: 'Usage of this agent' })).toHaveAttribute('href', '/usage?agent=e2e-analyst');
  });
});
