// Turns the event log into what the transcript shows: messages, tool calls with their results
// (client tools too, and a call the agent's permissions ask about with its approval: waiting,
// allowed or denied by whom, or left undecided when its run ended; an MCP tool's with its server),
// an MCP server that could not be reached, thinking, handoffs, compactions, status lines and each run's end, with a subagent's
// steps nested under the call that invoked it (`payload.subagent.call_id`), and the text being
// streamed right now where it belongs.
import type { SessionEvent } from '../../../api/client';
import { changedByLabel, type ChangedBy } from '../../../lib/agentVersions';
import { budgetReachedText } from '../../../lib/budget';
import { spendWarningText } from '../../../lib/spendLimit';
import { subagentOf, type LiveToolOutput, type StreamingText, type SubagentRef } from './eventLog';

/**
 * A call the agent's permissions ask about (its `agent.tool_use` is marked
 * `awaiting_approval`): `waiting` for a person; `allowed` or `denied` with the
 * `agent.tool_confirmation` that says by whom; `lapsed` when its run ended undecided
 * (interrupted, stopped).
 */
export type Approval = { state: 'waiting' | 'allowed' | 'denied' | 'lapsed'; decision: SessionEvent | null };

export type ToolItem = {
  kind: 'tool';
  id: string;
  seq: number;
  callId: string;
  tool: string;
  arguments: unknown;
  client: boolean;
  deferrable: boolean;
  call: SessionEvent;
  result: SessionEvent | null;
  /** What the tool wrote so far, while it runs (null once it has a result, or none came). */
  live: string | null;
  subagent: SubagentRef | null;
  /** The subagent this call hands a task to (`payload.agent`), when it calls one. */
  agent: string | null;
  /** The MCP server whose tool this is (`payload.mcp_server`), when it is one. */
  mcpServer: string | null;
  /** Its approval, when the agent's permissions ask about it; else null. */
  approval: Approval | null;
  children: Item[];
};

export type Item =
  | { kind: 'user'; id: string; seq: number; event: SessionEvent }
  | { kind: 'agent'; id: string; seq: number; event: SessionEvent; subagent: SubagentRef | null }
  | { kind: 'thinking'; id: string; seq: number; event: SessionEvent; subagent: SubagentRef | null }
  | ToolItem
  | { kind: 'handoff'; id: string; seq: number; event: SessionEvent; from: string; to: string }
  | { kind: 'compaction'; id: string; seq: number; event: SessionEvent; before: number | null; after: number | null }
  | { kind: 'status'; id: string; seq: number; event: SessionEvent }
  | { kind: 'terminal'; id: string; seq: number; event: SessionEvent; /** Of a pause's calls, those that wait for approval. */ approvals: number }
  | { kind: 'budget'; id: string; seq: number; event: SessionEvent }
  | { kind: 'spend_warning'; id: string; seq: number; event: SessionEvent }
  | McpErrorItem
  | { kind: 'streaming'; id: string; text: string; subagent: SubagentRef | null; runId: string | null };

/** An MCP server that could not be reached (`agent.mcp_server_error`): a warning, or an error
 * when the server is `required` (the turn fails). */
export type McpErrorItem = { kind: 'mcp_error'; id: string; seq: number; event: SessionEvent; server: string; error: string; required: boolean; callId: string | null; subagent: SubagentRef | null };

/** An MCP server's failure in words: "MCP server github could not be reached: …". */
export function mcpServerErrorText(p: Record<string, unknown>): string {
  const server = typeof p.mcp_server === 'string' ? p.mcp_server : 'an MCP server';
  const error = typeof p.error === 'string' && p.error.trim() ? `: ${p.error.trim()}` : '';
  const what = typeof p.call_id === 'string' && p.call_id ? `failed a call` : 'could not be reached';
  return `MCP server ${server} ${what}${error}`;
}

/** What an MCP server's failure means for the turn. */
export function mcpServerErrorConsequence(required: boolean, call: boolean): string {
  if (required) return 'It is required, so the turn failed.';
  return call ? 'The call ended as a tool error for the model.' : 'Its tools were left out of this step; the turn went on without them.';
}

const str = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v));
const num = (v: unknown) => (typeof v === 'number' ? v : null);

/** "12,345 → 2,345 tokens", or just "tokens" parts that are known. */
export function compactionSizes(before: number | null, after: number | null): string {
  const f = (n: number | null) => (n == null ? '?' : n.toLocaleString('en-US'));
  return `${f(before)} → ${f(after)} tokens`;
}

export function parseArguments(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw ?? {};
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** The python tool's call as a cell (its code, its timeout), or null for any other call. */
export function pythonCell(item: Pick<ToolItem, 'tool' | 'arguments'>): { code: string; timeout: number | null } | null {
  if (item.tool !== 'python' || !item.arguments || typeof item.arguments !== 'object') return null;
  const a = item.arguments as Record<string, unknown>;
  if (typeof a.code !== 'string') return null;
  return { code: a.code, timeout: typeof a.timeout === 'number' ? a.timeout : null };
}

/** A queued boot's or turn's line: which limit holds it, and its place in the queue. */
function queuedLabel(what: string, p: Record<string, unknown>, limit: string, ahead: string): string {
  const why = p.limit === 'project' ? `this project's ${limit} is reached` : p.limit === 'deployment' ? `the deployment's ${limit} is reached` : ahead;
  return `${what}: ${why}${typeof p.position === 'number' ? ` (position ${p.position} in the queue)` : ''}`;
}

/** The line a session-wide event (a status change, an upload, a queued boot or turn) shows as. */
export function statusLabel(event: { type: string; payload?: unknown }): string {
  const p = (event.payload ?? {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v));
  switch (event.type) {
    case 'session.created':
      return 'Session created';
    case 'session.status_running':
      return 'Sandbox running';
    case 'session.status_stopped':
      return `Sandbox stopped${
        p.reason === 'lifetime' ? ': its lifetime ended' : p.reason === 'disk' ? ': it wrote more to its disk than its limit allows' : p.reason ? ` (${str(p.reason)})` : ''
      }`;
    case 'session.queued':
      return queuedLabel('Waiting for a sandbox', p, "sandbox limit", 'other sessions are ahead');
    case 'session.run_queued':
      return queuedLabel('Turn waiting to start', p, 'limit on turns in flight', 'other turns are ahead');
    case 'session.s3_conflict': {
      const all = Array.isArray(p.conflicts) ? (p.conflicts as Record<string, unknown>[]) : [];
      const one = (c: Record<string, unknown>) =>
        c.kind === 'deleted' ? `${str(c.key)} (changed in the bucket, so not deleted)` : `${str(c.key)} (yours saved as ${str(c.sandbox_copy)})`;
      const shown = all.slice(0, 3).map(one).join(', ');
      const more = all.length > 3 ? `, and ${all.length - 3} more` : '';
      return `Writing back ${str(p.mount)} (s3://${str(p.bucket)}/${str(p.prefix)}) kept what the bucket changed meanwhile: ${shown}${more}`;
    }
    case 'user.file':
      return `File uploaded: ${str(p.path)}`;
    case 'sandbox.egress_denied':
      return `Egress refused: ${str(p.host)}:${str(p.port)} — ${str(p.reason) || 'no reason given'}`;
    case 'session.budget_reached':
      return budgetReachedText(p);
    case 'session.spend_warning':
      return spendWarningText(p);
    default:
      return event.type;
  }
}

/** A decision as one line: "Allowed by open mode", "Denied by person ada@example.com: not now". */
export function decisionText(payload: Record<string, unknown>): string {
  const verb = payload.decision === 'deny' ? 'Denied' : 'Allowed';
  const message = typeof payload.message === 'string' && payload.message.trim() ? `: ${payload.message.trim()}` : '';
  return `${verb} by ${changedByLabel(payload.by as ChangedBy | null | undefined)}${message}`;
}

/** Whether an item is, or holds (a subagent's steps), a call that waits for approval. */
export function holdsWaitingApproval(item: Item): boolean {
  return item.kind === 'tool' && (item.approval?.state === 'waiting' || item.children.some(holdsWaitingApproval));
}

export function buildTranscript(events: SessionEvent[], streaming: StreamingText[] = [], toolOutput: Record<string, LiveToolOutput> = {}): Item[] {
  const top: Item[] = [];
  const tools = new Map<string, ToolItem>();

  const place = (item: Item, sub: SubagentRef | null) => {
    if (sub) {
      const parent = tools.get(sub.call_id);
      if (parent) {
        parent.children.push(item);
        return;
      }
    }
    top.push(item);
  };

  for (const e of events) {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    const seq = e.seq ?? 0;
    const id = `e${seq}`;
    const sub = subagentOf(e);
    switch (e.type) {
      case 'user.message':
        top.push({ kind: 'user', id, seq, event: e });
        break;
      case 'agent.message':
        place({ kind: 'agent', id, seq, event: e, subagent: sub }, sub);
        break;
      case 'agent.thinking':
        place({ kind: 'thinking', id, seq, event: e, subagent: sub }, sub);
        break;
      case 'agent.tool_use':
      case 'agent.client_tool_call': {
        const callId = str(p.call_id) || id;
        const asked = tools.get(callId);
        if (e.type === 'agent.client_tool_call' && asked?.approval) {
          // An approved client tool's call, now the caller's to answer: the same call.
          asked.client = true;
          asked.deferrable = p.deferrable === true;
          break;
        }
        const item: ToolItem = {
          kind: 'tool',
          id,
          seq,
          callId,
          tool: str(p.tool),
          arguments: parseArguments(p.arguments ?? p.input),
          client: e.type === 'agent.client_tool_call' || p.client_tool === true,
          deferrable: p.deferrable === true,
          call: e,
          result: null,
          live: toolOutput[callId]?.text ?? null,
          subagent: sub,
          agent: typeof p.agent === 'string' ? p.agent : null,
          mcpServer: typeof p.mcp_server === 'string' && p.mcp_server ? p.mcp_server : null,
          approval: p.awaiting_approval === true ? { state: 'waiting', decision: null } : null,
          children: [],
        };
        tools.set(callId, item);
        place(item, sub);
        break;
      }
      case 'agent.tool_result':
      case 'agent.client_tool_result': {
        const t = tools.get(str(p.call_id));
        if (t) {
          t.result = e;
          t.live = null;
          if (!t.mcpServer && typeof p.mcp_server === 'string' && p.mcp_server) t.mcpServer = p.mcp_server;
        } else place({ kind: 'status', id, seq, event: e }, sub);
        break;
      }
      case 'agent.tool_confirmation': {
        const t = tools.get(str(p.call_id));
        if (t) t.approval = { state: p.decision === 'deny' ? 'denied' : 'allowed', decision: e };
        else place({ kind: 'status', id, seq, event: e }, sub);
        break;
      }
      case 'agent.mcp_server_error':
        place(
          { kind: 'mcp_error', id, seq, event: e, server: str(p.mcp_server), error: str(p.error), required: p.required === true, callId: typeof p.call_id === 'string' && p.call_id ? p.call_id : null, subagent: sub },
          sub,
        );
        break;
      case 'agent.handoff':
        top.push({ kind: 'handoff', id, seq, event: e, from: str(p.from), to: str(p.to) });
        break;
      case 'agent.compaction':
        place({ kind: 'compaction', id, seq, event: e, before: num(p.tokens_before), after: num(p.tokens_after) }, sub);
        break;
      case 'session.status_idle':
      case 'session.status_error': {
        const pause = e.type === 'session.status_idle' && p.stop_reason === 'requires_action';
        if (!pause) {
          // The run ended: what it still waited on was never decided.
          for (const t of tools.values()) {
            if (t.approval?.state === 'waiting' && e.run_id != null && t.call.run_id === e.run_id) t.approval = { state: 'lapsed', decision: null };
          }
        }
        const ids = pause && Array.isArray(p.call_ids) ? (p.call_ids as unknown[]).map(str) : [];
        top.push({ kind: 'terminal', id, seq, event: e, approvals: ids.filter((c) => tools.get(c)?.approval?.state === 'waiting').length });
        break;
      }
      case 'session.budget_reached':
        top.push({ kind: 'budget', id, seq, event: e });
        break;
      case 'session.spend_warning':
        top.push({ kind: 'spend_warning', id, seq, event: e });
        break;
      default:
        top.push({ kind: 'status', id, seq, event: e });
    }
  }
  for (const s of streaming) {
    if (!s.text) continue;
    place({ kind: 'streaming', id: `stream:${s.key}`, text: s.text, subagent: s.subagent, runId: s.runId }, s.subagent);
  }
  return top;
}

/** An approval in words, as the transcript says it. */
export function approvalText(a: Approval): string {
  if (a.decision) return decisionText((a.decision.payload ?? {}) as Record<string, unknown>);
  return a.state === 'waiting' ? 'Waiting for approval' : 'Not decided: the run ended first';
}

/** The transcript as Markdown, for export. */
export function transcriptMarkdown(title: string, events: SessionEvent[]): string {
  const out: string[] = [`# ${title || 'Session transcript'}`, ''];
  const walk = (items: Item[], depth: number) => {
    const q = depth > 0 ? '> '.repeat(depth) : '';
    for (const it of items) {
      const p = 'event' in it ? ((it.event.payload ?? {}) as Record<string, unknown>) : {};
      switch (it.kind) {
        case 'user':
          out.push(`${q}**User:** ${str(p.text)}`, '');
          break;
        case 'agent':
          out.push(`${q}**${it.subagent ? it.subagent.agent : 'Agent'}:** ${str(p.text)}`, '');
          break;
        case 'thinking':
          out.push(`${q}_Thinking:_ ${str(p.text)}`, '');
          break;
        case 'tool': {
          const rp = (it.result?.payload ?? {}) as Record<string, unknown>;
          const cell = pythonCell(it);
          out.push(`${q}**${it.client ? 'Client tool' : 'Tool'} \`${it.tool}\`${it.mcpServer ? ` (MCP · ${it.mcpServer})` : ''}**`, '', ...(cell ? ['```python', cell.code, '```'] : ['```json', JSON.stringify(it.arguments, null, 2), '```']));
          if (it.approval) out.push('', `${q}_${approvalText(it.approval)}_`);
          if (it.result) out.push('', `${q}Result${rp.is_error ? ' (error)' : ''}:`, '', '```', str(rp.output), '```');
          out.push('');
          walk(it.children, depth + 1);
          break;
        }
        case 'handoff':
          out.push(`${q}_Handoff: ${it.from} → ${it.to}_`, '');
          break;
        case 'compaction':
          out.push(`${q}_Conversation compacted (${compactionSizes(it.before, it.after)})_`, '');
          break;
        case 'terminal':
          out.push(`${q}_${it.event.type}: ${str(p.stop_reason) || str(p.run_status)}${p.error ? ` — ${str(p.error)}` : ''}_`, '');
          break;
        case 'budget':
          out.push(`${q}_${budgetReachedText(p)}_`, '');
          break;
        case 'spend_warning':
          out.push(`${q}_${spendWarningText(p)}_`, '');
          break;
        case 'mcp_error':
          out.push(`${q}_${it.required ? 'Error' : 'Warning'}: ${mcpServerErrorText(p)}. ${mcpServerErrorConsequence(it.required, it.callId !== null)}_`, '');
          break;
        case 'status':
          out.push(`${q}_${it.event.type}_`, '');
          break;
      }
    }
  };
  walk(buildTranscript(events), 0);
  return out.join('\n');
}
