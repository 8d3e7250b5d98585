import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../../api/client';
import { activeRun, applyEvents, emptyLog, pendingCallIds, TOOL_OUTPUT_KEPT } from './eventLog';

const ev = (seq: number, type: string, payload: Record<string, unknown> = {}, run_id: string | null = 'R'): SessionEvent =>
  ({ seq, type, payload, run_id, session_id: 'S', created_at: '2026-01-01T00:00:00Z' }) as SessionEvent;

describe('applyEvents', () => {
  it('keeps stored events in ascending seq, each once', () => {
    let s = applyEvents(emptyLog(), [ev(1, 'session.created', {}, null), ev(2, 'session.status_running', {}, null)]);
    s = applyEvents(s, [ev(2, 'session.status_running', {}, null), ev(3, 'user.message', { text: 'hi' })]);
    expect(s.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(s.lastSeq).toBe(3);
    expect(s.duplicatesDropped).toBe(1);
  });

  it('puts an event that arrives late in its place, and drops a late repeat', () => {
    let s = applyEvents(emptyLog(), [ev(1, 'a'), ev(3, 'c')]);
    s = applyEvents(s, [ev(2, 'b'), ev(1, 'a'), ev(3, 'c')]);
    expect(s.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(s.duplicatesDropped).toBe(2);
    expect(s.lastSeq).toBe(3);
  });

  it('a replay after a reconnect changes nothing', () => {
    const batch = Array.from({ length: 50 }, (_, i) => ev(i + 1, 'agent.message', { text: String(i) }));
    const once = applyEvents(emptyLog(), batch);
    const twice = applyEvents(once, batch.slice(20));
    expect(twice.events).toHaveLength(50);
    expect(twice.events.map((e) => e.seq)).toEqual(once.events.map((e) => e.seq));
  });

  it('accumulates deltas per run and subagent, and the stored message replaces them', () => {
    let s = applyEvents(emptyLog(), [ev(1, 'user.message', { text: 'q' })]);
    s = applyEvents(s, [ev(0, 'agent.text_delta', { text: 'Hel' }), ev(0, 'agent.text_delta', { text: 'lo' })]);
    s = applyEvents(s, [ev(0, 'agent.text_delta', { text: 'sub', subagent: { agent: 'helper', call_id: 'c1' } })]);
    expect(s.streaming.map((x) => x.text)).toEqual(['Hello', 'sub']);
    expect(s.events).toHaveLength(1); // deltas are never stored
    s = applyEvents(s, [ev(2, 'agent.message', { text: 'Hello' })]);
    expect(s.streaming.map((x) => x.text)).toEqual(['sub']);
    s = applyEvents(s, [ev(3, 'session.status_idle', { stop_reason: 'end_turn' })]);
    expect(s.streaming).toEqual([]);
  });

  it('a stored message held from the history still ends the deltas the stream replays before its copy', () => {
    // The history (fetched while the stream was opening) already has the subagent's message
    // and the run's end; the stream then delivers the deltas that made the message, and the
    // stored events again as duplicates: no streaming step may be left behind.
    const sub = { subagent: { agent: 'helper', call_id: 'c1' } };
    let s = applyEvents(emptyLog(), [ev(1, 'user.message', { text: 'q' }), ev(2, 'agent.message', { text: 'found', ...sub })]);
    s = applyEvents(s, [ev(0, 'agent.text_delta', { text: 'found', ...sub }), ev(2, 'agent.message', { text: 'found', ...sub })]);
    expect(s.streaming).toEqual([]);
    expect(s.events.map((e) => e.seq)).toEqual([1, 2]);
    s = applyEvents(s, [ev(3, 'session.status_idle', {})]);
    s = applyEvents(s, [ev(0, 'agent.text_delta', { text: 'late' }), ev(3, 'session.status_idle', {})]);
    expect(s.streaming).toEqual([]);
    expect(s.duplicatesDropped).toBe(2);
  });

  it('ignores stream_gap notices without moving the cursor', () => {
    const s = applyEvents(applyEvents(emptyLog(), [ev(5, 'a')]), [ev(0, 'stream_gap', { after: 5 }, null)]);
    expect(s.lastSeq).toBe(5);
    expect(s.events).toHaveLength(1);
  });

  it('handles 10,000 events in one batch quickly', () => {
    const batch = Array.from({ length: 10_000 }, (_, i) => ev(i + 1, 'agent.tool_use', { tool: 'shell', call_id: `c${i}` }));
    const t = performance.now();
    const s = applyEvents(emptyLog(), batch);
    expect(s.events).toHaveLength(10_000);
    expect(performance.now() - t).toBeLessThan(200);
  });
});

describe('run state', () => {
  it('knows the run in flight and the parked calls', () => {
    let s = applyEvents(emptyLog(), [ev(1, 'user.message', { text: 'q' }, 'R1')]);
    expect(activeRun(s)).toBe('R1');
    s = applyEvents(s, [
      ev(2, 'agent.client_tool_call', { tool: 'ask_user', call_id: 'c1', arguments: '{}', deferrable: true }, 'R1'),
      ev(3, 'session.status_idle', { stop_reason: 'requires_action', call_ids: ['c1'] }, 'R1'),
    ]);
    expect(activeRun(s)).toBeNull();
    expect(pendingCallIds(s)).toEqual(['c1']);
    s = applyEvents(s, [ev(4, 'agent.client_tool_result', { call_id: 'c1', output: 'yes' }, 'R1')]);
    expect(pendingCallIds(s)).toEqual([]);
  });
});

describe('running tools’ output', () => {
  const out = (call_id: string, text: string, run = 'R') => ev(0, 'agent.tool_output_delta', { call_id, tool: 'shell', stream: 'stdout', text }, run);

  it('gathers it by call until the result, never as stored events', () => {
    let s = applyEvents(emptyLog(), [ev(1, 'agent.tool_use', { call_id: 'c1', tool: 'shell' }), out('c1', 'step 1\n'), out('c2', 'other\n')]);
    s = applyEvents(s, [out('c1', 'step 2\n')]);
    expect(s.toolOutput.c1.text).toBe('step 1\nstep 2\n');
    expect(s.events.map((e) => e.type)).toEqual(['agent.tool_use']);
    s = applyEvents(s, [ev(2, 'agent.tool_result', { call_id: 'c1', output: 'exit code: 0' })]);
    expect(s.toolOutput.c1).toBeUndefined();
    expect(s.toolOutput.c2.text).toBe('other\n');
  });

  it('forgets a run’s output at its end, and keeps only the tail of a long one', () => {
    let s = applyEvents(emptyLog(), [out('c1', 'x'.repeat(TOOL_OUTPUT_KEPT)), out('c1', 'the end'), out('c9', 'elsewhere', 'R2')]);
    expect(s.toolOutput.c1.text).toHaveLength(TOOL_OUTPUT_KEPT);
    expect(s.toolOutput.c1.text.endsWith('the end')).toBe(true);
    s = applyEvents(s, [ev(3, 'session.status_idle', { stop_reason: 'cancelled' }, 'R')]);
    expect(Object.keys(s.toolOutput)).toEqual(['c9']);
  });
});
