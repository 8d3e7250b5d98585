// The terminal's WebSocket: its URL (a browser cannot put headers on a WebSocket, so the
// project rides in `?project=`), the server's messages, and why a socket that never opened
// was refused (the handshake's status is hidden from pages; a plain GET of the same URL
// answers the session's checks with the same `detail`).
import { api, ApiError, apiProject, unwrap } from '../../../api/client';

export function terminalPath(sessionId: string, rows: number, cols: number, project: string | null = apiProject()): string {
  const q = new URLSearchParams({ rows: String(rows), cols: String(cols) });
  if (project) q.set('project', project);
  return `/api/sessions/${encodeURIComponent(sessionId)}/terminal?${q}`;
}

export function terminalUrl(path: string, location: Pick<Location, 'protocol' | 'host'> = window.location): string {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${path}`;
}

/** A text message of the server: the shell's end. */
export type ServerMessage = { type: 'exit'; exit_code: number; signal: number | null };

export function parseServerMessage(text: string): ServerMessage | null {
  try {
    const m = JSON.parse(text);
    return m && m.type === 'exit' && typeof m.exit_code === 'number' ? m : null;
  } catch {
    return null;
  }
}

/** Why the terminal is refused: the API's answer, or null when it would have opened (so the
 * WebSocket itself failed, as behind a proxy that does not pass them). */
export async function whyRefused(sessionId: string, rows: number, cols: number): Promise<ApiError | null> {
  try {
    await unwrap(api.GET('/api/sessions/{session_id}/terminal', { params: { path: { session_id: sessionId }, query: { rows, cols } }, parseAs: 'text' }));
    return null;
  } catch (e) {
    if (e instanceof ApiError && !(e.status === 400 && e.detail.includes('WebSocket endpoint'))) return e;
    return null;
  }
}

/** The API's 409 for a sandbox that has no daemon (and so no terminal). */
export function isNoDaemon(e: ApiError | null): boolean {
  return !!e && e.status === 409 && e.detail.includes('has no daemon');
}
