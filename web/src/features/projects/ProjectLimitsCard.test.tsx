import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Project } from '../../api/client';
import { renderInApp } from '../../test/render';
import { ProjectLimitsCard } from './ProjectLimitsCard';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const project = (limits: Project['limits']): Project => ({ id: 'p1', slug: 'acme', name: 'Acme', description: '', limits, role: 'admin', created_at: null, updated_at: null });
const spendOf = (limits: Project['limits'], more: Record<string, unknown> = {}) => ({ month: '2026-12', cost_usd: 0.8, requests: 9, unpriced_requests: 0, limits, warned_at: null, ...more });

/** Answers the spend with `spend`, and a PATCH with `patch` (recording its body). */
function serve(spend: unknown, patch: (body: unknown) => Response = (b) => json({ ...project((b as { limits: Project['limits'] }).limits) })) {
  const patches: unknown[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    const url = new URL(req.url);
    if (req.method === 'GET' && url.pathname === '/api/projects/acme/spend') return json(spend);
    if (req.method === 'PATCH' && url.pathname === '/api/projects/acme') {
      const body = await req.json();
      patches.push(body);
      return patch(body);
    }
    return json({ detail: `unexpected ${req.method} ${url.pathname}` }, 500);
  });
  return patches;
}

describe('the project’s monthly spend limit', () => {
  it('shows the month’s spend against the limit, the unpriced calls and the warning', async () => {
    serve(spendOf({ monthly_cost_usd: 1 }, { unpriced_requests: 2, warned_at: new Date().toISOString() }));
    renderInApp(<ProjectLimitsCard project={project({ monthly_cost_usd: 1 })} operator />);
    expect(await screen.findByTestId('spend-meter-text')).toHaveTextContent('$0.80 of $1.00 this month (2026-12)');
    expect(screen.getByTestId('spend-meter')).toHaveAttribute('data-percent', '80');
    expect(screen.getByTestId('spend-meter-percent')).toHaveTextContent('80 %');
    expect(screen.getByRole('progressbar')).toHaveAttribute('aria-valuenow', '80');
    expect(screen.getByTestId('spend-meter-unpriced')).toHaveTextContent('+ 2 unpriced calls, not counted against the limit');
    expect(screen.getByTestId('spend-meter-warned')).toHaveTextContent('The 80 % warning went out');
    expect(screen.getByRole('textbox', { name: 'Monthly limit (US dollars)' })).toHaveValue('1');
  });

  it('says a limit reached, the bar full', async () => {
    serve(spendOf({ monthly_cost_usd: 0.5 }, { cost_usd: 0.6 }));
    renderInApp(<ProjectLimitsCard project={project({ monthly_cost_usd: 0.5 })} operator />);
    expect(await screen.findByTestId('spend-meter-percent')).toHaveTextContent('120 % · reached');
    expect(screen.getByTestId('spend-meter')).toHaveAttribute('data-reached', 'true');
    expect(screen.getByRole('progressbar')).toHaveAttribute('aria-valuenow', '100');
  });

  it('lets an operator set, change and remove the limit, sending the whole set', async () => {
    const patches = serve(spendOf({}));
    const { unmount } = renderInApp(<ProjectLimitsCard project={project({})} operator />);
    expect(await screen.findByTestId('project-no-limit')).toHaveTextContent('No monthly limit is set.');
    await userEvent.type(screen.getByRole('textbox', { name: 'Monthly limit (US dollars)' }), '0.5');
    await userEvent.click(screen.getByRole('button', { name: 'Set limit' }));
    await waitFor(() => expect(patches).toEqual([{ limits: { monthly_cost_usd: 0.5 } }]));
    unmount();

    renderInApp(<ProjectLimitsCard project={project({ monthly_cost_usd: 0.5 })} operator />);
    await userEvent.click(await screen.findByRole('button', { name: 'Remove limit' }));
    await waitFor(() => expect(patches).toEqual([{ limits: { monthly_cost_usd: 0.5 } }, { limits: {} }]));
  });

  it('keeps the project’s capacity when the limit is set or removed (the PATCH replaces the set)', async () => {
    const capacity = { max_sandboxes: 1, max_runs: 2, requests_per_minute: 600 };
    const patches = serve(spendOf(capacity));
    const { unmount } = renderInApp(<ProjectLimitsCard project={project(capacity)} operator />);
    await userEvent.type(await screen.findByRole('textbox', { name: 'Monthly limit (US dollars)' }), '5');
    await userEvent.click(screen.getByRole('button', { name: 'Set limit' }));
    await waitFor(() => expect(patches).toEqual([{ limits: { ...capacity, monthly_cost_usd: 5 } }]));
    unmount();

    renderInApp(<ProjectLimitsCard project={project({ ...capacity, monthly_cost_usd: 5 })} operator />);
    await userEvent.click(await screen.findByRole('button', { name: 'Remove limit' }));
    await waitFor(() => expect(patches).toHaveLength(2));
    expect(patches[1]).toEqual({ limits: capacity });
  });

  it('checks the field before sending, and shows a 422 at the field', async () => {
    const patches = serve(spendOf({}), () => json({ detail: [{ loc: ['body', 'limits', 'monthly_cost_usd'], msg: 'must be at most 1000000', type: 'value_error' }] }, 422));
    renderInApp(<ProjectLimitsCard project={project({})} operator />);
    const field = await screen.findByRole('textbox', { name: 'Monthly limit (US dollars)' });
    await userEvent.type(field, '2000000');
    await userEvent.click(screen.getByRole('button', { name: 'Set limit' }));
    expect(await screen.findByText('A number of US dollars, 0 to 1,000,000.')).toBeInTheDocument();
    expect(patches).toEqual([]);
    // What the server refuses anyway lands at the same field.
    await userEvent.clear(field);
    await userEvent.type(field, '5');
    await userEvent.click(screen.getByRole('button', { name: 'Set limit' }));
    expect(await screen.findByText('must be at most 1000000')).toBeInTheDocument();
    expect(field).toHaveAttribute('aria-invalid', 'true');
  });

  it('says a 403 as the operators’ business, with the server’s sentence', async () => {
    serve(spendOf({}), () => json({ detail: 'Only an operator may change a project’s limits.' }, 403));
    renderInApp(<ProjectLimitsCard project={project({})} operator />);
    await userEvent.type(await screen.findByRole('textbox', { name: 'Monthly limit (US dollars)' }), '1');
    await userEvent.click(screen.getByRole('button', { name: 'Set limit' }));
    const alert = await screen.findByTestId('limits-forbidden');
    expect(alert).toHaveTextContent('Only operators may change the project’s limits');
    expect(alert).toHaveTextContent('Only an operator may change a project’s limits.');
  });

  it('offers no field to someone who is not an operator', async () => {
    serve(spendOf({ monthly_cost_usd: 1 }));
    renderInApp(<ProjectLimitsCard project={project({ monthly_cost_usd: 1 })} operator={false} />);
    expect(await screen.findByTestId('spend-meter-text')).toHaveTextContent('$0.80 of $1.00 this month (2026-12)');
    expect(screen.getByTestId('project-limits-readonly')).toHaveTextContent('The limit is $1.00 a month; only an operator can change it.');
    expect(screen.queryByRole('textbox', { name: 'Monthly limit (US dollars)' })).toBeNull();
  });
});
