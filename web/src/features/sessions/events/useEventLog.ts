import { useCallback, useEffect, useRef, useState } from 'react';
import type { ApiError, SessionEvent } from '../../../api/client';
import { applyEvents, emptyLog, type EventLogState } from './eventLog';
import { openEventStream, type StreamHandle, type StreamStatus } from './sse';

/**
 * Follows one session's log: replays it from the start over the stream, then goes on live.
 * Incoming events are batched per animation frame, so a 10,000-event replay renders a few
 * times rather than 10,000 times. The cursor is the highest stored seq received (even before
 * it is rendered), which is what a reconnect resumes from.
 */
export function useEventLog(sessionId: string, onEvents?: (events: SessionEvent[]) => void) {
  const [log, setLog] = useState<EventLogState>(emptyLog);
  const [status, setStatus] = useState<StreamStatus>('connecting');
  const [error, setError] = useState<ApiError | null>(null);
  const cursor = useRef(0);
  const buffer = useRef<SessionEvent[]>([]);
  const frame = useRef<number | null>(null);
  const handle = useRef<StreamHandle | null>(null);
  const onEventsRef = useRef(onEvents);
  onEventsRef.current = onEvents;

  useEffect(() => {
    cursor.current = 0;
    buffer.current = [];
    setLog(emptyLog());
    setError(null);
    const flush = () => {
      frame.current = null;
      const batch = buffer.current;
      buffer.current = [];
      if (batch.length) {
        setLog((s) => applyEvents(s, batch));
        onEventsRef.current?.(batch);
      }
    };
    const h = openEventStream({
      sessionId,
      cursor: () => cursor.current,
      onEvents: (events) => {
        for (const e of events) {
          if ((e.seq ?? 0) > 0 && (e.seq ?? 0) <= cursor.current) continue; // never hand on a repeat
          if ((e.seq ?? 0) > cursor.current) cursor.current = e.seq!;
          buffer.current.push(e);
        }
        if (frame.current === null) {
          frame.current =
            typeof requestAnimationFrame === 'function' && document.visibilityState === 'visible'
              ? requestAnimationFrame(flush)
              : (setTimeout(flush, 16) as unknown as number);
        }
      },
      onStatus: (s, err) => {
        setStatus(s);
        if (err) setError(err);
      },
    });
    handle.current = h;
    return () => {
      h.close();
      if (frame.current !== null) {
        cancelAnimationFrame?.(frame.current);
        clearTimeout(frame.current);
      }
    };
  }, [sessionId]);

  const reconnect = useCallback(() => handle.current?.reconnect(), []);
  return { log, status, error, reconnect };
}
