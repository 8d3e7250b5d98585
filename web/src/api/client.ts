// The one way the UI talks to the server: same-origin `/api/...`, the session cookie, the
// CSRF header on every change, and `X-Project` for the selected project. Types come from
// `openapi/openapi.json` (generated into schema.d.ts at build time), so an API change that the
// UI does not follow fails the build.
import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './schema';

export type Schemas = components['schemas'];
export type Agent = Schemas['Agent'];
export type AgentCreate = Schemas['AgentCreate'];
export type AgentPatch = Schemas['AgentPatch'];
export type Session = Schemas['Session'];
export type SessionDetail = Schemas['SessionDetail'];
export type SessionEvent = Schemas['SessionEvent'];
export type Me = Schemas['Me'];
export type Project = Schemas['Project'];
export type Webhook = Schemas['Webhook'];
export type Delivery = Schemas['Delivery'];
export type ClientTool = Schemas['ClientTool'];
export type ClientToolCall = Schemas['ClientToolCall'];
export type AwaitingConfirmation = Schemas['AwaitingConfirmation'];
export type WorkspaceEntry = Schemas['WorkspaceEntry'];
export type Process = Schemas['Process'];
export type ProcessDetail = Schemas['ProcessDetail'];

let currentProject: string | null = null;

/** The project every request names in `X-Project` (id or slug); null sends none. */
export function setApiProject(project: string | null) {
  currentProject = project;
}
export function apiProject(): string | null {
  return currentProject;
}

/** Headers every request of the UI carries, for the event stream (`session/sse.ts`), the one
 * call made with plain `fetch` (see `no-adhoc-api.test.ts` for why). */
export function apiHeaders(method: string, extra?: Record<string, string>): Headers {
  const headers = new Headers(extra);
  headers.set('Accept', headers.get('Accept') ?? 'application/json');
  if (method.toUpperCase() !== 'GET' && method.toUpperCase() !== 'HEAD') {
    headers.set('X-Requested-With', 'XMLHttpRequest');
  }
  if (currentProject && !headers.has('X-Project')) headers.set('X-Project', currentProject);
  return headers;
}

const headersMiddleware: Middleware = {
  onRequest({ request }) {
    const method = request.method.toUpperCase();
    if (method !== 'GET' && method !== 'HEAD') request.headers.set('X-Requested-With', 'XMLHttpRequest');
    if (currentProject) request.headers.set('X-Project', currentProject);
    if (!request.headers.has('Accept')) request.headers.set('Accept', 'application/json');
    return request;
  },
};

// The page's own origin (same-origin requests; an absolute base also works where `Request`
// does not resolve relative URLs, as in tests).
export const api = createClient<paths>({ baseUrl: typeof window !== 'undefined' ? window.location.origin : '', credentials: 'same-origin', fetch: (req: Request) => globalThis.fetch(req) });
api.use(headersMiddleware);

/** An error answer of the API, with the sentence its `detail` says. */
export class ApiError extends Error {
  constructor(
    public status: number,
    public detail: string,
    public body: unknown,
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

type FieldError = { loc?: unknown[]; msg?: string };

/** The person-readable sentence of an error body (`detail`, a 422 field list, or raw text). */
export function detailOf(body: unknown, status: number, statusText = ''): string {
  if (body && typeof body === 'object' && 'detail' in body) {
    const detail = (body as { detail: unknown }).detail;
    if (typeof detail === 'string') return detail;
    if (Array.isArray(detail)) {
      return detail
        .map((e: FieldError) => {
          const loc = (e.loc ?? []).filter((p) => p !== 'body').join('.');
          return loc ? `${loc}: ${e.msg ?? 'invalid'}` : (e.msg ?? 'invalid');
        })
        .join('; ');
    }
    return JSON.stringify(detail);
  }
  if (typeof body === 'string' && body.trim()) return body.slice(0, 500);
  if (body && typeof body === 'object') return JSON.stringify(body).slice(0, 500);
  return `${status} ${statusText}`.trim() || 'The request failed.';
}

/**
 * A 422's field list, each message with the field it names as a dotted key without `body`
 * (`["body","network","allow","1"]` is `network.allow.1`), in the server's order. Messages
 * that name no field, and errors of another status, are left out: the error's alert says them.
 */
export function fieldErrorList(error: unknown): { key: string; msg: string }[] {
  if (!(error instanceof ApiError) || error.status !== 422) return [];
  const detail = (error.body as { detail?: unknown } | null)?.detail;
  if (!Array.isArray(detail)) return [];
  return (detail as FieldError[]).flatMap((d) => {
    const key = (d.loc ?? []).filter((p) => p !== 'body').map(String).join('.');
    return key ? [{ key, msg: d.msg ?? 'invalid' }] : [];
  });
}

/** A 422's field list keyed by field, for a form to show each message beside its field
 * (two messages on one field are joined). */
export function fieldErrors(error: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { key, msg } of fieldErrorList(error)) out[key] = out[key] ? `${out[key]} ${msg}` : msg;
  return out;
}

/** Unwraps an openapi-fetch result: the data, or an ApiError with the API's `detail`. */
export async function unwrap<T>(
  promise: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await promise;
  if (!response.ok) {
    throw new ApiError(response.status, detailOf(error, response.status, response.statusText), error);
  }
  return data as T;
}

/** Like unwrap, also returning the `X-Total-Count` of a paged list. */
export async function unwrapPage<T>(
  promise: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<{ items: T; total: number | null }> {
  const { data, error, response } = await promise;
  if (!response.ok) {
    throw new ApiError(response.status, detailOf(error, response.status, response.statusText), error);
  }
  const header = response.headers.get('X-Total-Count');
  return { items: data as T, total: header === null ? null : Number(header) };
}

/** A `multipart/form-data` body for the typed client. The schema types a `format: binary` part
 * as a string; the browser sends a Blob or File (with a filename when given as a pair), and
 * openapi-fetch passes the FormData through (the browser sets the boundary). */
export function formBody<T>(parts: Record<string, Blob | [Blob, string]>): NonNullable<T> {
  const form = new FormData();
  for (const [name, part] of Object.entries(parts)) {
    if (Array.isArray(part)) form.append(name, part[0], part[1]);
    else form.append(name, part);
  }
  return form as unknown as NonNullable<T>;
}
