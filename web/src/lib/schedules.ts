// Schedules (openapi.json's `Schedule`): an agent's message sent on a cron expression read in an
// IANA time zone. The pure part of the schedule pages: the form's values, its checks, the create
// and patch bodies, a 422's fields keyed for the form, and a due time said in two zones (the
// viewer's and the schedule's), with `Intl.DateTimeFormat`'s `timeZone`.
import { fieldErrors, type Schemas } from '../api/client';
import { budgetBody, budgetValuesOf, emptyBudget, validateBudget, type BudgetValues } from './budget';

export type Schedule = Schemas['Schedule'];
export type ScheduleCreate = Schemas['ScheduleCreate'];
export type SchedulePatch = Schemas['SchedulePatch'];
export type ScheduleFire = Schemas['ScheduleFire'];
export type MissedPolicy = Schemas['MissedPolicy'];
export type BusyPolicy = Schemas['BusyPolicy'];
export type FireStatus = Schemas['FireStatus'];

/** A few common expressions, for the form's presets. */
export const CRON_PRESETS: { label: string; cron: string }[] = [
  { label: 'Every minute', cron: '* * * * *' },
  { label: 'Every hour', cron: '0 * * * *' },
  { label: 'Every day at 9:00', cron: '0 9 * * *' },
  { label: 'Weekdays at 9:00', cron: '0 9 * * 1-5' },
  { label: 'Mondays at 9:00', cron: '0 9 * * mon' },
  { label: 'First of the month at 9:00', cron: '0 9 1 * *' },
];

export const MISSED_POLICIES: { value: MissedPolicy; label: string; help: string }[] = [
  { value: 'skip', label: 'Skip', help: 'Due times missed while no server ran are skipped.' },
  { value: 'run_once', label: 'Run once', help: 'Missed due times fire once, when a server is back.' },
];

export const BUSY_POLICIES: { value: BusyPolicy; label: string; help: string }[] = [
  { value: 'skip', label: 'Skip', help: 'A fire that finds its session mid-turn is skipped.' },
  { value: 'wait', label: 'Wait', help: 'A fire that finds its session mid-turn waits for the turn to end.' },
];

/** The browser's IANA zone ("Europe/Paris"), UTC when it says none. */
export function viewerZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch {
    return 'UTC';
  }
}

/** Every IANA zone the browser knows, sorted, with UTC and `extra` (the viewer's, the schedule's) among them. */
export function timeZones(extra: string[] = []): string[] {
  let zones: string[] = [];
  try {
    zones = (Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.('timeZone') ?? [];
  } catch {
    zones = [];
  }
  return [...new Set([...zones, 'UTC', ...extra.filter(Boolean)])].sort();
}

/** Whether the browser takes `zone` as a time zone. */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/**
 * A moment in `timeZone`, with the zone's short name: "Jan 5, 2026, 09:00 EST". Seconds are
 * shown only when the moment has some (an every-second schedule's).
 */
export function formatInZone(iso: string, timeZone: string, locale?: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const seconds = d.getUTCSeconds() !== 0 || d.getUTCMilliseconds() !== 0;
  try {
    return new Intl.DateTimeFormat(locale, {
      timeZone,
      year: 'numeric',
      month: 'short',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      ...(seconds ? { second: '2-digit' } : {}),
      hourCycle: 'h23',
      timeZoneName: 'short',
    }).format(d);
  } catch {
    return iso;
  }
}

/** The next fire of a schedule as the pages say it. */
export type NextFire =
  | { kind: 'paused' }
  | { kind: 'none' }
  /** `viewer` in the viewer's zone; `local` in the schedule's, null when the two zones are one. */
  | { kind: 'due'; at: string; viewer: string; local: string | null };

export function nextFire(s: Pick<Schedule, 'paused' | 'next_fire_at' | 'timezone'>, viewer: string, locale?: string): NextFire {
  if (s.paused) return { kind: 'paused' };
  if (!s.next_fire_at) return { kind: 'none' };
  const mine = formatInZone(s.next_fire_at, viewer, locale);
  const theirs = formatInZone(s.next_fire_at, s.timezone, locale);
  return { kind: 'due', at: s.next_fire_at, viewer: mine, local: sameZone(viewer, s.timezone, s.next_fire_at) ? null : theirs };
}

/** Whether two zones read `iso` alike (the same zone, or two names of one). */
function sameZone(a: string, b: string, iso: string): boolean {
  if (a === b) return true;
  const wall = (z: string) => {
    try {
      return new Intl.DateTimeFormat('en-US', { timeZone: z, dateStyle: 'short', timeStyle: 'long' }).format(new Date(iso));
    } catch {
      return z;
    }
  };
  return wall(a) === wall(b);
}

/** "new session", or the session every fire continues. */
export function sessionText(session: string): string {
  return session === 'new' ? 'new session' : session;
}

export function fireStatusColor(status: FireStatus): string {
  return status === 'started' ? 'teal' : status === 'skipped' ? 'gray' : 'red';
}

/** The form's values, as typed. */
export type ScheduleValues = {
  name: string;
  cron: string;
  timezone: string;
  message: string;
  /** "new", or the id of one of the agent's sessions. */
  session: string;
  budget: BudgetValues;
  paused: boolean;
  missed: MissedPolicy;
  busy: BusyPolicy;
};

export function emptySchedule(timezone: string): ScheduleValues {
  return { name: '', cron: '', timezone, message: '', session: 'new', budget: emptyBudget(), paused: false, missed: 'skip', busy: 'skip' };
}

export function valuesOf(s: Schedule): ScheduleValues {
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    message: s.message,
    session: s.session,
    budget: budgetValuesOf(s.budget),
    paused: s.paused,
    missed: s.missed,
    busy: s.busy,
  };
}

/** The form's problems before it is sent, keyed as a 422 names them. */
export function validateSchedule(v: ScheduleValues): Record<string, string> {
  const e: Record<string, string> = {};
  const fields = v.cron.trim().split(/\s+/).filter(Boolean);
  if (!fields.length) e.cron = 'A cron expression is required.';
  else if (fields.length !== 5 && fields.length !== 6) e.cron = 'Five fields (minute hour day month weekday), or six with seconds first.';
  if (!v.timezone.trim()) e.timezone = 'A time zone is required.';
  if (!v.message.trim()) e.message = 'A message is required.';
  if (!v.session.trim()) e.session = 'A new session, or one of the agent’s.';
  if (v.session === 'new') Object.assign(e, validateBudget(v.budget));
  return e;
}

/** The body of POST …/schedules. A budget only for new sessions (a continued one keeps its own). */
export function createBody(v: ScheduleValues): ScheduleCreate {
  const body: ScheduleCreate = {
    name: v.name.trim(),
    cron: v.cron.trim(),
    timezone: v.timezone.trim(),
    message: v.message,
    session: v.session,
    missed: v.missed,
    busy: v.busy,
  };
  if (v.paused) body.paused = true;
  if (v.session === 'new') {
    const b = budgetBody(v.budget);
    if (b) body.budget = b;
  }
  return body;
}

/** The body of PATCH …/schedules/{id}: the fields that changed from `was` (never the session). */
export function patchBody(v: ScheduleValues, was: Schedule): SchedulePatch {
  const body: SchedulePatch = {};
  const now = createBody(v);
  if (now.name !== was.name) body.name = now.name;
  if (now.cron !== was.cron) body.cron = now.cron;
  if (now.timezone !== was.timezone) body.timezone = now.timezone;
  if (now.message !== was.message) body.message = now.message;
  if (v.missed !== was.missed) body.missed = v.missed;
  if (v.busy !== was.busy) body.busy = v.busy;
  if (v.paused !== was.paused) body.paused = v.paused;
  if (was.session === 'new') {
    const b = budgetBody(v.budget);
    if (JSON.stringify(b ?? null) !== JSON.stringify(was.budget ?? null)) body.budget = b;
  }
  return body;
}

/** The fields of the form a 422 can name; any other key is said in the form's alert. */
const FORM_FIELDS = ['name', 'cron', 'timezone', 'message', 'session', 'missed', 'busy', 'paused', 'budget'];

/**
 * A 422's messages keyed for the form: `cron`, `timezone`, `budget.max_turns`…; the agent in
 * the path (`["path","ref"]`: archived, say) as `agent`; what names no field of the form as
 * `form`. Empty for another error.
 */
export function scheduleFieldErrors(error: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  const add = (k: string, msg: string) => (out[k] = out[k] ? `${out[k]} ${msg}` : msg);
  for (const [key, msg] of Object.entries(fieldErrors(error))) {
    const head = key.split('.')[0];
    if (key === 'path.ref') add('agent', msg);
    else if (FORM_FIELDS.includes(head)) add(head === 'budget' && key !== 'budget' ? key : head, msg);
    else add('form', `${key}: ${msg}`);
  }
  return out;
}
