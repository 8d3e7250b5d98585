import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SessionDetail } from '../../api/client';
import { renderInApp } from '../../test/render';
import { BudgetIndicator, BudgetModal } from './SessionBudget';
import { StatusBadge } from './StatusBadge';

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

function session(budget: SessionDetail['budget'], over: Partial<SessionDetail> = {}): SessionDetail {
  return {
    id: 'S',
    status: 'running',
    activity: 'idle',
    budget,
    usage: { cost_usd: 0.4, total_tokens: 440, requests: 4 },
    sandbox_seconds: 95,
    runs: [{ id: 'R', turns: 4, stop_reason: 'budget_reached', status: 'completed' }],
    ...over,
  } as unknown as SessionDetail;
}

/** Answers PATCH /api/sessions/S with `answer`, keeping the bodies sent. */
function patchWith(answer: (body: unknown) => Response) {
  const bodies: unknown[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    expect(`${req.method} ${new URL(req.url).pathname}`).toBe('PATCH /api/sessions/S');
    const body = await req.json();
    bodies.push(body);
    return answer(body);
  });
  return bodies;
}

afterEach(() => vi.restoreAllMocks());

describe('the budget dialog', () => {
  it('shows each limit against its use, and sends the changed budget as a whole', async () => {
    const bodies = patchWith((b) => json({ ...session((b as { budget: unknown }).budget as never) }));
    const onClose = vi.fn();
    renderInApp(<BudgetModal session={session({ max_cost_usd: 0.35, max_turns: 4 })} onClose={onClose} />);
    const meters = screen.getAllByTestId('budget-meter');
    expect(meters.map((m) => [m.getAttribute('data-limit'), m.textContent])).toEqual([
      ['max_cost_usd', 'Cost$0.40 of $0.35 · reached'],
      ['max_turns', 'Model steps4 of 4 model steps · reached'],
    ]);
    expect(screen.getByTestId('budget-used-max_sandbox_seconds')).toHaveTextContent('Used so far: 1m 35s.');
    const user = userEvent.setup({ delay: null });
    const cost = screen.getByRole('textbox', { name: 'Cost (US dollars)' });
    expect(cost).toHaveValue('0.35');
    await user.clear(cost);
    await user.type(cost, '0.55');
    await user.clear(screen.getByRole('textbox', { name: 'Model steps' }));
    await user.type(screen.getByRole('textbox', { name: 'Tokens' }), '5000');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(onClose).toHaveBeenCalled());
    expect(bodies).toEqual([{ budget: { max_cost_usd: 0.55, max_total_tokens: 5000 } }]);
  }, 30_000);

  it('checks the fields first, then puts the server’s 422 at the limit it names', async () => {
    const bodies = patchWith(() => json({ detail: [{ loc: ['body', 'budget', 'max_turns'], msg: 'max_turns is a limit: a number, 0 or more', type: 'greater_than_equal' }] }, 422));
    renderInApp(<BudgetModal session={session(null)} onClose={() => {}} />);
    expect(screen.queryByTestId('budget-meters')).toBeNull();
    const user = userEvent.setup({ delay: null });
    const steps = screen.getByRole('textbox', { name: 'Model steps' });
    await user.type(steps, '2000000');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    expect(steps).toHaveAccessibleDescription(/A whole number, 0 to 1,000,000\./);
    expect(bodies).toEqual([]);
    await user.clear(steps);
    await user.type(steps, '10');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(steps).toHaveAccessibleDescription(/max_turns is a limit: a number, 0 or more/));
    expect(bodies).toEqual([{ budget: { max_turns: 10 } }]);
    // No "Remove" for a session without a budget.
    expect(screen.queryByTestId('remove-budget')).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull();
  }, 30_000);

  it('says a refusal that names no limit of the form in an alert', async () => {
    patchWith(() => json({ detail: [{ loc: ['body', 'budget', 'max_dollars'], msg: 'unknown field `max_dollars`' }] }, 422));
    renderInApp(<BudgetModal session={session(null)} onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    await user.type(screen.getByRole('textbox', { name: 'Tokens' }), '10');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('budget.max_dollars: unknown field `max_dollars`');
  }, 30_000);

  it('removes the budget with null, and saves all-empty fields as none', async () => {
    const bodies = patchWith(() => json(session(null)));
    const onClose = vi.fn();
    renderInApp(<BudgetModal session={session({ max_total_tokens: 1000 })} onClose={onClose} />);
    const user = userEvent.setup({ delay: null });
    await user.click(screen.getByRole('button', { name: 'Remove the budget' }));
    await waitFor(() => expect(onClose).toHaveBeenCalledTimes(1));
    await user.clear(screen.getByRole('textbox', { name: 'Tokens' }));
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(onClose).toHaveBeenCalledTimes(2));
    expect(bodies).toEqual([{ budget: null }, { budget: null }]);
  }, 30_000);
});

describe("the header's word on the budget", () => {
  it('says the limit nearest to its end, and opens the dialog', async () => {
    const onOpen = vi.fn();
    renderInApp(<BudgetIndicator session={session({ max_cost_usd: 0.55, max_total_tokens: 100000 }, { runs: [] })} onOpen={onOpen} />);
    expect(screen.getByTestId('session-budget-text')).toHaveTextContent('$0.40 of $0.55 budget (+1)');
    await userEvent.click(screen.getByTestId('session-budget'));
    expect(onOpen).toHaveBeenCalled();
  });

  it('is not there without a budget', () => {
    const { container } = renderInApp(<BudgetIndicator session={session(null)} onOpen={() => {}} />);
    expect(container.querySelector('[data-testid="session-budget"]')).toBeNull();
  });
});

describe('the status badge', () => {
  it('marks a session whose last turn stopped at its budget, or a list row past a cost or token limit', () => {
    renderInApp(
      <>
        <div data-testid="detail">
          <StatusBadge session={session({ max_cost_usd: 0.55 })} />
        </div>
        <div data-testid="row">
          <StatusBadge session={{ status: 'running', activity: 'idle', budget: { max_total_tokens: 400 }, usage: { total_tokens: 440 } } as never} />
        </div>
        <div data-testid="under">
          <StatusBadge session={{ status: 'running', activity: 'idle', budget: { max_cost_usd: 1 }, usage: { cost_usd: 0.4 } } as never} />
        </div>
        <div data-testid="busy">
          <StatusBadge session={session({ max_cost_usd: 0.35 }, { activity: 'busy' })} />
        </div>
      </>,
    );
    const badge = (id: string) => screen.getByTestId(id).querySelector('[data-testid="session-budget-reached"]');
    expect(badge('detail')).toHaveTextContent('budget reached');
    expect(badge('row')).toHaveTextContent('budget reached');
    expect(badge('under')).toBeNull();
    expect(badge('busy')).toBeNull();
  });
});
