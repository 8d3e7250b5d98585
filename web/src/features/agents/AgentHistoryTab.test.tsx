import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Agent } from '../../api/client';
import { renderInApp } from '../../test/render';
import { AgentHistoryTab } from './AgentHistoryTab';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
const agentAt = (version: number, instructions: string) => ({ id: 'A1', slug: 'analyst', name: 'Analyst', model: 'fake-model', instructions, version, archived_at: null, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-02T00:00:00Z' }) as unknown as Agent;
const at = '2026-01-01T00:00:00Z';
const HISTORY = [
  { version: 4, created_at: at, changed_by: { kind: 'api_key', id: 'k1', name: 'ci' }, changed: ['instructions'], restored_from: 1 },
  { version: 3, created_at: at, changed_by: { kind: 'user', id: 'u1', name: 'ada@example.com' }, changed: ['instructions', 'model'], restored_from: null },
  { version: 2, created_at: at, changed_by: { kind: 'open', id: null, name: null }, changed: [], restored_from: null },
  { version: 1, created_at: at, changed_by: null, changed: [], restored_from: null },
];

/** The API of one agent's history; `restore` answers the POST. */
function serve(restore: (body: unknown, version: number) => Response, total = HISTORY.length) {
  const calls: string[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    const url = new URL(req.url);
    calls.push(`${req.method} ${url.pathname}${url.search}`);
    if (url.pathname === '/api/agents/analyst/versions') return json(HISTORY, 200, { 'X-Total-Count': String(total) });
    const one = /^\/api\/agents\/analyst\/versions\/(\d+)$/.exec(url.pathname);
    if (one) {
      const n = Number(one[1]);
      return json({ ...HISTORY.find((h) => h.version === n), agent: agentAt(n, `Instructions of v${n}`) });
    }
    const restoring = /^\/api\/agents\/analyst\/versions\/(\d+)\/restore$/.exec(url.pathname);
    if (restoring && req.method === 'POST') return restore(await req.json(), Number(restoring[1]));
    return json({ detail: 'unexpected' }, 404);
  });
  return calls;
}

const rowOf = (version: number) => screen.getAllByTestId('agent-version').find((r) => r.getAttribute('data-version') === String(version))!;

describe('the history tab', () => {
  it('lists each version: who, what changed, a restore, the current one; and compares two', async () => {
    const calls = serve(() => json({}));
    renderInApp(<AgentHistoryTab agent={agentAt(4, 'Instructions of v4')} focus={null} onRestored={() => {}} onStale={() => {}} />);
    await waitFor(() => expect(screen.getAllByTestId('agent-version')).toHaveLength(4));
    expect(within(rowOf(4)).getByTestId('version-current')).toHaveTextContent('current');
    expect(within(rowOf(4)).getByTestId('version-restored-from')).toHaveTextContent('restored from v1');
    expect(within(rowOf(4)).getByTestId('version-by')).toHaveTextContent('API keyci');
    expect(within(rowOf(3)).getByTestId('version-by')).toHaveTextContent('personada@example.com');
    expect(within(rowOf(3)).getAllByTestId('version-changed-field').map((e) => e.textContent)).toEqual(['instructions', 'model']);
    expect(within(rowOf(2)).getByTestId('version-changes')).toHaveTextContent('no changes');
    expect(within(rowOf(2)).getByTestId('version-by')).toHaveTextContent('open mode');
    expect(within(rowOf(1)).getByTestId('version-changes')).toHaveTextContent('created');
    expect(within(rowOf(1)).getByTestId('version-by')).toHaveTextContent('unknown');
    // The current version has nothing to restore.
    expect(within(rowOf(4)).queryByRole('button', { name: 'Restore' })).toBeNull();
    expect(within(rowOf(1)).getByRole('button', { name: 'Restore' })).toBeInTheDocument();
    // One page: no pager.
    expect(screen.queryByLabelText('Pages of versions')).toBeNull();
    // The one before the current against it, first.
    expect(await screen.findByTestId('compare-summary')).toHaveTextContent('v3 → v4: differ in instructions');
    expect(calls).toContain('GET /api/agents/analyst/versions?limit=20&offset=0');
    // Another pair, from a row.
    await userEvent.click(within(rowOf(1)).getByRole('button', { name: 'Compare with current' }));
    await waitFor(() => expect(screen.getByTestId('compare-summary')).toHaveTextContent('v1 → v4: differ in instructions'));
  });

  it('starts at the version the URL names, and pages a long history', async () => {
    const calls = serve(() => json({}), 45);
    renderInApp(<AgentHistoryTab agent={agentAt(45, 'now')} focus={12} onRestored={() => {}} onStale={() => {}} />);
    await waitFor(() => expect(calls).toContain('GET /api/agents/analyst/versions?limit=20&offset=20'));
    expect(await screen.findByLabelText('Pages of versions')).toBeInTheDocument();
    expect(await screen.findByTestId('compare-summary')).toHaveTextContent('v12 → v45');
  });

  it('restores under the current version, and says a stale lock and a definition not valid now', async () => {
    const posted: unknown[] = [];
    const answers = [
      json({ detail: 'agent was modified (version 4 is stale; current is 5); read it again and re-apply your change' }, 409),
      json({ detail: [{ loc: ['body', 'subagents', 0, 'agent'], msg: "no agent 'helper' in this project" }] }, 422),
      json(agentAt(5, 'Instructions of v1')),
    ];
    serve((body) => {
      posted.push(body);
      return answers.shift()!;
    });
    const onStale = vi.fn();
    const onRestored = vi.fn();
    renderInApp(<AgentHistoryTab agent={agentAt(4, 'Instructions of v4')} focus={null} onRestored={onRestored} onStale={onStale} />);
    const user = userEvent.setup({ delay: null });
    await waitFor(() => expect(screen.getAllByTestId('agent-version')).toHaveLength(4));
    const restoreV1 = async () => {
      await user.click(within(rowOf(1)).getByRole('button', { name: 'Restore' }));
      await user.click(await screen.findByRole('button', { name: 'Restore v1' }));
    };

    await restoreV1();
    const stale = await screen.findByTestId('restore-error');
    expect(stale).toHaveTextContent('Not restored: the agent changed meanwhile');
    expect(stale).toHaveTextContent('version 4 is stale; current is 5');
    expect(onStale).toHaveBeenCalledTimes(1);

    await restoreV1();
    await waitFor(() => expect(screen.getByTestId('restore-error')).toHaveTextContent('Not restored: v1 is not valid now'));
    expect(screen.getByTestId('restore-error')).toHaveTextContent("subagents.0.agent: no agent 'helper' in this project");

    await restoreV1();
    await waitFor(() => expect(onRestored).toHaveBeenCalledWith(expect.objectContaining({ version: 5 })));
    expect(screen.queryByTestId('restore-error')).toBeNull();
    expect(posted).toEqual([{ version: 4 }, { version: 4 }, { version: 4 }]);
  }, 30_000);
});
