import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../../api/client';
import { approvalText, buildTranscript, decisionText, holdsWaitingApproval, mcpServerErrorConsequence, mcpServerErrorText, pythonCell, statusLabel, transcriptMarkdown, type Item, type ToolItem } from './transcript';

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

describe('approvals in the transcript', () => {
  const asked = (seq: number, callId: string, extra: Record<string, unknown> = {}) =>
    ev(seq, 'agent.tool_use', { tool: 'shell', call_id: callId, arguments: '{"command":"rm -rf build"}', awaiting_approval: true, ...extra });
  const pause = (seq: number, callIds: string[]) => ev(seq, 'session.status_idle', { stop_reason: 'requires_action', run_status: 'running', call_ids: callIds });
  const decided = (seq: number, callId: string, decision: 'allow' | 'deny', message: string | null = null) =>
    ev(seq, 'agent.tool_confirmation', { call_id: callId, tool: 'shell', decision, message, by: { kind: 'user', id: 'u1', name: 'ada@example.com' } });
  const tool = (items: Item[]) => items.find((i) => i.kind === 'tool') as ToolItem;

  it('reads a call that waits, and says so at the pause', () => {
    const items = buildTranscript([ev(1, 'user.message', { text: 'go' }), asked(2, 'c1'), pause(3, ['c1'])]);
    const call = tool(items);
    expect(call.approval).toEqual({ state: 'waiting', decision: null });
    expect(call.arguments).toEqual({ command: 'rm -rf build' });
    expect(call.result).toBeNull();
    expect(items.at(-1)).toMatchObject({ kind: 'terminal', approvals: 1 });
    expect(holdsWaitingApproval(call)).toBe(true);
    // A call that does not ask has no approval.
    expect(tool(buildTranscript([ev(1, 'agent.tool_use', { tool: 'shell', call_id: 'c0', arguments: '{}' })])).approval).toBeNull();
  });

  it('reads an approval by whom, then the result as usual', () => {
    const events = [asked(1, 'c1'), pause(2, ['c1']), decided(3, 'c1', 'allow'), ev(4, 'agent.tool_result', { tool: 'shell', call_id: 'c1', output: 'ok' }), ev(5, 'agent.message', { text: 'done' }), ev(6, 'session.status_idle', { stop_reason: 'end_turn', run_status: 'completed' })];
    const items = buildTranscript(events);
    const call = tool(items);
    expect(call.approval?.state).toBe('allowed');
    expect(call.approval?.decision?.seq).toBe(3);
    expect(call.result?.seq).toBe(4);
    expect(approvalText(call.approval!)).toBe('Allowed by person ada@example.com');
    expect(items.map((i) => i.kind)).toEqual(['tool', 'terminal', 'agent', 'terminal']);
    expect(transcriptMarkdown('T', events)).toContain('_Allowed by person ada@example.com_');
  });

  it('reads a denial with its message, which needs no result', () => {
    const call = tool(buildTranscript([asked(1, 'c1'), pause(2, ['c1']), decided(3, 'c1', 'deny', ' Not now. '), ev(4, 'agent.message', { text: 'ok' })]));
    expect(call.approval?.state).toBe('denied');
    expect(approvalText(call.approval!)).toBe('Denied by person ada@example.com: Not now.');
    expect(decisionText({ decision: 'deny', by: { kind: 'open' } })).toBe('Denied by open mode');
    expect(decisionText({ decision: 'allow', by: null, message: '' })).toBe('Allowed by unknown');
  });

  it('says a call was never decided when its run ended first (interrupted)', () => {
    const events = [asked(1, 'c1'), pause(2, ['c1']), ev(3, 'session.status_idle', { stop_reason: 'cancelled', run_status: 'cancelled' })];
    const call = tool(buildTranscript(events));
    expect(call.approval?.state).toBe('lapsed');
    expect(approvalText(call.approval!)).toBe('Not decided: the run ended first');
    // Another run's end leaves it waiting.
    const other = { ...events[2], run_id: 'R2' };
    expect(tool(buildTranscript([...events.slice(0, 2), other])).approval?.state).toBe('waiting');
  });

  it('keeps an approved client tool’s call as the one call, now the caller’s to answer', () => {
    const items = buildTranscript([
      asked(1, 'c1', { tool: 'ask_user', client_tool: true }),
      pause(2, ['c1']),
      decided(3, 'c1', 'allow'),
      ev(4, 'agent.client_tool_call', { tool: 'ask_user', call_id: 'c1', arguments: '{}', deferrable: true }),
      ev(5, 'agent.client_tool_result', { call_id: 'c1', output: 'yes' }),
    ]);
    expect(items.filter((i) => i.kind === 'tool')).toHaveLength(1);
    const call = tool(items);
    expect(call).toMatchObject({ client: true, deferrable: true, approval: { state: 'allowed' } });
    expect(call.result?.seq).toBe(5);
  });

  it('nests a subagent’s waiting call under the call that invoked it, and names the subagent a call invokes', () => {
    const sub = { agent: 'researcher', call_id: 'c1' };
    const items = buildTranscript([
      ev(1, 'agent.tool_use', { tool: 'researcher', call_id: 'c1', arguments: '{"task":"look"}', agent: 'researcher' }),
      asked(2, 'c2', { subagent: sub }),
      pause(3, ['c2']),
    ]);
    const parent = tool(items);
    expect(parent.agent).toBe('researcher');
    expect(parent.approval).toBeNull();
    expect((parent.children[0] as ToolItem).approval?.state).toBe('waiting');
    expect(holdsWaitingApproval(parent)).toBe(true);
    expect(items.at(-1)).toMatchObject({ kind: 'terminal', approvals: 1 });
  });
});

describe('MCP tool calls and servers', () => {
  const events = [
    ev(1, 'user.message', { text: 'add' }),
    ev(2, 'agent.tool_use', { tool: 'mcp__calc__add', call_id: 'c1', arguments: '{"a":2,"b":3}', mcp_server: 'calc' }),
    ev(3, 'agent.tool_result', { tool: 'mcp__calc__add', call_id: 'c1', output: '5', mcp_server: 'calc' }),
    ev(4, 'agent.tool_use', { tool: 'shell', call_id: 'c2', arguments: '{"command":"ls"}' }),
    ev(5, 'agent.mcp_server_error', { mcp_server: 'github', error: 'connection refused', required: false }),
    ev(6, 'agent.mcp_server_error', { mcp_server: 'db', error: 'timed out after 60 s', required: true, call_id: 'c9' }),
  ];

  it('marks a call with its MCP server, and an unreachable server as a line of its own', () => {
    const items = buildTranscript(events);
    expect(items.map((i) => i.kind)).toEqual(['user', 'tool', 'tool', 'mcp_error', 'mcp_error']);
    expect((items[1] as ToolItem).mcpServer).toBe('calc');
    expect((items[1] as ToolItem).result?.seq).toBe(3);
    expect((items[2] as ToolItem).mcpServer).toBeNull();
    const [warning, error] = items.slice(3) as Extract<Item, { kind: 'mcp_error' }>[];
    expect(warning).toMatchObject({ server: 'github', error: 'connection refused', required: false, callId: null });
    expect(error).toMatchObject({ server: 'db', required: true, callId: 'c9' });
  });

  it('takes the server from the result when only it names one', () => {
    const items = buildTranscript([ev(1, 'agent.tool_use', { tool: 'mcp__x__y', call_id: 'c1' }), ev(2, 'agent.tool_result', { call_id: 'c1', output: 'ok', mcp_server: 'x' })]);
    expect((items[0] as ToolItem).mcpServer).toBe('x');
  });

  it('says the failure and what it meant, in words and in the Markdown', () => {
    expect(mcpServerErrorText({ mcp_server: 'github', error: ' connection refused ' })).toBe('MCP server github could not be reached: connection refused');
    expect(mcpServerErrorText({ mcp_server: 'db', error: 'timed out', call_id: 'c9' })).toBe('MCP server db failed a call: timed out');
    expect(mcpServerErrorConsequence(true, false)).toMatch(/required, so the turn failed/);
    expect(mcpServerErrorConsequence(false, false)).toMatch(/left out of this step/);
    expect(mcpServerErrorConsequence(false, true)).toMatch(/tool error/);
    const md = transcriptMarkdown('T', events);
    expect(md).toContain('**Tool `mcp__calc__add` (MCP · calc)**');
    expect(md).toContain('**Tool `shell`**');
    expect(md).toContain('_Warning: MCP server github could not be reached: connection refused. Its tools were left out of this step; the turn went on without them._');
    expect(md).toContain('_Error: MCP server db failed a call: timed out after 60 s. It is required, so the turn failed._');
  });

  it('nests a subagent’s MCP failure under the call that invoked it', () => {
    const sub = { agent: 'helper', call_id: 'c1' };
    const items = buildTranscript([ev(1, 'agent.tool_use', { tool: 'helper', call_id: 'c1' }), ev(2, 'agent.mcp_server_error', { mcp_server: 'gh', error: 'no', required: false, subagent: sub })]);
    expect(items.map((i) => i.kind)).toEqual(['tool']);
    expect((items[0] as ToolItem).children.map((c) => c.kind)).toEqual(['mcp_error']);
  });
});
