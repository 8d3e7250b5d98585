import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SessionDetail } from '../../api/client';
import { renderInApp } from '../../test/render';
import NetworkTab from './NetworkTab';

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
const agentLayer = { from: 'agent', policy: { egress: 'allowlist', allow: ['github.com:443'], presets: ['pypi'] } };
const envLayer = { from: 'environment', policy: { egress: 'open', allow: [], presets: [] } };
const session = (network: unknown, layers: unknown[]) => ({ id: 'S', status: 'running', network, network_layers: layers }) as unknown as SessionDetail;

const noEgress = { data: [], enabled: true };

/** A fake API answering PATCH /api/sessions/S with `answer`, recording the bodies sent, and GET its egress log with `egress`. */
function fakePatch(answer: (body: unknown) => Response, egress: unknown = noEgress) {
  const bodies: unknown[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    if (req.method === 'GET' && new URL(req.url).pathname === '/api/sessions/S/egress') return json(egress);
    if (req.method !== 'PATCH' || new URL(req.url).pathname !== '/api/sessions/S') return json({ detail: 'unexpected' }, 404);
    const body = JSON.parse(await req.text());
    bodies.push(body);
    return answer(body);
  });
  return bodies;
}

afterEach(() => vi.restoreAllMocks());

describe('NetworkTab', () => {
  it('shows each layer in a line, and an egress log with nothing in it yet', async () => {
    fakePatch(() => json({}));
    renderInApp(<NetworkTab session={session(null, [agentLayer, envLayer])} />);
    const layers = screen.getAllByTestId('network-layer');
    expect(layers).toHaveLength(2);
    expect(layers[0]).toHaveTextContent('agentallowlistpypi presetgithub.com:443');
    expect(layers[1]).toHaveTextContent('environmentopenthe internet');
    expect(screen.getByTestId('network-own-none')).toHaveTextContent('None of its own');
    expect(await within(screen.getByTestId('egress-log')).findByText('No egress recorded yet')).toBeInTheDocument();
  });

  it('lists each host the sandbox reached or was refused, with its connections, bytes and refusals', async () => {
    const recent = new Date(Date.now() - 30_000).toISOString();
    fakePatch(() => json({}), {
      enabled: true,
      data: [
        { host: 'pypi.org', port: 443, connections: 1234, bytes_sent: 2048, bytes_received: 5 * 1024 * 1024, denied: 0, first_at: recent, last_at: recent },
        { host: 'evil.example', port: 80, connections: 0, bytes_sent: 0, bytes_received: 0, denied: 3, first_at: recent, last_at: recent },
      ],
    });
    renderInApp(<NetworkTab session={session(null, [agentLayer])} />);
    const rows = await screen.findAllByTestId('egress-row');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent(/^pypi\.org:4431,2342\.0 KB5\.0 MB0/);
    expect(rows[1]).toHaveTextContent(/^evil\.example:8000 B0 B3/);
    expect(within(rows[0]).getByRole('time')).toHaveAttribute('datetime', recent);
  });

  it('says when egress control is off on this server, rather than that nothing was sent', async () => {
    fakePatch(() => json({}), { enabled: false, data: [] });
    renderInApp(<NetworkTab session={session(null, [agentLayer])} />);
    const log = screen.getByTestId('egress-log');
    expect(await within(log).findByText('Egress control is off on this server')).toBeInTheDocument();
    expect(log).toHaveTextContent('--egress-proxy');
    expect(within(log).queryByText('No egress recorded yet')).toBeNull();
  });

  it('sets a policy of its own, starting from the agent’s, and shows a 422 beside its entry', async () => {
    const bodies = fakePatch((body) =>
      (body as { network: { allow: string[] } }).network.allow.includes('bad name')
        ? json({ detail: [{ loc: ['body', 'network', 'allow', '1'], msg: "'bad name' is not an entry" }] }, 422)
        : json({}),
    );
    const user = userEvent.setup({ delay: null });
    renderInApp(<NetworkTab session={session(null, [agentLayer, envLayer])} />);
    await user.click(screen.getByRole('button', { name: 'Give it a policy of its own' }));
    expect(screen.getByLabelText('Allowed entry 1')).toHaveValue('github.com:443');
    await user.click(screen.getByRole('button', { name: 'Add entry' }));
    await user.type(screen.getByLabelText('Allowed entry 2'), 'bad name');
    await user.click(screen.getByRole('button', { name: 'Save policy' }));
    const entry = screen.getAllByTestId('network-entry')[1];
    expect(await within(entry).findByTestId('network-entry-error')).toHaveTextContent("'bad name' is not an entry");
    expect(bodies).toEqual([{ network: { egress: 'allowlist', allow: ['github.com:443', 'bad name'], presets: ['pypi'] } }]);
    // Fixed, it saves, and the message goes with the edit.
    await user.clear(screen.getByLabelText('Allowed entry 2'));
    expect(within(screen.getAllByTestId('network-entry')[1]).queryByTestId('network-entry-error')).toBeNull();
    await user.type(screen.getByLabelText('Allowed entry 2'), 'api.example.com');
    await user.click(screen.getByRole('button', { name: 'Save policy' }));
    await waitFor(() => expect(bodies).toHaveLength(2));
    expect(bodies[1]).toEqual({ network: { egress: 'allowlist', allow: ['github.com:443', 'api.example.com'], presets: ['pypi'] } });
  });

  it('removes its own policy with null', async () => {
    const bodies = fakePatch(() => json({}));
    const user = userEvent.setup({ delay: null });
    const own = { egress: 'none', allow: [], presets: [] };
    renderInApp(<NetworkTab session={session(own, [agentLayer, envLayer, { from: 'session', policy: own }])} />);
    expect(screen.getByRole('radio', { name: 'none' })).toBeChecked();
    expect(screen.getByRole('button', { name: 'Save policy' })).toBeDisabled();
    await user.click(screen.getByRole('button', { name: 'Remove its own policy' }));
    await user.click(await screen.findByRole('button', { name: 'Remove' }));
    await waitFor(() => expect(bodies).toEqual([{ network: null }]));
  });
});
