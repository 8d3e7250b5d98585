import { act, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Project } from '../../api/client';
import { renderInApp } from '../../test/render';
import { CAPACITY_REFRESH_MS, ProjectCapacityCard } from './ProjectCapacityCard';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const project = (limits: Project['limits']): Project => ({ id: 'p1', slug: 'acme', name: 'Acme', description: '', limits, role: 'admin', created_at: null, updated_at: null });
const spendOf = (limits: Project['limits'], more: Record<string, unknown> = {}) => ({
  month: '2026-12',
  cost_usd: 0,
  requests: 0,
  unpriced_requests: 0,
  limits,
  warned_at: null,
  sandboxes: 0,
  sandboxes_queued: 0,
  runs: 0,
  runs_queued: 0,
  ...more,
});

/** Answers the spend with `spend` (counting the asks), and a PATCH with `patch` (recording its body). */
function serve(spend: unknown, patch: (body: unknown) => Response = (b) => json(project((b as { limits: Project['limits'] }).limits))) {
  const patches: unknown[] = [];
  const asked = { spend: 0 };
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    const url = new URL(req.url);
    if (req.method === 'GET' && url.pathname === '/api/projects/acme/spend') {
      asked.spend++;
      return json(spend);
    }
    if (req.method === 'PATCH' && url.pathname === '/api/projects/acme') {
      const body = await req.json();
      patches.push(body);
      return patch(body);
    }
    return json({ detail: `unexpected ${req.method} ${url.pathname}` }, 500);
  });
  return { patches, asked };
}

const field = (name: string) => screen.getByRole('textbox', { name });
const MESSAGE = 'A whole number, 1 to 1,000,000 (empty for the server’s default).';

describe('the project’s capacity', () => {
  it('shows what the project runs now against its limits, and the limits in the fields', async () => {
    const limits = { max_sandboxes: 2, max_runs: 1, requests_per_minute: 600 };
    serve(spendOf(limits, { sandboxes: 1, sandboxes_queued: 1 }));
    renderInApp(<ProjectCapacityCard project={project(limits)} operator />);
    expect(await screen.findByTestId('capacity-sandboxes')).toHaveTextContent('1 of 2 sandboxes · 1 queued');
    expect(screen.getByTestId('capacity-runs')).toHaveTextContent('0 of 1 turns in flight');
    expect(screen.getByTestId('capacity-requests')).toHaveTextContent('600 a minute, all its callers together');
    expect(screen.getByRole('progressbar', { name: 'Sandboxes at once: 1 of 2 sandboxes · 1 queued' })).toHaveAttribute('aria-valuenow', '50');
    expect(field('Sandboxes at once')).toHaveValue('2');
    expect(field('Turns in flight')).toHaveValue('1');
    expect(field('Requests per minute')).toHaveValue('600');
  });

  it('says the counts alone without a project limit, and that an empty field is the server’s default', async () => {
    serve(spendOf({}, { sandboxes: 3, runs: 1 }));
    renderInApp(<ProjectCapacityCard project={project({})} operator />);
    expect(await screen.findByTestId('capacity-sandboxes')).toHaveTextContent('3 sandboxes · no project limit');
    expect(screen.getByTestId('capacity-runs')).toHaveTextContent('1 turn in flight · no project limit');
    expect(screen.getByTestId('capacity-requests')).toHaveTextContent('no project limit');
    expect(screen.queryByRole('progressbar')).toBeNull();
    expect(field('Sandboxes at once')).toHaveValue('');
    expect(field('Sandboxes at once')).toHaveAttribute('placeholder', 'server’s default');
    expect(screen.getAllByText(/Empty: the server’s default\./)).toHaveLength(3);
  });

  it('reads what runs now again every few seconds', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const { asked } = serve(spendOf({}));
    renderInApp(<ProjectCapacityCard project={project({})} operator />);
    await screen.findByTestId('capacity-sandboxes');
    expect(asked.spend).toBe(1);
    await act(async () => {
      await vi.advanceTimersByTimeAsync(CAPACITY_REFRESH_MS + 100);
    });
    await waitFor(() => expect(asked.spend).toBe(2));
  });

  it('sends the whole set, the monthly spend limit kept', async () => {
    const { patches } = serve(spendOf({ monthly_cost_usd: 5 }));
    const { unmount } = renderInApp(<ProjectCapacityCard project={project({ monthly_cost_usd: 5 })} operator />);
    await userEvent.type(await screen.findByRole('textbox', { name: 'Sandboxes at once' }), '1');
    await userEvent.type(field('Turns in flight'), '2');
    await userEvent.type(field('Requests per minute'), '600');
    await userEvent.click(screen.getByRole('button', { name: 'Save capacity' }));
    await waitFor(() => expect(patches).toEqual([{ limits: { monthly_cost_usd: 5, max_sandboxes: 1, max_runs: 2, requests_per_minute: 600 } }]));
    unmount();

    // Emptied, a field goes back to the server's default; the monthly limit stays.
    renderInApp(<ProjectCapacityCard project={project({ monthly_cost_usd: 5, max_sandboxes: 1, max_runs: 2, requests_per_minute: 600 })} operator />);
    await userEvent.clear(await screen.findByRole('textbox', { name: 'Turns in flight' }));
    await userEvent.click(screen.getByRole('button', { name: 'Save capacity' }));
    await waitFor(() => expect(patches).toHaveLength(2));
    expect(patches[1]).toEqual({ limits: { monthly_cost_usd: 5, max_sandboxes: 1, requests_per_minute: 600 } });
  });

  it('checks each field before sending, and shows a 422 at its field', async () => {
    const { patches } = serve(spendOf({}), () => json({ detail: [{ loc: ['body', 'limits', 'max_runs'], msg: 'must be at most 1000000', type: 'value_error' }] }, 422));
    renderInApp(<ProjectCapacityCard project={project({})} operator />);
    const sandboxes = await screen.findByRole('textbox', { name: 'Sandboxes at once' });
    await userEvent.type(sandboxes, '0');
    await userEvent.type(field('Requests per minute'), '2000000');
    await userEvent.click(screen.getByRole('button', { name: 'Save capacity' }));
    expect(await screen.findAllByText(MESSAGE)).toHaveLength(2);
    expect(sandboxes).toHaveAttribute('aria-invalid', 'true');
    expect(field('Turns in flight')).not.toHaveAttribute('aria-invalid', 'true');
    expect(patches).toEqual([]);
    // Fixed, the message goes as the field changes.
    await userEvent.clear(sandboxes);
    await userEvent.type(sandboxes, '1');
    await userEvent.clear(field('Requests per minute'));
    expect(screen.queryByText(MESSAGE)).toBeNull();
    // What the server refuses anyway lands at its own field.
    await userEvent.type(field('Turns in flight'), '5');
    await userEvent.click(screen.getByRole('button', { name: 'Save capacity' }));
    expect(await screen.findByText('must be at most 1000000')).toBeInTheDocument();
    expect(field('Turns in flight')).toHaveAttribute('aria-invalid', 'true');
    expect(sandboxes).not.toHaveAttribute('aria-invalid', 'true');
    expect(patches).toEqual([{ limits: { max_sandboxes: 1, max_runs: 5 } }]);
  });

  it('says a 403 as the operators’ business, with the server’s sentence', async () => {
    serve(spendOf({}), () => json({ detail: 'Only an operator may change a project’s limits.' }, 403));
    renderInApp(<ProjectCapacityCard project={project({})} operator />);
    await userEvent.type(await screen.findByRole('textbox', { name: 'Turns in flight' }), '1');
    await userEvent.click(screen.getByRole('button', { name: 'Save capacity' }));
    const alert = await screen.findByTestId('limits-forbidden');
    expect(alert).toHaveTextContent('Only operators may change the project’s limits');
    expect(alert).toHaveTextContent('Only an operator may change a project’s limits.');
  });

  it('shows the limits read-only to someone who is not an operator', async () => {
    const limits = { max_sandboxes: 2, max_runs: 4, requests_per_minute: 1200 };
    serve(spendOf(limits, { sandboxes: 2 }));
    renderInApp(<ProjectCapacityCard project={project(limits)} operator={false} />);
    const usage = await screen.findByTestId('capacity-usage');
    expect(await within(usage).findByTestId('capacity-sandboxes')).toHaveTextContent('2 of 2 sandboxes');
    expect(within(usage).getByTestId('capacity-sandboxes')).toHaveAttribute('data-full', 'true');
    expect(within(usage).getByTestId('capacity-runs')).toHaveTextContent('0 of 4 turns in flight');
    expect(within(usage).getByTestId('capacity-requests')).toHaveTextContent('1,200 a minute, all its callers together');
    expect(screen.getByTestId('project-capacity-readonly')).toHaveTextContent('Only an operator can change the project’s capacity.');
    expect(screen.queryByRole('textbox')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Save capacity' })).toBeNull();
  });
});
