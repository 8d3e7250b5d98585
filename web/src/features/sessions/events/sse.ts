// Reads `GET /api/sessions/{id}/events/stream` with fetch (EventSource cannot send X-Project),
// and keeps reading: on a dropped connection or a clean end it reconnects from the last stored
// seq it handed on (`after=`), so no stored event is lost or repeated. An HTTP error before the
// stream starts (404, 401, ...) is final, as it is for the Python client.
import { ApiError, apiHeaders, detailOf, type SessionEvent } from '../../../api/client';

export type StreamStatus = 'connecting' | 'live' | 'reconnecting' | 'closed' | 'error';

export type StreamOptions = {
  sessionId: string;
  /** The cursor to resume from: called at every (re)connect. */
  cursor: () => number;
  onEvents: (events: SessionEvent[]) => void;
  onStatus?: (status: StreamStatus, error?: ApiError) => void;
  fetchImpl?: typeof fetch;
  /** Backoff base in ms (tests shorten it). */
  backoffMs?: number;
};

/** Splits an SSE byte stream into frames; returns the data of each complete frame. */
export class SseParser {
  private buffer = '';
  private data: string[] = [];

  push(chunk: string): string[] {
    this.buffer += chunk;
    const out: string[] = [];
    let start = 0;
    let nl: number;
    // One pass with an index; the unread rest is kept once at the end (no copy per line).
    while ((nl = this.buffer.indexOf('\n', start)) >= 0) {
      let line = this.buffer.slice(start, nl);
      start = nl + 1;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (this.data.length) out.push(this.data.join('\n'));
        this.data = [];
      } else if (line.startsWith('data:')) {
        this.data.push(line.slice(5).replace(/^ /, ''));
      }
      // `id:`, `event:`, `retry:` and `: ping` comments carry nothing the UI needs: the seq
      // and type are inside the data.
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }
}

export function parseFrame(data: string): SessionEvent | null {
  try {
    const value = JSON.parse(data);
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      if (!value.payload || typeof value.payload !== 'object') value.payload = {};
      return value as SessionEvent;
    }
  } catch {
    /* a frame that is not JSON is skipped */
  }
  return null;
}

export type StreamHandle = {
  close(): void;
  /** Drops the connection and resumes from the cursor (what a network blip does). */
  reconnect(): void;
};

export function openEventStream(opts: StreamOptions): StreamHandle {
  const fetchImpl = opts.fetchImpl ?? fetch.bind(globalThis);
  const backoff = opts.backoffMs ?? 250;
  let closed = false;
  let controller: AbortController | null = null;
  let failures = 0;
  let wake: (() => void) | null = null;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });

  async function once(): Promise<'again' | 'stop'> {
    controller = new AbortController();
    const after = opts.cursor();
    // `tool_output=true`: running sandbox tools' output too, as it is written.
    const url = `/api/sessions/${encodeURIComponent(opts.sessionId)}/events/stream?tool_output=true${after > 0 ? `&after=${after}` : ''}`;
    let response: Response;
    try {
      response = await fetchImpl(url, {
        headers: apiHeaders('GET', { Accept: 'text/event-stream' }),
        credentials: 'same-origin',
        signal: controller.signal,
        cache: 'no-store',
      });
    } catch {
      return 'again';
    }
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* keep text */
      }
      opts.onStatus?.('error', new ApiError(response.status, detailOf(body, response.status), body));
      return 'stop';
    }
    opts.onStatus?.('live');
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const frames = parser.push(decoder.decode(value, { stream: true }));
        const events: SessionEvent[] = [];
        for (const f of frames) {
          const e = parseFrame(f);
          if (e) events.push(e);
        }
        if (events.length) {
          failures = 0;
          opts.onEvents(events);
        }
      }
    } catch {
      /* aborted or dropped: reconnect */
    }
    return 'again';
  }

  (async () => {
    opts.onStatus?.('connecting');
    while (!closed) {
      const result = await once();
      if (closed) break;
      if (result === 'stop') {
        closed = true;
        break;
      }
      opts.onStatus?.('reconnecting');
      const delay = Math.min(backoff * 2 ** failures, 10_000);
      failures = Math.min(failures + 1, 6);
      await sleep(delay);
    }
  })();

  return {
    close() {
      closed = true;
      controller?.abort();
      wake?.();
      opts.onStatus?.('closed');
    },
    reconnect() {
      failures = 0;
      controller?.abort();
    },
  };
}
