// A session's own limits: its idle TTL, its lifetime and its sandbox's resources. The "Start a
// session" dialog's fields, checked with SessionCreate's rules (the server's maxima for CPUs
// and memory are its own: it answers a 422 on the field), their part of the body, and how the
// session page words them.
import type { Schemas, Session } from '../../api/client';
import { formatDuration } from '../../lib/time';

/** A year, the longest idle TTL and lifetime the server takes. */
export const MAX_SESSION_SECONDS = 365 * 24 * 3600;

/** The least disk limit a session may set (a sandbox's own boot writes a few MiB). */
export const MIN_DISK_MB = 16;

const mib = (n: number) => (n >= 1024 && n % 1024 === 0 ? `${n / 1024} GiB` : `${n} MiB`);

export type LimitValues = {
  idle_ttl_seconds: string; // '' = the agent's, else the server's
  max_lifetime_seconds: string; // '' = none
  cpus: string; // '' = the server's default
  memory_mb: string; // '' = the server's default
  disk_mb: string; // '' = the server's limit
};

export type LimitsBody = Pick<Schemas['SessionCreate'], 'idle_ttl_seconds' | 'max_lifetime_seconds' | 'resources'>;

/** The error keys of these fields, as a 422's `loc` names them. */
export const LIMIT_FIELDS = ['idle_ttl_seconds', 'max_lifetime_seconds', 'resources', 'resources.cpus', 'resources.memory_mb', 'resources.gpus', 'resources.disk_mb'];

export function emptyLimits(): LimitValues {
  return { idle_ttl_seconds: '', max_lifetime_seconds: '', cpus: '', memory_mb: '', disk_mb: '' };
}

const given = (s: string) => s.trim() !== '';
const wholeIn = (s: string, min: number, max: number) => {
  const n = Number(s.trim());
  return Number.isInteger(n) && n >= min && n <= max;
};

export function validateLimits(v: LimitValues): Record<string, string> {
  const e: Record<string, string> = {};
  if (given(v.idle_ttl_seconds) && !wholeIn(v.idle_ttl_seconds, 0, MAX_SESSION_SECONDS)) e.idle_ttl_seconds = `Whole seconds, 0 (never released) to ${MAX_SESSION_SECONDS} (a year).`;
  if (given(v.max_lifetime_seconds) && !wholeIn(v.max_lifetime_seconds, 1, MAX_SESSION_SECONDS)) e.max_lifetime_seconds = `Whole seconds, 1 to ${MAX_SESSION_SECONDS} (a year).`;
  if (given(v.cpus)) {
    const n = Number(v.cpus.trim());
    if (!(Number.isFinite(n) && n > 0)) e['resources.cpus'] = 'More than 0, e.g. 0.5 or 2.';
  }
  if (given(v.memory_mb) && !wholeIn(v.memory_mb, 64, Number.MAX_SAFE_INTEGER)) e['resources.memory_mb'] = 'Whole MiB, at least 64.';
  if (given(v.disk_mb) && !wholeIn(v.disk_mb, MIN_DISK_MB, Number.MAX_SAFE_INTEGER)) e['resources.disk_mb'] = `Whole MiB, at least ${MIN_DISK_MB}.`;
  return e;
}

/** Null wherever a field was left empty; no resources at all when none is given. */
export function limitsBody(v: LimitValues): LimitsBody {
  const num = (s: string) => (given(s) ? Number(s.trim()) : null);
  const cpus = num(v.cpus);
  const memory = num(v.memory_mb);
  const disk = num(v.disk_mb);
  return {
    idle_ttl_seconds: num(v.idle_ttl_seconds),
    max_lifetime_seconds: num(v.max_lifetime_seconds),
    resources: cpus == null && memory == null && disk == null ? null : { cpus, memory_mb: memory, disk_mb: disk },
  };
}

type Limits = Pick<Session, 'status' | 'stopped_reason' | 'resources' | 'idle_ttl_seconds' | 'max_lifetime_seconds' | 'expires_at'>;

/** Stopped for good: its lifetime passed, and a start is refused. */
export function lifetimeEnded(s: Pick<Session, 'status' | 'stopped_reason'>): boolean {
  return s.status === 'stopped' && s.stopped_reason === 'lifetime';
}

/** "0.5 CPU · 512 MiB · 2 GiB disk", or null for the server's defaults. */
export function resourcesText(r: Limits['resources']): string | null {
  if (!r) return null;
  const parts: string[] = [];
  if (r.cpus != null) parts.push(`${r.cpus} CPU${r.cpus === 1 ? '' : 's'}`);
  if (r.memory_mb != null) parts.push(mib(r.memory_mb));
  if (r.gpus) parts.push(`${r.gpus} GPU${r.gpus === 1 ? '' : 's'}`);
  if (r.disk_mb != null) parts.push(`${mib(r.disk_mb)} disk`);
  return parts.length ? parts.join(' · ') : null;
}

/** The session's own idle TTL in words, or null when it follows the agent's. */
export function idleTtlText(seconds: number | null | undefined): string | null {
  if (seconds == null) return null;
  return seconds === 0 ? 'never released when idle' : `released after ${formatDuration(seconds)} idle`;
}
