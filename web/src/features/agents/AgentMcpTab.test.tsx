import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Agent } from '../../api/client';
import { renderInApp } from '../../test/render';
import { AgentMcpTab } from './AgentMcpTab';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const agent = (servers: unknown[], version = 3) => ({ id: 'A1', slug: 'a', name: 'A', version, mcp_servers: servers }) as unknown as Agent;
const CALC = { name: 'calc', url: 'http://127.0.0.1:8123/mcp', required: false, allowed_tools: ['add'] };
const GONE = { name: 'gone', url: 'http://127.0.0.1:9/mcp', required: true };
const STATUS = [
  {
    name: 'calc', kind: 'remote', url: CALC.url, required: false, protocol: '2026-07-28', error: null,
    tools: [
      { name: 'add', offered_as: 'mcp__calc__add', description: 'Adds two integers.', offered: true },
      { name: 'fail', offered_as: 'mcp__calc__fail', description: 'Always fails.', offered: false },
    ],
  },
  { name: 'gone', kind: 'remote', url: GONE.url, required: true, protocol: null, tools: null, error: 'connection refused' },
];

/** The tab's API; `patch` answers the save, `statuses` the check. */
function serve(patch: (body: Record<string, unknown>) => Response = (b) => json({ ...agent(b.mcp_servers as unknown[], 4) }), statuses: unknown[] = STATUS) {
  const calls: string[] = [];
  const bodies: Record<string, unknown>[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    const url = new URL(req.url);
    calls.push(`${req.method} ${url.pathname}`);
    if (url.pathname === '/api/agents/a/mcp-servers') return json(statuses);
    if (url.pathname === '/api/secrets') return json([{ name: 'GH_TOKEN' }]);
    if (url.pathname === '/api/agents/a' && req.method === 'PATCH') {
      const body = (await req.json()) as Record<string, unknown>;
      bodies.push(body);
      return patch(body);
    }
    return json({ detail: 'unexpected' }, 404);
  });
  return { calls, bodies };
}

const card = (name: string) => screen.getAllByTestId('mcp-server').find((c) => c.getAttribute('data-name') === name)!;

describe('the MCP servers tab', () => {
  it('shows what each server answered: its protocol and tools, or its error; and checks again', async () => {
    const { calls } = serve();
    renderInApp(<AgentMcpTab agent={agent([CALC, GONE])} onSaved={() => {}} onStale={() => {}} />);
    const calc = await waitFor(() => within(card('calc')).getByTestId('mcp-status'));
    expect(within(calc).getByTestId('mcp-protocol')).toHaveTextContent('protocol 2026-07-28');
    expect(within(calc).getAllByTestId('mcp-tool').map((t) => [t.getAttribute('data-tool'), t.getAttribute('data-offered')])).toEqual([
      ['add', 'true'],
      ['fail', 'false'],
    ]);
    expect(within(calc).getAllByTestId('mcp-tool-offered-as').map((t) => t.textContent)).toEqual(['mcp__calc__add', 'mcp__calc__fail']);
    expect(within(calc).getByText('not offered')).toBeInTheDocument();
    const error = within(card('gone')).getByTestId('mcp-status-error');
    expect(error).toHaveTextContent('gone could not be reached');
    expect(error).toHaveTextContent('connection refused');
    expect(error).toHaveTextContent('turns fail');
    expect(calls.filter((c) => c.endsWith('/mcp-servers'))).toHaveLength(1);
    await userEvent.click(screen.getByTestId('mcp-check-again'));
    await waitFor(() => expect(calls.filter((c) => c.endsWith('/mcp-servers'))).toHaveLength(2));
  });

  it('checks a new server before sending it, then saves the whole list under the version', async () => {
    const { bodies } = serve();
    const onSaved = vi.fn();
    renderInApp(<AgentMcpTab agent={agent([])} onSaved={onSaved} onStale={() => {}} />);
    expect(screen.getByText('No MCP servers')).toBeInTheDocument();
    expect(screen.getByTestId('mcp-check-again')).toBeDisabled();
    await userEvent.click(screen.getByRole('button', { name: 'Add a server' }));
    const row = screen.getByTestId('mcp-server');
    await userEvent.type(within(row).getByLabelText('Name'), 'bad__name');
    await userEvent.type(within(row).getByLabelText('URL'), 'example.com');
    await userEvent.click(screen.getByTestId('mcp-save'));
    expect(await within(row).findByText('1 to 24 letters, digits, _ or -, without __, not ending with _.')).toBeInTheDocument();
    expect(within(row).getByText(/An http:\/\/ or https:\/\/ address/)).toBeInTheDocument();
    expect(bodies).toEqual([]);
    await userEvent.clear(within(row).getByLabelText('Name'));
    await userEvent.type(within(row).getByLabelText('Name'), 'gh');
    await userEvent.clear(within(row).getByLabelText('URL'));
    await userEvent.type(within(row).getByLabelText('URL'), 'https://example.com/mcp');
    await userEvent.click(within(row).getByRole('button', { name: 'Add a header' }));
    await userEvent.type(within(row).getByLabelText('Header name 1'), 'Authorization');
    await userEvent.click(within(row).getByText('Secret'));
    await userEvent.type(within(row).getByLabelText('Header secret 1'), 'GH_TOKEN');
    await userEvent.clear(within(row).getByLabelText('Header format 1'));
    await userEvent.type(within(row).getByLabelText('Header format 1'), 'Bearer {{value}');
    await userEvent.click(screen.getByTestId('mcp-save'));
    await waitFor(() => expect(onSaved).toHaveBeenCalled());
    expect(bodies).toEqual([
      { version: 3, mcp_servers: [{ name: 'gh', url: 'https://example.com/mcp', headers: { Authorization: { secret: 'GH_TOKEN', format: 'Bearer {value}' } }, allowed_tools: null, required: false, timeout_seconds: null }] },
    ]);
  });

  it('shows a server run in the sandbox as declared, its tools listed per session, and saves its command', async () => {
    const LOCAL = { name: 'local', command: ['python3', 'server.py', '--stdio'], env: { MODE: 'test' }, required: false };
    const { bodies } = serve(undefined, [{ name: 'local', kind: 'sandbox', url: null, required: false, protocol: null, tools: null, error: null }]);
    renderInApp(<AgentMcpTab agent={agent([LOCAL])} onSaved={() => {}} onStale={() => {}} />);
    expect(screen.getByText(/started in each session’s sandbox when a turn starts/)).toBeInTheDocument();
    expect(screen.queryByText(/not supported yet/)).toBeNull();
    const status = await waitFor(() => within(card('local')).getByTestId('mcp-status'));
    expect(within(status).getByText('in the sandbox')).toBeInTheDocument();
    expect(within(status).getByTestId('mcp-status-sandbox')).toHaveTextContent('its tools are listed then, in that session');
    expect(within(status).queryByTestId('mcp-status-error')).toBeNull();
    expect(within(card('local')).getByLabelText('Command')).toHaveValue('python3 server.py --stdio');
    await userEvent.click(screen.getByRole('button', { name: 'Add a server' }));
    const fresh = screen.getAllByTestId('mcp-server')[1];
    await userEvent.type(within(fresh).getByLabelText('Name'), 'fs');
    await userEvent.click(within(fresh).getByText('In the sandbox (command)'));
    expect(within(fresh).getByTestId('mcp-status-unsaved')).toHaveTextContent('sessions start it when their turns start');
    await userEvent.type(within(fresh).getByLabelText('Command'), "npx -y 'my server'");
    await userEvent.click(screen.getByTestId('mcp-save'));
    await waitFor(() => expect(bodies).toHaveLength(1));
    expect((bodies[0].mcp_servers as unknown[])[1]).toEqual({ name: 'fs', command: ['npx', '-y', 'my server'], env: {}, allowed_tools: null, required: false, timeout_seconds: null });
  });

  it('shows the server’s 422 next to the field it names, and a stale save as such', async () => {
    let answer = json({ detail: [{ loc: ['body', 'mcp_servers', '0', 'url'], msg: 'the address 10.0.0.1 is private', type: 'value_error' }] }, 422);
    serve(() => answer);
    const onStale = vi.fn();
    renderInApp(<AgentMcpTab agent={agent([])} onSaved={() => {}} onStale={onStale} />);
    await userEvent.click(screen.getByRole('button', { name: 'Add a server' }));
    const row = screen.getByTestId('mcp-server');
    await userEvent.type(within(row).getByLabelText('Name'), 'internal');
    await userEvent.type(within(row).getByLabelText('URL'), 'http://10.0.0.1/mcp');
    await userEvent.click(screen.getByTestId('mcp-save'));
    const message = await within(row).findByText('the address 10.0.0.1 is private');
    expect(within(row).getByLabelText('URL')).toHaveAttribute('aria-invalid', 'true');
    expect(message).toBeInTheDocument();
    answer = json({ detail: 'version 3 is stale: the agent is at version 4' }, 409);
    await userEvent.clear(within(row).getByLabelText('URL'));
    await userEvent.type(within(row).getByLabelText('URL'), 'https://example.com/mcp');
    expect(within(row).queryByText('the address 10.0.0.1 is private')).toBeNull();
    await userEvent.click(screen.getByTestId('mcp-save'));
    expect(await screen.findByTestId('mcp-stale')).toHaveTextContent('Your edits are kept');
    expect(onStale).toHaveBeenCalled();
    expect(within(row).getByLabelText('URL')).toHaveValue('https://example.com/mcp');
  });
});
