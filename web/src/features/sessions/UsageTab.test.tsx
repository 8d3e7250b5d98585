import { screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { SessionDetail } from '../../api/client';
import { renderInApp } from '../../test/render';
import UsageTab from './UsageTab';

const tokens = (input: number, output: number, requests: number, cost_usd: number, unpriced_requests = 0) => ({ input_tokens: input, output_tokens: output, total_tokens: input + output, requests, cost_usd, unpriced_requests });

function session(usage: Record<string, unknown>, runs: { usage: Record<string, unknown> }[] = []): SessionDetail {
  return {
    id: 's1',
    status: 'running',
    usage,
    sandbox_seconds: 12,
    runs: runs.map((r, i) => ({ id: `r${i}`, prompt: `prompt ${i}`, status: 'completed', turns: 1, created_at: '2026-12-01T10:00:00Z', session_id: 's1', ...r })),
  } as unknown as SessionDetail;
}

describe("a session's usage tab", () => {
  it('shows the cost in all, by model, by agent and by run', () => {
    const lead = tokens(1000, 100, 2, 0.253);
    const helper = tokens(500, 50, 1, 0, 1);
    renderInApp(
      <UsageTab
        session={session(
          { ...tokens(1500, 150, 3, 0.253, 1), active_seconds: 4, by_model: { 'fake-model': lead, 'local-model': helper }, by_agent: { lead, helper } },
          [{ usage: tokens(1000, 100, 2, 0.253) }, { usage: tokens(500, 50, 1, 0, 1) }],
        )}
      />,
    );
    expect(screen.getByTestId('session-usage-cost-value')).toHaveTextContent('≥ $0.253');
    expect(screen.getByTestId('session-usage-cost-note')).toHaveTextContent('+ 1 unpriced call');
    const byModel = screen.getByTestId('usage-by-model');
    expect(within(byModel).getByRole('columnheader', { name: 'Cost' })).toBeInTheDocument();
    const [priced, local] = within(byModel).getAllByTestId('breakdown-cost');
    expect(priced).toHaveTextContent(/^\$0\.253$/);
    expect(local).toHaveTextContent('Unpriced1 call unpriced');
    const byAgent = within(screen.getByTestId('usage-by-agent')).getAllByTestId('breakdown-cost');
    expect(byAgent.map((e) => e.textContent)).toEqual(['$0.253', 'Unpriced1 call unpriced']);
    expect(screen.getAllByTestId('run-cost').map((e) => e.textContent)).toEqual(['$0.253', 'Unpriced1 call unpriced']);
  });

  it('counts the calls of usage recorded before calls were priced as unpriced, not as $0.00', () => {
    renderInApp(<UsageTab session={session({ input_tokens: 10, output_tokens: 5, total_tokens: 15, requests: 2, by_model: { m: { input_tokens: 10, output_tokens: 5, requests: 2 } } })} />);
    expect(screen.getByTestId('session-usage-cost-value')).toHaveTextContent('Unpriced');
    expect(screen.getByTestId('session-usage-cost-note')).toHaveTextContent('2 calls unpriced');
    expect(screen.getByTestId('breakdown-cost')).toHaveTextContent('Unpriced2 calls unpriced');
    expect(document.body).not.toHaveTextContent('$0.00');
  });

  it('shows a dash before the first call', () => {
    renderInApp(<UsageTab session={session({})} />);
    expect(screen.getByTestId('session-usage-cost-value')).toHaveTextContent('—');
    expect(screen.queryByTestId('session-usage-cost-note')).toBeNull();
  });
});
