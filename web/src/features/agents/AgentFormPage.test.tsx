import { screen, waitFor } from '@testing-library/react';
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
