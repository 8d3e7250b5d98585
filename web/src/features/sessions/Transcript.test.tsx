import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { renderInApp as wrap } from '../../test/render';
import type { SessionEvent } from '../../api/client';
import { emptyLog } from './events/eventLog';
import { RequiresActionBanner, Transcript } from './Transcript';

afterEach(() => vi.restoreAllMocks());

describe('RequiresActionBanner', () => {
  it('answers a parked client tool call with tool-results', async () => {
    const bodies: unknown[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      expect(req.url).toContain('/api/sessions/S/tool-results');
      expect(req.headers.get('X-Requested-With')).toBe('XMLHttpRequest');
      bodies.push(await req.json());
      return new Response(null, { status: 204 });
    });
    const onAnswered = vi.fn();
    wrap(<RequiresActionBanner sessionId="S" onAnswered={onAnswered} pending={[{ call_id: 'c1', tool: 'ask_user', arguments: '{"q":"ok?"}', seq: 4, deferrable: true, run_id: 'R' }]} />);
    expect(screen.getByTestId('requires-action')).toHaveTextContent('Requires action');
    await userEvent.type(screen.getByLabelText('Answer to ask_user'), 'yes');
    await userEvent.click(screen.getByLabelText('Report as an error'));
    await userEvent.click(screen.getByRole('button', { name: 'Send answer' }));
    await waitFor(() => expect(onAnswered).toHaveBeenCalled());
    expect(bodies).toEqual([{ call_id: 'c1', output: 'yes', is_error: true }]);
  });
});

const ev = (seq: number, type: string, payload: Record<string, unknown> = {}): SessionEvent =>
  ({ seq, type, payload, run_id: 'R', session_id: 'S', created_at: '2026-01-01T00:00:00Z' }) as SessionEvent;

describe('a turn stopped at the budget', () => {
  // jsdom lays nothing out: give the transcript's scroll box (and each row) a size, so the
  // virtual list renders its rows.
  beforeEach(() => {
    vi.spyOn(Element.prototype, 'clientHeight', 'get').mockReturnValue(600);
    vi.spyOn(Element.prototype, 'clientWidth', 'get').mockReturnValue(800);
    vi.spyOn(HTMLElement.prototype, 'getBoundingClientRect').mockReturnValue({ x: 0, y: 0, top: 0, left: 0, bottom: 60, right: 800, width: 800, height: 60, toJSON: () => ({}) } as DOMRect);
  });
  const hit = (used: number, max: number) => ({ limit: 'max_cost_usd', max, used, budget: { max_cost_usd: max } });
  const stop = (seq: number, used: number, max: number) => [
    ev(seq, 'session.budget_reached', hit(used, max)),
    ev(seq + 1, 'session.status_idle', { stop_reason: 'budget_reached', run_status: 'completed', turns: 4, budget: hit(used, max), usage: { input_tokens: 400, output_tokens: 40, requests: 4 } }),
  ];

  it('names the limit in words, ends as a normal run, and offers to raise the budget on the newest end only', async () => {
    const onRaise = vi.fn();
    const log = { ...emptyLog(), events: [ev(1, 'user.message', { text: 'loop' }), ...stop(2, 0.4000000000000001, 0.35), ev(4, 'user.message', { text: 'go on' }), ...stop(5, 0.6, 0.55)] };
    wrap(<Transcript log={log} pending={[]} height="600px" onRaiseBudget={onRaise} />);
    const reached = await screen.findAllByTestId('budget-reached');
    expect(reached.map((r) => r.getAttribute('data-limit'))).toEqual(['max_cost_usd', 'max_cost_usd']);
    expect(screen.getAllByTestId('budget-reached-text').map((t) => t.textContent)).toEqual([
      'Stopped at the budget: cost $0.40 of the $0.35 limit',
      'Stopped at the budget: cost $0.60 of the $0.55 limit',
    ]);
    expect(reached[0]).toHaveTextContent('nothing failed');
    const ends = screen.getAllByTestId('run-end');
    expect(ends.map((e) => e.textContent)).toEqual([expect.stringContaining('Run finished · stopped at the budget · 4 turns'), expect.stringContaining('Run finished · stopped at the budget · 4 turns')]);
    // Not an error: not said as a failure, and no red.
    expect(ends[1]).not.toHaveTextContent(/failed/i);
    expect(screen.getAllByTestId('raise-budget-hint')).toHaveLength(1);
    expect(ends[1]).toContainElement(screen.getByTestId('raise-budget-hint'));
    await userEvent.click(screen.getByRole('button', { name: 'Raise the budget' }));
    expect(onRaise).toHaveBeenCalledTimes(1);
  });

  it('offers nothing once a later turn ended otherwise', async () => {
    const log = { ...emptyLog(), events: [...stop(1, 0.4, 0.35), ev(3, 'user.message', { text: 'hi' }), ev(4, 'session.status_idle', { stop_reason: 'end_turn', turns: 1 })] };
    wrap(<Transcript log={log} pending={[]} height="600px" onRaiseBudget={() => {}} />);
    expect(await screen.findAllByTestId('run-end')).toHaveLength(2);
    expect(screen.queryByTestId('raise-budget-hint')).toBeNull();
  });

  it('says a stop at the project’s monthly limit apart, and points to the project’s page, not the session’s budget', async () => {
    const onRaise = vi.fn();
    const hit = { limit: 'monthly_cost_usd', max: 0.5, used: 0.5, scope: 'project' };
    const log = {
      ...emptyLog(),
      events: [
        ev(1, 'user.message', { text: 'loop' }),
        ev(2, 'session.spend_warning', { limit: 'monthly_cost_usd', max: 0.5, spent: 0.4, month: '2026-12', at: 0.8 }),
        ev(3, 'session.budget_reached', hit),
        ev(4, 'session.status_idle', { stop_reason: 'budget_reached', run_status: 'completed', turns: 5, budget: hit }),
      ],
    };
    wrap(<Transcript log={log} pending={[]} height="600px" onRaiseBudget={onRaise} projectPath="/projects/default" />);
    expect(await screen.findByTestId('spend-warning-text')).toHaveTextContent('The project has spent $0.40 of its $0.50 monthly limit (80 %)');
    expect(screen.getByTestId('spend-warning')).toHaveTextContent('This month (2026-12, UTC)');
    const reached = screen.getByTestId('budget-reached');
    expect(reached).toHaveAttribute('data-scope', 'project');
    expect(screen.getByTestId('budget-reached-text')).toHaveTextContent("Stopped at the project's monthly spend limit: $0.50 spent of $0.50");
    expect(reached).not.toHaveTextContent('session’s budget');
    expect(screen.getByTestId('run-end')).toHaveTextContent('Run finished · stopped at the project’s monthly spend limit · 5 turns');
    // No session budget dialog: the project's page instead.
    expect(screen.queryByTestId('raise-budget-hint')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Raise the budget' })).toBeNull();
    expect(screen.getByTestId('project-limit-hint')).toHaveTextContent('until an operator raises its monthly limit');
    expect(screen.getByRole('link', { name: /Project’s spend limit/ })).toHaveAttribute('href', '/projects/default');
    expect(onRaise).not.toHaveBeenCalled();
  });
});

describe('a call that waits for approval', () => {
  beforeEach(() => {
    vi.spyOn(Element.prototype, 'clientHeight', 'get').mockReturnValue(600);
    vi.spyOn(Element.prototype, 'clientWidth', 'get').mockReturnValue(800);
    vi.spyOn(HTMLElement.prototype, 'getBoundingClientRect').mockReturnValue({ x: 0, y: 0, top: 0, left: 0, bottom: 60, right: 800, width: 800, height: 60, toJSON: () => ({}) } as DOMRect);
  });
  const sub = { agent: 'cleaner', call_id: 'c0' };
  const waiting = (extra: Record<string, unknown> = {}) => ({
    ...emptyLog(),
    events: [
      ev(1, 'user.message', { text: 'clean up' }),
      ev(2, 'agent.tool_use', { tool: 'shell', call_id: 'c1', arguments: '{"command":"rm -rf build"}', awaiting_approval: true, ...extra }),
      ev(3, 'session.status_idle', { stop_reason: 'requires_action', run_status: 'running', call_ids: ['c1'] }),
    ],
  });
  const decisions = (status: number, body: unknown = null) => {
    const sent: unknown[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      expect(new URL(req.url).pathname).toBe('/api/sessions/S/tool-confirmations');
      expect(req.method).toBe('POST');
      expect(req.headers.get('X-Requested-With')).toBe('XMLHttpRequest');
      sent.push(await req.json());
      return body === null ? new Response(null, { status }) : new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
    });
    return sent;
  };

  it('shows the tool, its arguments and who asks, and approves it', async () => {
    const sent = decisions(204);
    const onDecided = vi.fn();
    wrap(<Transcript log={waiting({ subagent: undefined })} pending={[]} height="600px" sessionId="S" onDecided={onDecided} />);
    const call = await screen.findByTestId('tool-call');
    expect(call).toHaveAttribute('data-approval', 'waiting');
    expect(call).toHaveTextContent('awaiting approval');
    expect(call).toHaveTextContent('"command": "rm -rf build"');
    expect(screen.getByTestId('run-end')).toHaveTextContent('Paused for approval');
    await userEvent.click(screen.getByRole('button', { name: 'Approve' }));
    await waitFor(() => expect(onDecided).toHaveBeenCalled());
    expect(sent).toEqual([{ call_id: 'c1', decision: 'allow', message: null }]);
    expect(screen.getByRole('button', { name: 'Deny' })).toBeDisabled();
  });

  it('denies it with a message', async () => {
    const sent = decisions(204);
    const log = waiting({ subagent: sub });
    log.events.splice(1, 0, ev(0, 'agent.tool_use', { tool: 'cleaner', call_id: 'c0', arguments: '{"task":"tidy"}', agent: 'cleaner' }));
    log.events.forEach((e, i) => (e.seq = i + 1));
    wrap(<Transcript log={log} pending={[]} height="600px" sessionId="S" onDecided={() => {}} />);
    // A subagent's call: under the call that invoked it, which opens to show it.
    expect(await screen.findByTestId('subagent-steps')).toContainElement(screen.getByTestId('approval-waiting'));
    expect(screen.getByTestId('approval-who')).toHaveTextContent('asked by the subagent cleaner');
    await userEvent.type(screen.getByRole('textbox', { name: /Message/ }), 'Not now');
    await userEvent.click(screen.getByRole('button', { name: 'Deny' }));
    await waitFor(() => expect(sent).toEqual([{ call_id: 'c1', decision: 'deny', message: 'Not now' }]));
  });

  it('says a stale decision’s 409 and reads again what waits', async () => {
    decisions(409, { detail: "no call 'c1' waits for a decision in this session: it was decided or cancelled" });
    const onDecided = vi.fn();
    wrap(<Transcript log={waiting()} pending={[]} height="600px" sessionId="S" onDecided={onDecided} />);
    await userEvent.click(await screen.findByRole('button', { name: 'Approve' }));
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('Not decided: the call no longer waits');
    expect(alert).toHaveTextContent('it was decided or cancelled');
    expect(onDecided).toHaveBeenCalled();
  });

  it('shows the decision, by whom, and the result after it', async () => {
    const log = waiting();
    log.events.push(
      ev(4, 'agent.tool_confirmation', { call_id: 'c1', tool: 'shell', decision: 'deny', message: 'Keep the build', by: { kind: 'open', id: null, name: null } }),
      ev(5, 'agent.message', { text: 'Understood.' }),
    );
    wrap(<Transcript log={log} pending={[]} height="600px" sessionId="S" />);
    const decision = await screen.findByTestId('approval-decision');
    expect(decision).toHaveAttribute('data-decision', 'denied');
    expect(decision).toHaveTextContent('Denied by open mode: Keep the build');
    expect(screen.getByTestId('tool-call')).toHaveTextContent('denied');
    expect(screen.queryByRole('button', { name: 'Approve' })).toBeNull();
  });
});

describe('RequiresActionBanner with approvals', () => {
  it('says the run waits for approval, and of which calls', () => {
    wrap(<RequiresActionBanner sessionId="S" onAnswered={() => {}} pending={[]} approvals={[{ call_id: 'c1', tool: 'shell', kind: 'sandbox', arguments: '{}', run_id: 'R', seq: 2, subagent: null }, { call_id: 'c2', tool: 'write_file', kind: 'sandbox', arguments: '{}', run_id: 'R', seq: 3, subagent: { agent: 'cleaner', call_id: 'c0' } as never }]} />);
    expect(screen.getByTestId('requires-approval')).toHaveTextContent('Waiting for approval');
    expect(screen.getByTestId('requires-approval')).toHaveTextContent('shell, write_file (asked by cleaner)');
  });
});

describe('MCP in the transcript', () => {
  beforeEach(() => {
    vi.spyOn(Element.prototype, 'clientHeight', 'get').mockReturnValue(600);
    vi.spyOn(Element.prototype, 'clientWidth', 'get').mockReturnValue(800);
    vi.spyOn(HTMLElement.prototype, 'getBoundingClientRect').mockReturnValue({ x: 0, y: 0, top: 0, left: 0, bottom: 60, right: 800, width: 800, height: 60, toJSON: () => ({}) } as DOMRect);
  });

  it('badges an MCP call with its server, and shows an unreachable server as a warning, or an error when required', async () => {
    const log = {
      ...emptyLog(),
      events: [
        ev(1, 'agent.tool_use', { tool: 'mcp__calc__add', call_id: 'c1', arguments: '{"a":2,"b":3}', mcp_server: 'calc' }),
        ev(2, 'agent.tool_result', { tool: 'mcp__calc__add', call_id: 'c1', output: '5', mcp_server: 'calc' }),
        ev(3, 'agent.tool_use', { tool: 'shell', call_id: 'c2', arguments: '{"command":"ls"}' }),
        ev(4, 'agent.mcp_server_error', { mcp_server: 'github', error: 'connection refused', required: false }),
        ev(5, 'agent.mcp_server_error', { mcp_server: 'db', error: 'timed out', required: true }),
      ],
    };
    wrap(<Transcript log={log} pending={[]} height="600px" />);
    const calls = await screen.findAllByTestId('tool-call');
    expect(calls).toHaveLength(2);
    expect(screen.getAllByTestId('mcp-badge').map((b) => b.textContent)).toEqual(['MCP · calc']);
    expect(calls[0]).toContainElement(screen.getByTestId('mcp-badge'));
    const errors = screen.getAllByTestId('mcp-server-error');
    expect(errors.map((e) => [e.getAttribute('data-server'), e.getAttribute('data-required')])).toEqual([
      ['github', 'false'],
      ['db', 'true'],
    ]);
    expect(errors[0]).toHaveTextContent('MCP server github could not be reached: connection refused');
    expect(errors[0]).toHaveTextContent('the turn went on without them');
    expect(errors[1]).toHaveTextContent('It is required, so the turn failed.');
  });
});
