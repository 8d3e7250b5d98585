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
