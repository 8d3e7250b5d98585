// Turns the event log into what the transcript shows: messages, tool calls with their results
// (client tools too), thinking, handoffs, compactions, status lines and each run's end, with a subagent's
// steps nested under the call that invoked it (`payload.subagent.call_id`), and the text being
// streamed right now where it belongs.
import type { SessionEvent } from '../../../api/client';
import { budgetReachedText } from '../../../lib/budget';
import { spendWarningText } from '../../../lib/spendLimit';
import { subagentOf, type LiveToolOutput, type StreamingText, type SubagentRef } from './eventLog';

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
  | { kind: 'terminal'; id: string; seq: number; event: SessionEvent }
  | { kind: 'budget'; id: string; seq: number; event: SessionEvent }
  | { kind: 'spend_warning'; id: string; seq: number; event: SessionEvent }
  | { kind: 'streaming'; id: string; text: string; subagent: SubagentRef | null; runId: string | null };

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
        const item: ToolItem = {
          kind: 'tool',
          id,
          seq,
          callId,
          tool: str(p.tool),
          arguments: parseArguments(p.arguments ?? p.input),
          client: e.type === 'agent.client_tool_call',
          deferrable: p.deferrable === true,
          call: e,
          result: null,
          live: toolOutput[callId]?.text ?? null,
          subagent: sub,
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
        } else place({ kind: 'status', id, seq, event: e }, sub);
        break;
      }
      case 'agent.handoff':
        top.push({ kind: 'handoff', id, seq, event: e, from: str(p.from), to: str(p.to) });
        break;
      case 'agent.compaction':
        place({ kind: 'compaction', id, seq, event: e, before: num(p.tokens_before), after: num(p.tokens_after) }, sub);
        break;
      case 'session.status_idle':
      case 'session.status_error':
        top.push({ kind: 'terminal', id, seq, event: e });
        break;
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
          out.push(`${q}**${it.client ? 'Client tool' : 'Tool'} \`${it.tool}\`**`, '', ...(cell ? ['```python', cell.code, '```'] : ['```json', JSON.stringify(it.arguments, null, 2), '```']));
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
        case 'status':
          out.push(`${q}_${it.event.type}_`, '');
          break;
      }
    }
  };
  walk(buildTranscript(events), 0);
  return out.join('\n');
}
