import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Agent } from '../../api/client';
import { renderInApp } from '../../test/render';
import { StartSessionModal } from './StartSessionModal';

const agent = { id: 'A', slug: 'analyst', name: 'Analyst', model: 'fake-model' } as Agent;
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

afterEach(() => vi.restoreAllMocks());

describe('StartSessionModal', () => {
  it('puts a 422 field error next to its field and sends the overrides', async () => {
    const posted: unknown[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      const path = new URL(req.url).pathname;
      if (path === '/api/models') return json([{ id: 'fake-model', owned_by: '' }]);
      if (path === '/api/secrets') return json([]);
      if (path === '/api/sessions' && req.method === 'POST') {
        posted.push(await req.json());
        return json({ detail: [{ loc: ['body', 'model'], msg: 'the proxy does not serve this model' }] }, 422);
      }
      return json({ detail: 'unexpected' }, 404);
    });
    renderInApp(<StartSessionModal agent={agent} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('button', { name: /Advanced/ }));
    await user.type(screen.getByRole('textbox', { name: 'Model' }), 'gpt-nope');
    await user.click(screen.getByRole('button', { name: 'Add metadata' }));
    await user.type(screen.getByLabelText('Metadata key 1'), 'n');
    await user.type(screen.getByLabelText('Metadata value 1'), '7');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'Model' })).toHaveAccessibleDescription(/the proxy does not serve this model/));
    expect(posted).toEqual([expect.objectContaining({ agent_id: 'analyst', model: 'gpt-nope', instructions: null, manifest: null, metadata: { n: 7 }, secret_bindings: [] })]);
  }, 30_000);

  it('narrows the agent’s MCP servers: all kept sends nothing, one left out sends the others, a 422 shows at the field', async () => {
    const posted: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      if (new URL(req.url).pathname === '/api/sessions' && req.method === 'POST') {
        posted.push(await req.json());
        return json({ detail: [{ loc: ['body', 'mcp_servers', '0'], msg: "the agent has no MCP server named 'calc'" }] }, 422);
      }
      return json([]);
    });
    const withServers = { ...agent, mcp_servers: [{ name: 'calc', url: 'https://example.com/mcp' }, { name: 'local', command: ['python3', 'server.py'] }] } as Agent;
    renderInApp(<StartSessionModal agent={withServers} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    const local = await screen.findByRole('checkbox', { name: /local/ });
    expect(local).toBeChecked();
    expect(screen.getByRole('checkbox', { name: /calc/ })).toBeChecked();
    expect(screen.getByText('in the sandbox')).toBeInTheDocument();
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(1));
    expect('mcp_servers' in posted[0]).toBe(false);
    await user.click(local);
    expect(screen.getByText(/Only calc:/)).toBeInTheDocument();
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(2));
    expect(posted[1].mcp_servers).toEqual(['calc']);
    expect(await screen.findByText("the agent has no MCP server named 'calc'")).toBeInTheDocument();
    await user.click(screen.getByRole('checkbox', { name: /calc/ }));
    expect(screen.getByText(/None: this session’s model is offered no MCP tools/)).toBeInTheDocument();
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(3));
    expect(posted[2].mcp_servers).toEqual([]);
  }, 30_000);

  it('offers no MCP servers field for an agent without servers', async () => {
    vi.spyOn(globalThis, 'fetch').mockImplementation(async () => json([]));
    renderInApp(<StartSessionModal agent={agent} opened onClose={() => {}} />);
    await screen.findByRole('button', { name: 'Start session' });
    expect(screen.queryByTestId('start-mcp-servers')).toBeNull();
  });

  it('checks the limits before sending, sends them, and puts a 422 on its resource', async () => {
    const posted: unknown[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      if (new URL(req.url).pathname === '/api/sessions' && req.method === 'POST') {
        posted.push(await req.json());
        return json({ detail: [{ loc: ['body', 'resources', 'cpus'], msg: 'cpus is more than 0 and at most 2 on this server (--sandbox-max-cpus)' }] }, 422);
      }
      return json([]);
    });
    renderInApp(<StartSessionModal agent={agent} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('button', { name: /Limits/ }));
    await user.type(screen.getByRole('textbox', { name: 'Idle TTL (seconds)' }), '0');
    await user.type(screen.getByRole('textbox', { name: 'Max lifetime (seconds)' }), '3600');
    await user.type(screen.getByRole('textbox', { name: 'CPUs' }), '8');
    await user.type(screen.getByRole('textbox', { name: 'Memory (MiB)' }), '32');
    await user.type(screen.getByRole('textbox', { name: 'Disk (MiB)' }), '8');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    expect(screen.getByRole('textbox', { name: 'Memory (MiB)' })).toHaveAccessibleDescription(/Whole MiB, at least 64\./);
    expect(screen.getByRole('textbox', { name: 'Disk (MiB)' })).toHaveAccessibleDescription(/Whole MiB, at least 16\./);
    expect(posted).toEqual([]);
    await user.type(screen.getByRole('textbox', { name: 'Memory (MiB)' }), '0');
    await user.type(screen.getByRole('textbox', { name: 'Disk (MiB)' }), '192');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'CPUs' })).toHaveAccessibleDescription(/at most 2 on this server/));
    expect(posted).toEqual([expect.objectContaining({ max_lifetime_seconds: 3600, idle_ttl_seconds: 0, resources: { cpus: 8, memory_mb: 320, disk_mb: 8192 } })]);
  }, 30_000);

  it('binds a secret as a placeholder, sends it in that shape and puts a 422 on its hosts', async () => {
    const posted: unknown[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      if (new URL(req.url).pathname === '/api/sessions' && req.method === 'POST') {
        posted.push(await req.json());
        return json({ detail: [{ loc: ['body', 'secret_bindings', 0, 'placeholder', 'hosts', 1], msg: "'b.test.' is not allowed here" }] }, 422);
      }
      return json([]);
    });
    renderInApp(<StartSessionModal agent={agent} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('button', { name: /Advanced/ }));
    await user.click(screen.getByRole('button', { name: 'Bind a secret' }));
    await user.type(screen.getByRole('textbox', { name: 'Secret 1' }), 'GH');
    await user.click(screen.getByText('Placeholder'));
    expect(screen.getByText(/the egress proxy swaps it for the secret/)).toBeInTheDocument();
    await user.type(screen.getByRole('textbox', { name: 'Variable' }), 'GITHUB_TOKEN');
    await user.type(screen.getByRole('textbox', { name: 'Hosts' }), 'a.test, b.test.');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'Hosts' })).toHaveAccessibleDescription(/not allowed here/));
    expect(posted).toEqual([expect.objectContaining({ secret_bindings: [{ secret: 'GH', placeholder: { env: 'GITHUB_TOKEN', hosts: ['a.test', 'b.test.'] } }] })]);
  }, 30_000);

  it('starts with the agent’s budget, or its own (from the agent’s), or none, and puts a 422 on its limit', async () => {
    const posted: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      if (new URL(req.url).pathname === '/api/sessions' && req.method === 'POST') {
        posted.push(await req.json());
        return json({ detail: [{ loc: ['body', 'budget', 'max_sandbox_seconds'], msg: 'max_sandbox_seconds is a limit: a number, 0 or more' }] }, 422);
      }
      return json([]);
    });
    const capped = { ...agent, budget: { max_cost_usd: 0.5, max_turns: 30 } } as Agent;
    renderInApp(<StartSessionModal agent={capped} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('button', { name: /Budget/ }));
    expect(screen.getByTestId('agent-budget')).toHaveTextContent('The agent’s, copied now: $0.50 · 30 model steps.');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(1));
    expect(posted[0].budget).toBeNull();

    await user.click(screen.getByText('None'));
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(2));
    expect(posted[1].budget).toEqual({});

    // Its own: the agent's limits to start from.
    await user.click(screen.getByText('Its own'));
    expect(screen.getByRole('textbox', { name: 'Cost (US dollars)' })).toHaveValue('0.5');
    await user.clear(screen.getByRole('textbox', { name: 'Cost (US dollars)' }));
    await user.type(screen.getByRole('textbox', { name: 'Cost (US dollars)' }), '0.35');
    await user.type(screen.getByRole('textbox', { name: 'Sandbox time (seconds)' }), '600');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(3));
    expect(posted[2].budget).toEqual({ max_cost_usd: 0.35, max_turns: 30, max_sandbox_seconds: 600 });
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'Sandbox time (seconds)' })).toHaveAccessibleDescription(/max_sandbox_seconds is a limit/));

    // Its own with every field emptied: said, not sent.
    for (const name of ['Cost (US dollars)', 'Model steps', 'Sandbox time (seconds)']) await user.clear(screen.getByRole('textbox', { name }));
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    expect(await screen.findByTestId('budget-error')).toHaveTextContent('Set at least one limit');
    expect(posted).toHaveLength(3);
  }, 30_000);

  it('pins the current version by default, or sends latest or an older version picked from the history', async () => {
    const posted: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      const path = new URL(req.url).pathname;
      if (path === '/api/agents/analyst/versions') {
        const v = (version: number, changed: string[]) => ({ version, created_at: '2026-01-01T00:00:00Z', changed_by: null, changed, restored_from: null });
        return json([v(3, ['model']), v(2, ['instructions']), v(1, [])], 200);
      }
      if (path === '/api/sessions' && req.method === 'POST') {
        posted.push(await req.json());
        return json({ detail: [{ loc: ['body', 'agent_version'], msg: "agent 'analyst' has no version 2 (its versions are 1 to 1)" }] }, 422);
      }
      return json([]);
    });
    renderInApp(<StartSessionModal agent={{ ...agent, version: 3 }} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    const pick = screen.getByRole('textbox', { name: 'Agent version' });
    expect(pick).toHaveValue('Current: v3 (pinned)');
    expect(pick).toHaveAccessibleDescription(/Pinned: it runs v3 whatever edits follow/);
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(1));
    expect('agent_version' in posted[0]).toBe(false);

    await user.click(pick);
    await user.click(await screen.findByRole('option', { name: 'Latest (follows every edit)' }));
    expect(pick).toHaveAccessibleDescription(/later edits apply to this session too/);
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(2));
    expect(posted[1].agent_version).toBe('latest');

    await user.click(pick);
    await user.click(await screen.findByRole('option', { name: 'v2 (instructions)' }));
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    await waitFor(() => expect(posted).toHaveLength(3));
    expect(posted[2].agent_version).toBe(2);
    await waitFor(() => expect(pick).toHaveAccessibleDescription(/has no version 2/));
  }, 30_000);

  it('checks fields before sending anything', async () => {
    const fetch = vi.spyOn(globalThis, 'fetch').mockImplementation(async () => json([]));
    renderInApp(<StartSessionModal agent={agent} opened onClose={() => {}} />);
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('button', { name: /Advanced/ }));
    await user.click(screen.getByRole('button', { name: 'Bind a secret' }));
    await user.type(screen.getByLabelText('Environment variable 1'), '1X');
    await user.click(screen.getByRole('button', { name: 'Start session' }));
    expect(await screen.findByText('Letters, digits and _, not starting with a digit.')).toBeInTheDocument();
    expect(screen.getByText('Name a secret.')).toBeInTheDocument();
    expect(fetch.mock.calls.some(([r]) => (r as Request).method === 'POST')).toBe(false);
  }, 30_000);
});
