// The state of one session's event log as the UI holds it: the stored events in ascending seq,
// each exactly once, plus the text the model is streaming right now (ephemeral
// `agent.text_delta` events, seq 0, never stored) and the output of sandbox tools still running
// (`agent.tool_output_delta`, asked for with `tool_output=true`). Pure functions, so the rules are testable:
// a stored event already held is dropped (a replay after a reconnect, or the history and the
// stream overlapping), one that arrives out of order is put in its place, and a stored
// `agent.message` (or the run's end) replaces the deltas it is made of.
import type { SessionEvent } from '../../../api/client';

export type StreamingText = {
  key: string;
  runId: string | null;
  subagent: SubagentRef | null;
  text: string;
};

export type SubagentRef = { agent: string; call_id: string };

export type EventLogState = {
  /** Stored events, ascending seq, unique. */
  events: SessionEvent[];
  /** The highest stored seq held: where a stream resumes (`after`). */
  lastSeq: number;
  /** Texts being streamed, by run and subagent call. */
  streaming: StreamingText[];
  /** Output of running sandbox tools so far, by call id (the tail, at most TOOL_OUTPUT_KEPT). */
  toolOutput: Record<string, LiveToolOutput>;
  /** How many stored events were dropped as duplicates (for the raw view and tests). */
  duplicatesDropped: number;
};

export type LiveToolOutput = { runId: string | null; text: string };

/** Characters of a running tool's output the UI keeps (its tail). */
export const TOOL_OUTPUT_KEPT = 64 * 1024;

export const TERMINAL_TYPES = new Set(['session.status_idle', 'session.status_error']);

export function emptyLog(): EventLogState {
  return { events: [], lastSeq: 0, streaming: [], toolOutput: {}, duplicatesDropped: 0 };
}

export function subagentOf(event: SessionEvent): SubagentRef | null {
  const sub = (event.payload as Record<string, unknown> | undefined)?.subagent;
  if (sub && typeof sub === 'object' && typeof (sub as SubagentRef).call_id === 'string') {
    const s = sub as Record<string, unknown>;
    return { agent: String(s.agent ?? ''), call_id: String(s.call_id) };
  }
  return null;
}

function streamKey(event: SessionEvent): string {
  const sub = subagentOf(event);
  return `${event.run_id ?? ''}|${sub?.call_id ?? ''}`;
}

/** Index of the first event with seq >= target (binary search over ascending seqs). */
function lowerBound(events: SessionEvent[], target: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((events[mid].seq ?? 0) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Applies a batch of events (stored and ephemeral, in the order they arrived). */
export function applyEvents(state: EventLogState, batch: SessionEvent[]): EventLogState {
  if (batch.length === 0) return state;
  let events = state.events;
  let copied = false;
  let lastSeq = state.lastSeq;
  let duplicatesDropped = state.duplicatesDropped;
  let streaming = state.streaming;
  let streamingCopied = false;
  let toolOutput = state.toolOutput;
  let toolOutputCopied = false;
  const touchToolOutput = () => {
    if (!toolOutputCopied) {
      toolOutput = { ...toolOutput };
      toolOutputCopied = true;
    }
  };
  const touchStreaming = () => {
    if (!streamingCopied) {
      streaming = streaming.slice();
      streamingCopied = true;
    }
  };

  for (const event of batch) {
    const seq = event.seq ?? 0;
    if (seq <= 0) {
      if (event.type === 'agent.text_delta') {
        const text = typeof event.payload?.text === 'string' ? (event.payload.text as string) : '';
        const key = streamKey(event);
        touchStreaming();
        const i = streaming.findIndex((s) => s.key === key);
        if (i >= 0) streaming[i] = { ...streaming[i], text: streaming[i].text + text };
        else streaming.push({ key, runId: event.run_id ?? null, subagent: subagentOf(event), text });
      } else if (event.type === 'agent.tool_output_delta') {
        const p = (event.payload ?? {}) as Record<string, unknown>;
        if (typeof p.call_id === 'string' && typeof p.text === 'string') {
          touchToolOutput();
          const soFar = (toolOutput[p.call_id]?.text ?? '') + p.text;
          toolOutput[p.call_id] = { runId: event.run_id ?? null, text: soFar.length > TOOL_OUTPUT_KEPT ? soFar.slice(-TOOL_OUTPUT_KEPT) : soFar };
        }
      }
      continue; // stream_gap and other ephemeral notices are not kept
    }
    if (!copied) {
      events = events.slice();
      copied = true;
    }
    if (seq > lastSeq) {
      events.push(event);
      lastSeq = seq;
    } else {
      const at = lowerBound(events, seq);
      if (at < events.length && events[at].seq === seq) {
        // Held already (the history fetched while the stream replayed): dropped, but it still
        // ends the deltas the stream delivered before it, which were made after the history's
        // copy was read and would otherwise stay as a second, streaming step.
        duplicatesDropped += 1;
      } else {
        events.splice(at, 0, event);
      }
    }
    if (event.type === 'agent.message') {
      const key = streamKey(event);
      if (streaming.some((s) => s.key === key)) {
        touchStreaming();
        streaming = streaming.filter((s) => s.key !== key);
      }
    } else if (event.type === 'agent.tool_result') {
      const callId = (event.payload as Record<string, unknown> | undefined)?.call_id;
      if (typeof callId === 'string' && callId in toolOutput) {
        touchToolOutput();
        delete toolOutput[callId];
      }
    } else if (TERMINAL_TYPES.has(event.type ?? '')) {
      const ended = (runId: string | null) => event.run_id == null || runId === event.run_id;
      if (Object.values(toolOutput).some((o) => ended(o.runId))) {
        touchToolOutput();
        for (const [k, o] of Object.entries(toolOutput)) if (ended(o.runId)) delete toolOutput[k];
      }
      if (streaming.some((s) => s.runId === (event.run_id ?? null) || event.run_id == null)) {
        touchStreaming();
        streaming = streaming.filter((s) => !(s.runId === (event.run_id ?? null) || event.run_id == null));
      }
    }
  }
  return { events, lastSeq, streaming, toolOutput, duplicatesDropped };
}

/** The run in flight, if any: the latest run with a user.message and no terminal event since. */
export function activeRun(state: EventLogState): string | null {
  for (let i = state.events.length - 1; i >= 0; i--) {
    const e = state.events[i];
    if (TERMINAL_TYPES.has(e.type ?? '')) return null;
    if (e.type === 'user.message' && e.run_id) return e.run_id;
  }
  return null;
}

/** The parked deferrable calls: the call_ids of a trailing `requires_action` pause not answered yet. */
export function pendingCallIds(state: EventLogState): string[] {
  const answered = new Set<string>();
  for (let i = state.events.length - 1; i >= 0; i--) {
    const e = state.events[i];
    const p = (e.payload ?? {}) as Record<string, unknown>;
    if (e.type === 'agent.client_tool_result' && typeof p.call_id === 'string') answered.add(p.call_id);
    if (e.type === 'session.status_idle' || e.type === 'session.status_error') {
      if (p.stop_reason === 'requires_action' && Array.isArray(p.call_ids)) {
        return (p.call_ids as string[]).filter((id) => !answered.has(id));
      }
      return [];
    }
  }
  return [];
}
