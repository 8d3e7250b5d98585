import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ProcessDetail, SessionDetail } from '../../api/client';
import { renderInApp } from '../../test/render';
import ProcessesTab from './ProcessesTab';

const session = { id: 'S', status: 'running' } as SessionDetail;
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const base = { pid: 7, cwd: '/workspace', exit_code: null, signal: null, started_at: '2026-05-09T08:00:00Z', ended_at: null };
const server = { id: 'proc_1', command: 'python -m http.server', status: 'running' as const, ...base };
const done = { id: 'proc_2', command: 'make test', status: 'exited' as const, ...base, exit_code: 2, ended_at: '2026-05-09T08:01:00Z' };
const output = { stdout: '', stderr: '', stdout_dropped: 0, stderr_dropped: 0 };

/** A fake API: answers from `routes` by "METHOD /path", recording every request's body. */
function fakeApi(routes: Record<string, (body: unknown) => Response>) {
  const calls: { method: string; path: string; body: unknown }[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    const path = new URL(req.url).pathname;
    const text = await req.text();
    const body = text ? JSON.parse(text) : undefined;
    calls.push({ method: req.method, path, body });
    return routes[`${req.method} ${path}`]?.(body) ?? json({ detail: 'unexpected' }, 404);
  });
  return calls;
}

afterEach(() => vi.restoreAllMocks());

describe('ProcessesTab', () => {
  it('lists the processes and starts one with the command and working directory', async () => {
    let list = [server, done];
    const calls = fakeApi({
      'GET /api/sessions/S/processes': () => json(list),
      'POST /api/sessions/S/processes': () => {
        list = [...list, { ...server, id: 'proc_3', command: 'echo hi' }];
        return json(list[2], 201);
      },
      'GET /api/sessions/S/processes/proc_3': () => json({ ...list[2], ...output, stdout: 'hi\n' }),
    });
    renderInApp(<ProcessesTab session={session} />);
    const table = await screen.findByRole('table', { name: 'Background processes' });
    const rows = within(table).getAllByTestId('process-row');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent('python -m http.server');
    expect(within(rows[0]).getByTestId('process-status')).toHaveTextContent('running');
    expect(within(rows[0]).getByRole('button', { name: 'Kill proc_1' })).toBeInTheDocument();
    expect(within(rows[1]).getByTestId('process-status')).toHaveTextContent('exited');
    expect(rows[1]).toHaveTextContent('2');
    expect(within(rows[1]).getByRole('button', { name: 'Remove proc_2' })).toBeInTheDocument();

    const user = userEvent.setup({ delay: null });
    await user.type(screen.getByRole('textbox', { name: /Command/ }), 'echo hi');
    await user.type(screen.getByRole('textbox', { name: /Working directory/ }), 'sub');
    await user.click(screen.getByRole('button', { name: 'Start process' }));
    // The new process is listed and shown, with its output.
    expect(await screen.findByRole('button', { name: 'Kill proc_3' })).toBeInTheDocument();
    expect(await screen.findByRole('region', { name: 'Standard output of proc_3' })).toHaveTextContent('hi');
    expect(calls.filter((c) => c.method === 'POST')).toEqual([{ method: 'POST', path: '/api/sessions/S/processes', body: { command: 'echo hi', cwd: 'sub' } }]);
    expect(screen.getByRole('textbox', { name: /Command/ })).toHaveValue('');
  }, 30_000);

  it('kills a running process and shows how it ended once it left the list', async () => {
    let list = [server];
    const final: ProcessDetail = { ...server, ...output, status: 'exited', exit_code: 143, signal: 15, ended_at: '2026-05-09T08:02:00Z', stdout: 'Serving on :8000\n', stderr: 'Terminated\n' };
    const calls = fakeApi({
      'GET /api/sessions/S/processes': () => json(list),
      'DELETE /api/sessions/S/processes/proc_1': () => {
        list = [];
        return json(final);
      },
    });
    renderInApp(<ProcessesTab session={session} />);
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('button', { name: 'Kill proc_1' }));
    const ended = await screen.findByRole('region', { name: 'Output of proc_1' });
    expect(within(ended).getByTestId('process-ended')).toHaveTextContent('Killed and removed');
    expect(within(ended).getByTestId('process-status')).toHaveTextContent('exited');
    expect(ended).toHaveTextContent('exit 143 · SIGTERM');
    expect(within(ended).getByRole('region', { name: 'Standard output of proc_1' })).toHaveTextContent('Serving on :8000');
    expect(within(ended).getByRole('region', { name: 'Standard error of proc_1' })).toHaveTextContent('Terminated');
    // The list is read again, and the process is gone from it.
    expect(await screen.findByText('No background processes')).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'DELETE').map((c) => c.path)).toEqual(['/api/sessions/S/processes/proc_1']);
  }, 30_000);

  it('shows the API’s detail when a process does not start', async () => {
    fakeApi({
      'GET /api/sessions/S/processes': () => json([]),
      'POST /api/sessions/S/processes': () => json({ detail: 'No such working directory: nope (relative to /workspace).' }, 404),
    });
    renderInApp(<ProcessesTab session={session} />);
    const user = userEvent.setup({ delay: null });
    await user.type(await screen.findByRole('textbox', { name: /Command/ }), 'ls');
    await user.type(screen.getByRole('textbox', { name: /Working directory/ }), 'nope');
    await user.click(screen.getByRole('button', { name: 'Start process' }));
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('The process did not start');
    expect(alert).toHaveTextContent('No such working directory: nope (relative to /workspace).');
    // What was typed stays, to be corrected.
    expect(screen.getByRole('textbox', { name: /Command/ })).toHaveValue('ls');
  }, 30_000);

  it('says a stopped sandbox has no processes, without asking the API', async () => {
    const calls = fakeApi({});
    renderInApp(<ProcessesTab session={{ ...session, status: 'stopped' }} />);
    expect(screen.getByText(/The sandbox is stopped: background processes need it running/)).toBeInTheDocument();
    await waitFor(() => expect(calls).toEqual([]));
  });
});
