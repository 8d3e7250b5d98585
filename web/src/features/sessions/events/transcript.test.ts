import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../../api/client';
import { buildTranscript, pythonCell, statusLabel, transcriptMarkdown, type ToolItem } from './transcript';

const ev = (seq: number, type: string, payload: Record<string, unknown> = {}): SessionEvent =>
  ({ seq, type, payload, run_id: 'R', session_id: 'S', created_at: '2026-01-01T00:00:00Z' }) as SessionEvent;

describe('buildTranscript', () => {
  it('pairs tool calls with results and nests subagent steps under their call', () => {
    const sub = { agent: 'researcher', call_id: 'c1' };
    const items = buildTranscript([
      ev(1, 'user.message', { text: 'go' }),
      ev(2, 'agent.tool_use', { tool: 'researcher', call_id: 'c1', arguments: '{"task":"look"}' }),
      ev(3, 'agent.tool_use', { tool: 'shell', call_id: 'c2', arguments: '{"cmd":"ls"}', subagent: sub }),
      ev(4, 'agent.tool_result', { tool: 'shell', call_id: 'c2', output: 'a b', subagent: sub }),
      ev(5, 'agent.message', { text: 'found', subagent: sub }),
      ev(6, 'agent.tool_result', { tool: 'researcher', call_id: 'c1', output: 'found' }),
      ev(7, 'agent.handoff', { from: 'main', to: 'closer' }),
      ev(8, 'agent.message', { text: 'done' }),
      ev(9, 'session.status_idle', { stop_reason: 'end_turn', usage: { input_tokens: 3 } }),
    ]);
    expect(items.map((i) => i.kind)).toEqual(['user', 'tool', 'handoff', 'agent', 'terminal']);
    const call = items[1] as ToolItem;
    expect(call.arguments).toEqual({ task: 'look' });
    expect(call.result?.seq).toBe(6);
    expect(call.children.map((c) => c.kind)).toEqual(['tool', 'agent']);
    expect((call.children[0] as ToolItem).result?.seq).toBe(4);
  });

  it('shows streamed text at the end, and a subagent delta under its call', () => {
    const items = buildTranscript([ev(1, 'agent.tool_use', { tool: 'helper', call_id: 'c1' })], [
      { key: 'R|', runId: 'R', subagent: null, text: 'Hel' },
      { key: 'R|c1', runId: 'R', subagent: { agent: 'helper', call_id: 'c1' }, text: 'sub' },
    ]);
    expect(items.map((i) => i.kind)).toEqual(['tool', 'streaming']);
    expect((items[0] as ToolItem).children.map((c) => c.kind)).toEqual(['streaming']);
  });

  it('shows a compaction as its own row with the sizes, in the Markdown too', () => {
    const events = [
      ev(1, 'user.message', { text: 'go' }),
      ev(2, 'agent.compaction', { tokens_before: 115200, tokens_after: 2300, window: 128000, summary: 'did a, b' }),
      ev(3, 'agent.message', { text: 'done' }),
    ];
    const items = buildTranscript(events);
    expect(items.map((i) => i.kind)).toEqual(['user', 'compaction', 'agent']);
    expect(items[1]).toMatchObject({ before: 115200, after: 2300 });
    expect(transcriptMarkdown('T', events)).toContain('_Conversation compacted (115,200 → 2,300 tokens)_');
  });

  it('reads the python tool’s call as a cell, and exports it as Python', () => {
    const events = [
      ev(1, 'agent.tool_use', { tool: 'python', call_id: 'p1', arguments: '{"code":"x = 6 * 7\\nprint(x)","timeout":30}' }),
      ev(2, 'agent.tool_result', { tool: 'python', call_id: 'p1', output: '42\n' }),
    ];
    const call = buildTranscript(events)[0] as ToolItem;
    expect(pythonCell(call)).toEqual({ code: 'x = 6 * 7\nprint(x)', timeout: 30 });
    expect(pythonCell({ tool: 'python', arguments: { input: { code: 'x' } } })).toBeNull();
    expect(pythonCell({ tool: 'shell', arguments: { code: 'x' } })).toBeNull();
    expect(transcriptMarkdown('T', events)).toContain('```python\nx = 6 * 7\nprint(x)\n```');
  });

  it('shows the project’s spend warning and a stop at its monthly limit in words of their own', () => {
    const hit = { limit: 'monthly_cost_usd', max: 0.5, used: 0.5, scope: 'project' };
    const events = [
      ev(1, 'user.message', { text: 'loop' }),
      ev(2, 'session.spend_warning', { limit: 'monthly_cost_usd', max: 0.5, spent: 0.4, month: '2026-12', at: 0.8 }),
      ev(3, 'session.budget_reached', hit),
      ev(4, 'session.status_idle', { stop_reason: 'budget_reached', run_status: 'completed', budget: hit }),
    ];
    expect(buildTranscript(events).map((i) => i.kind)).toEqual(['user', 'spend_warning', 'budget', 'terminal']);
    expect(statusLabel(events[1])).toBe('The project has spent $0.40 of its $0.50 monthly limit (80 %)');
    expect(statusLabel(events[2])).toBe("Stopped at the project's monthly spend limit: $0.50 spent of $0.50");
    const md = transcriptMarkdown('t', events);
    expect(md).toContain('_The project has spent $0.40 of its $0.50 monthly limit (80 %)_');
    expect(md).toContain("_Stopped at the project's monthly spend limit: $0.50 spent of $0.50_");
  });

  it('shows a stop at the budget as its own row before the run’s end, in the Markdown too', () => {
    const hit = { limit: 'max_cost_usd', max: 0.35, used: 0.4, budget: { max_cost_usd: 0.35 } };
    const events = [
      ev(1, 'user.message', { text: 'go' }),
      ev(2, 'session.budget_reached', hit),
      ev(3, 'session.status_idle', { stop_reason: 'budget_reached', run_status: 'completed', budget: hit }),
    ];
    expect(buildTranscript(events).map((i) => i.kind)).toEqual(['user', 'budget', 'terminal']);
    expect(statusLabel(events[1])).toBe('Stopped at the budget: cost $0.40 of the $0.35 limit');
    const md = transcriptMarkdown('T', events);
    expect(md).toContain('_Stopped at the budget: cost $0.40 of the $0.35 limit_');
    expect(md).toContain('_session.status_idle: budget_reached_');
  });

  it('exports Markdown', () => {
    const md = transcriptMarkdown('T', [ev(1, 'user.message', { text: 'hi' }), ev(2, 'agent.message', { text: 'hello' })]);
    expect(md).toContain('# T');
    expect(md).toContain('**User:** hi');
    expect(md).toContain('**Agent:** hello');
  });
});

describe('statusLabel', () => {
  it('says why a boot waits and where it stands in the queue', () => {
    expect(statusLabel({ type: 'session.queued', payload: { limit: 'project', position: 2 } })).toBe(
      "Waiting for a sandbox: this project's sandbox limit is reached (position 2 in the queue)",
    );
    expect(statusLabel({ type: 'session.queued', payload: { limit: 'deployment', position: 1 } })).toContain("the deployment's sandbox limit");
    expect(statusLabel({ type: 'session.queued', payload: { limit: 'queue' } })).toBe('Waiting for a sandbox: other sessions are ahead');
  });

  it('says why a turn waits to start and where it stands in the queue', () => {
    expect(statusLabel({ type: 'session.run_queued', payload: { limit: 'project', position: 3 } })).toBe(
      "Turn waiting to start: this project's limit on turns in flight is reached (position 3 in the queue)",
    );
    expect(statusLabel({ type: 'session.run_queued', payload: { limit: 'deployment', position: 1 } })).toContain("the deployment's limit on turns in flight");
    expect(statusLabel({ type: 'session.run_queued', payload: { limit: 'queue' } })).toBe('Turn waiting to start: other turns are ahead');
  });

  it('says why a sandbox stopped', () => {
    expect(statusLabel({ type: 'session.status_stopped', payload: { reason: 'disk' } })).toBe('Sandbox stopped: it wrote more to its disk than its limit allows');
    expect(statusLabel({ type: 'session.status_stopped', payload: { reason: 'requested' } })).toBe('Sandbox stopped (requested)');
  });

  it('names the files an S3 write-back kept for the bucket, and where the sandbox versions went', () => {
    const conflict = (n: number) => ({
      type: 'session.s3_conflict',
      payload: {
        mount: 'm',
        bucket: 'b',
        prefix: 'p',
        conflicts: [
          { key: 'gone.txt', kind: 'deleted', sandbox_copy: null },
          ...Array.from({ length: n - 1 }, (_, i) => ({ key: `f${i}.txt`, kind: 'changed', sandbox_copy: `f${i}.conflict-S.txt` })),
        ],
      },
    });
    expect(statusLabel(conflict(2))).toBe(
      'Writing back m (s3://b/p) kept what the bucket changed meanwhile: gone.txt (changed in the bucket, so not deleted), f0.txt (yours saved as f0.conflict-S.txt)',
    );
    expect(statusLabel(conflict(5))).toMatch(/f1\.conflict-S\.txt\), and 2 more$/);
  });

  it('shows a refused egress connection as one line: where, and the rule that refused it', () => {
    expect(statusLabel({ type: 'sandbox.egress_denied', payload: { host: 'evil.example', port: 443, reason: 'not in the agent policy’s allowlist' } })).toBe(
      'Egress refused: evil.example:443 — not in the agent policy’s allowlist',
    );
  });

  it('names the other session-wide events, and shows unknown types as they are', () => {
    expect(statusLabel({ type: 'session.status_stopped', payload: { reason: 'lifetime' } })).toBe('Sandbox stopped: its lifetime ended');
    expect(statusLabel({ type: 'session.status_stopped', payload: { reason: 'idle' } })).toBe('Sandbox stopped (idle)');
    expect(statusLabel({ type: 'user.file', payload: { path: 'a.txt' } })).toBe('File uploaded: a.txt');
    expect(statusLabel({ type: 'something.new', payload: {} })).toBe('something.new');
  });
});
