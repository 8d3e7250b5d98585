import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../../api/client';
import { openEventStream, parseFrame, SseParser } from './sse';

describe('SseParser', () => {
  it('splits frames across chunk boundaries and skips comments, ids and event names', () => {
    const p = new SseParser();
    expect(p.push(': ping\n\nid: 1\nevent: a\ndata: {"se')).toEqual([]);
    expect(p.push('q":1}\n\ndata: {"seq":0}\r\n\r\n')).toEqual(['{"seq":1}', '{"seq":0}']);
  });
  it('joins multi-line data with newlines', () => {
    expect(new SseParser().push('data: a\ndata: b\n\n')).toEqual(['a\nb']);
  });
  it('parses objects only, and fills a missing payload', () => {
    expect(parseFrame('[1]')).toBeNull();
    expect(parseFrame('nope')).toBeNull();
    expect(parseFrame('{"seq":3,"type":"x"}')).toMatchObject({ seq: 3, payload: {} });
  });
});

const frame = (seq: number) => `id: ${seq}\nevent: agent.message\ndata: ${JSON.stringify({ seq, type: 'agent.message', session_id: 'S', payload: { text: String(seq) } })}\n\n`;

function streamOf(chunks: string[], thenFail = false): Response {
  const enc = new TextEncoder();
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]));
      else if (thenFail) c.error(new Error('connection reset'));
      else c.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
}

describe('openEventStream', () => {
  it('resumes from the last stored seq after a drop, so nothing is lost or repeated', async () => {
    const urls: string[] = [];
    const received: SessionEvent[] = [];
    let cursor = 0;
    let calls = 0;
    const fetchImpl = (async (url: string, init: RequestInit) => {
      urls.push(url);
      expect(new Headers(init.headers).get('Accept')).toBe('text/event-stream');
      calls++;
      if (calls === 1) return streamOf([frame(1), frame(2), 'data: {"seq":3,"ty'], true); // dies mid-frame
      if (calls === 2) return streamOf([frame(3), frame(4)]); // a clean end: reconnect too
      return new Promise<Response>(() => {}); // then hang
    }) as unknown as typeof fetch;
    const done = new Promise<void>((resolve) => {
      const h = openEventStream({
        sessionId: 'S',
        cursor: () => cursor,
        fetchImpl,
        backoffMs: 1,
        onEvents: (events) => {
          for (const e of events) {
            received.push(e);
            cursor = Math.max(cursor, e.seq);
          }
          if (cursor === 4) {
            setTimeout(() => {
              h.close();
              resolve();
            }, 20);
          }
        },
      });
    });
    await done;
    expect(received.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(urls[0]).toBe('/api/sessions/S/events/stream?tool_output=true');
    expect(urls[1]).toBe('/api/sessions/S/events/stream?tool_output=true&after=2');
    expect(urls[2]).toBe('/api/sessions/S/events/stream?tool_output=true&after=4');
  });

  it('stops on an HTTP error with the API detail', async () => {
    const status = await new Promise<{ s: string; detail?: string }>((resolve) => {
      openEventStream({
        sessionId: 'gone',
        cursor: () => 0,
        backoffMs: 1,
        fetchImpl: (async () => new Response(JSON.stringify({ detail: 'session not found' }), { status: 404 })) as unknown as typeof fetch,
        onEvents: () => {},
        onStatus: (s, err) => s === 'error' && resolve({ s, detail: err?.detail }),
      });
    });
    expect(status).toEqual({ s: 'error', detail: 'session not found' });
  });
});
