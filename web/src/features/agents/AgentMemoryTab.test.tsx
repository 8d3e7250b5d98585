import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Agent } from '../../api/client';
import { renderInApp } from '../../test/render';
import { AgentMemoryTab } from './AgentMemoryTab';

afterEach(() => vi.restoreAllMocks());

const agent = { slug: 'keeper', capabilities: ['shell', 'memory'] } as unknown as Agent;
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

describe('the memory tab', () => {
  it('saves with the version it read, and a stale save offers to reload', async () => {
    const puts: unknown[] = [];
    let current = { memory: '', summary: '', version: 0, updated_at: null };
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      expect(req.url).toContain('/api/agents/keeper/memory');
      if (req.method === 'GET') return json(current);
      puts.push(await req.json());
      // Someone else wrote meanwhile.
      current = { memory: '# theirs', summary: 'Theirs.', version: 1, updated_at: '2026-12-01T16:00:00Z' } as never;
      return json({ detail: 'the memory of agent keeper is no longer at version 0' }, 409);
    });
    renderInApp(<AgentMemoryTab agent={agent} />);
    const summary = await screen.findByLabelText('Memory summary');
    expect(screen.getByTestId('memory-version')).toHaveTextContent('version 0');
    expect(screen.queryByTestId('memory-capability-note')).toBeNull();
    await userEvent.type(summary, 'Mine.');
    await userEvent.click(screen.getByRole('button', { name: 'Save memory' }));
    expect(await screen.findByTestId('memory-conflict')).toHaveTextContent('Someone changed this memory');
    expect(puts).toEqual([{ memory: '', summary: 'Mine.', version: 0 }]);
    await userEvent.click(screen.getByRole('button', { name: 'Reload the current memory' }));
    await waitFor(() => expect(screen.getByLabelText('Memory summary')).toHaveValue('Theirs.'));
    expect(screen.getByTestId('memory-version')).toHaveTextContent('version 1');
    expect(screen.queryByTestId('memory-conflict')).toBeNull();
  });

  it('says when the agent cannot use its memory', async () => {
    vi.spyOn(globalThis, 'fetch').mockImplementation(async () => json({ memory: '', summary: '', version: 0, updated_at: null }));
    renderInApp(<AgentMemoryTab agent={{ slug: 'plain', capabilities: null } as unknown as Agent} />);
    expect(await screen.findByTestId('memory-capability-note')).toHaveTextContent('memory capability');
  });
});
