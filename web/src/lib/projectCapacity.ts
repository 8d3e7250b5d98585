// A project's capacity (openapi.json's `ProjectLimits.max_sandboxes`, `max_runs` and
// `requests_per_minute`), set by operators in place of the server's per-project flags
// (`--max-sandboxes-per-project`, `--max-runs-per-project`, each credential's
// `--rate-limit-per-minute`): the fields and their check with the schema's range, the body a
// save sends (the whole set, since the PATCH replaces it, the monthly spend limit kept), and
// how what the project runs now (`ProjectSpend.sandboxes`, `runs` and their queues) is said.
import type { ProjectLimits, ProjectSpend } from './spendLimit';
import { presentLimits } from './spendLimit';

export type CapacityKey = 'max_sandboxes' | 'max_runs' | 'requests_per_minute';
export type CapacityValues = Record<CapacityKey, string>;

/** The largest value each capacity limit takes (the smallest is 1). */
export const MAX_CAPACITY = 1_000_000;

/** The fields, in the order the card shows them. */
export const CAPACITY_FIELDS: { key: CapacityKey; label: string; description: string }[] = [
  { key: 'max_sandboxes', label: 'Sandboxes at once', description: 'Running or booting; a session past it waits queued.' },
  { key: 'max_runs', label: 'Turns in flight', description: 'At once; a turn past it waits for a slot.' },
  { key: 'requests_per_minute', label: 'Requests per minute', description: 'API requests by all its keys and members together (operators apart); past it, 429.' },
];

/** What an empty field means, said beside each. */
export const SERVER_DEFAULT = 'Empty: the server’s default.';

/** The field's problem as typed ('' is the server's default), or null. */
export function validateCapacity(s: string): string | null {
  const t = s.trim();
  if (t === '') return null;
  const n = Number(t);
  if (!/^\d+$/.test(t) || n < 1 || n > MAX_CAPACITY) return `A whole number, 1 to ${MAX_CAPACITY.toLocaleString('en-US')} (empty for the server’s default).`;
  return null;
}

/** Each field's problem, for the fields that have one. */
export function validateCapacityValues(v: CapacityValues): Partial<Record<CapacityKey, string>> {
  const out: Partial<Record<CapacityKey, string>> = {};
  for (const { key } of CAPACITY_FIELDS) {
    const problem = validateCapacity(v[key]);
    if (problem) out[key] = problem;
  }
  return out;
}

/** A limit as set, or null for none. */
export function capacityOf(limits: ProjectLimits | null | undefined, key: CapacityKey): number | null {
  const v = limits?.[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** The fields' text for the project's limits ('' where none is set). */
export function capacityValuesOf(limits: ProjectLimits | null | undefined): CapacityValues {
  const text = (key: CapacityKey) => {
    const v = capacityOf(limits, key);
    return v == null ? '' : String(v);
  };
  return { max_sandboxes: text('max_sandboxes'), max_runs: text('max_runs'), requests_per_minute: text('requests_per_minute') };
}

/**
 * The limits a PATCH sends for the fields as typed: the project's `current` limits (its monthly
 * spend limit among them) with each capacity field set, or left out when empty.
 */
export function capacityBody(v: CapacityValues, current: ProjectLimits | null | undefined): ProjectLimits {
  const out = presentLimits(current) as Record<string, number>;
  for (const { key } of CAPACITY_FIELDS) {
    const t = v[key].trim();
    if (t === '') delete out[key];
    else out[key] = Number(t);
  }
  return out as ProjectLimits;
}

/** The key of a 422's field (`["body","limits","max_runs"]` is `limits.max_runs`). */
export const capacityErrorKey = (key: CapacityKey) => `limits.${key}`;

const NOUNS = {
  sandboxes: ['sandbox', 'sandboxes'],
  runs: ['turn in flight', 'turns in flight'],
} as const;

const int = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/**
 * What the project runs now against its limit: "1 of 2 sandboxes · 1 queued", "0 of 1 turns in
 * flight"; without a project limit the counts alone, "1 sandbox · no project limit".
 */
export function capacityUsageText(what: 'sandboxes' | 'runs', spend: Partial<Pick<ProjectSpend, 'sandboxes' | 'sandboxes_queued' | 'runs' | 'runs_queued' | 'limits'>>): string {
  const [one, many] = NOUNS[what];
  const count = int(spend[what]);
  const queued = int(what === 'sandboxes' ? spend.sandboxes_queued : spend.runs_queued);
  const max = capacityOf(spend.limits, what === 'sandboxes' ? 'max_sandboxes' : 'max_runs');
  const head = max == null ? `${count} ${count === 1 ? one : many}` : `${count} of ${max} ${many}`;
  return `${head}${queued > 0 ? ` · ${queued} queued` : ''}${max == null ? ' · no project limit' : ''}`;
}

/** The share of the limit in use (at most 100), or null without a project limit. */
export function capacityPercent(what: 'sandboxes' | 'runs', spend: Partial<Pick<ProjectSpend, 'sandboxes' | 'runs' | 'limits'>>): number | null {
  const max = capacityOf(spend.limits, what === 'sandboxes' ? 'max_sandboxes' : 'max_runs');
  if (max == null) return null;
  return Math.min(100, (int(spend[what]) / max) * 100);
}

/** "600 a minute, all its callers together", or the credentials' own limit without one. */
export function requestsPerMinuteText(limits: ProjectLimits | null | undefined): string {
  const v = capacityOf(limits, 'requests_per_minute');
  return v == null ? 'no project limit (each caller’s own)' : `${v.toLocaleString('en-US')} a minute, all its callers together`;
}

/** The notification after a save. */
export function capacitySavedText(limits: ProjectLimits | null | undefined): string {
  const set = CAPACITY_FIELDS.filter(({ key }) => capacityOf(limits, key) != null).length;
  return set === 0 ? 'Capacity: the server’s defaults' : 'Capacity saved';
}
