import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { Route, Routes } from 'react-router-dom';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../../test/render';
import AgentFormPage from './AgentFormPage';

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

afterEach(() => vi.restoreAllMocks());

const page = (route: string) =>
  renderInApp(
    <Routes>
      <Route path="/agents/new" element={<AgentFormPage />} />
      <Route path="/agents/:ref/edit" element={<AgentFormPage />} />
      <Route path="/agents/:ref" element={<div data-testid="agent-page" />} />
    </Routes>,
    { route },
  );

const stored = { id: 'A', slug: 'looper', name: 'Looper', description: '', instructions: '', transport: 'proxy', model: 'fake-model', capabilities: null, manifest: { entries: {}, environment: {} }, exposed_ports: [], client_tools: [], secret_bindings: [], subagents: [], subagent_max_steps: 10, network: { egress: 'open', allow: [], presets: [] }, budget: { max_cost_usd: 0.35 }, version: 3, created_at: '2026-12-01T00:00:00Z', updated_at: '2026-12-01T00:00:00Z' };

describe('the agent form’s budget tab', () => {
  it('creates an agent with a default session budget', async () => {
    const posted: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      if (req.method === 'POST' && new URL(req.url).pathname === '/api/agents') {
        posted.push(await req.json());
        return json({ ...stored, budget: posted[0].budget }, 201);
      }
      return json([]);
    });
    page('/agents/new');
    const user = userEvent.setup({ delay: null });
    await user.type(screen.getByRole('textbox', { name: /Slug/ }), 'looper');
    await user.type(screen.getByRole('textbox', { name: /^Name/ }), 'Looper');
    await user.click(screen.getByRole('tab', { name: 'Budget' }));
    await user.type(screen.getByRole('textbox', { name: 'Cost (US dollars)' }), '0.35');
    await user.type(screen.getByRole('textbox', { name: 'Model steps' }), '40');
    await user.click(screen.getByRole('button', { name: 'Create agent' }));
    await screen.findByTestId('agent-page');
    expect(posted[0].budget).toEqual({ max_cost_usd: 0.35, max_turns: 40 });
  }, 30_000);

  it('edits it under the agent’s version, removes it with null, and puts a 422 at its limit', async () => {
    const patched: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      const path = new URL(req.url).pathname;
      if (path === '/api/agents/looper' && req.method === 'GET') return json(stored);
      if (path === '/api/agents/looper' && req.method === 'PATCH') {
        patched.push(await req.json());
        if (patched.length === 1) return json({ detail: [{ loc: ['body', 'budget', 'max_total_tokens'], msg: 'max_total_tokens is a limit: a number, 0 or more' }] }, 422);
        return json({ ...stored, budget: null, version: 4 });
      }
      return json([]);
    });
    page('/agents/looper/edit');
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('tab', { name: 'Budget' }));
    const cost = screen.getByRole('textbox', { name: 'Cost (US dollars)' });
    expect(cost).toHaveValue('0.35');
    await user.type(screen.getByRole('textbox', { name: 'Tokens' }), '900');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'Tokens' })).toHaveAccessibleDescription(/max_total_tokens is a limit/));
    expect(patched[0]).toMatchObject({ version: 3, budget: { max_cost_usd: 0.35, max_total_tokens: 900 } });
    await user.clear(cost);
    await user.clear(screen.getByRole('textbox', { name: 'Tokens' }));
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await screen.findByTestId('agent-page');
    expect(patched[1]).toMatchObject({ version: 3, budget: null });
  }, 30_000);
});

describe('the agent form’s permissions tab', () => {
  it('creates an agent whose shell asks, with a prefix that runs without asking', async () => {
    const posted: Record<string, unknown>[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      if (req.method === 'POST' && new URL(req.url).pathname === '/api/agents') {
        posted.push(await req.json());
        return json({ ...stored, permissions: posted[0].permissions }, 201);
      }
      return json([]);
    });
    page('/agents/new');
    const user = userEvent.setup({ delay: null });
    await user.type(screen.getByRole('textbox', { name: /Slug/ }), 'looper');
    await user.type(screen.getByRole('textbox', { name: /^Name/ }), 'Looper');
    await user.click(screen.getByRole('tab', { name: 'Permissions' }));
    // The default capabilities: shell, and the filesystem group with its four tools.
    expect(screen.getAllByRole('radiogroup').map((g) => g.getAttribute('aria-label'))).toEqual(
      ['shell', 'filesystem', 'read_file', 'write_file', 'edit_file', 'list_files'].map((k) => `Permission of ${k}`),
    );
    const shell = screen.getByTestId('permission-shell');
    await user.click(within(shell).getByText('Ask'));
    await user.click(within(shell).getByRole('button', { name: 'Add a prefix' }));
    await user.type(within(shell).getByRole('textbox', { name: 'Command prefix 1' }), 'git status');
    await user.click(within(screen.getByTestId('permission-filesystem')).getByText('Deny'));
    await user.click(within(screen.getByTestId('permission-read_file')).getByText('Allow'));
    expect(screen.getByTestId('permission-write_file')).toHaveAttribute('data-mode', 'deny');
    await user.click(screen.getByRole('button', { name: 'Create agent' }));
    await screen.findByTestId('agent-page');
    expect(posted[0].permissions).toEqual({ shell: { mode: 'ask', allow_prefixes: ['git status'] }, filesystem: { mode: 'deny' }, read_file: { mode: 'allow' } });
  }, 30_000);

  it('puts the server’s 422 at the permission it names, and sends only what changed of the resolved defaults', async () => {
    const patched: Record<string, unknown>[] = [];
    // Created without subagent_max_steps or a model of its own: the server answers both resolved.
    const agent = { ...stored, model: 'server-default', subagent_max_steps: 10, permissions: { shell: { mode: 'ask', allow_prefixes: ['ls'] } } };
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      const path = new URL(req.url).pathname;
      if (path === '/api/agents/looper' && req.method === 'GET') return json(agent);
      if (path === '/api/agents/looper' && req.method === 'PATCH') {
        patched.push(await req.json());
        if (patched.length === 1) return json({ detail: [{ loc: ['body', 'permissions', 'shell', 'allow_prefixes'], msg: 'a prefix is 1 to 200 characters, not blank' }] }, 422);
        return json({ ...agent, version: 4 });
      }
      return json([]);
    });
    page('/agents/looper/edit');
    const user = userEvent.setup({ delay: null });
    await user.click(await screen.findByRole('tab', { name: 'Permissions' }));
    expect(screen.getByTestId('permission-shell')).toHaveAttribute('data-mode', 'ask');
    expect(screen.getByRole('textbox', { name: 'Command prefix 1' })).toHaveValue('ls');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(screen.getByTestId('shell-prefixes')).toHaveTextContent('a prefix is 1 to 200 characters, not blank'));
    expect(screen.getByRole('tab', { name: 'Permissions' })).toHaveAttribute('data-active');
    // Nothing of the resolved defaults changed: neither is sent, so the server keeps them unset.
    expect(patched[0]).toMatchObject({ version: 3, permissions: { shell: { mode: 'ask', allow_prefixes: ['ls'] } } });
    expect(patched[0]).not.toHaveProperty('subagent_max_steps');
    expect(patched[0]).not.toHaveProperty('model');
    // Once edited, the server's word is no longer shown.
    await user.click(within(screen.getByTestId('permission-shell')).getByText('Deny'));
    expect(screen.getByTestId('permission-shell')).not.toHaveTextContent('a prefix is 1 to 200');
    await user.click(screen.getByRole('button', { name: 'Save' }));
    await screen.findByTestId('agent-page');
    expect(patched[1].permissions).toEqual({ shell: { mode: 'deny' } });
  }, 30_000);
});
