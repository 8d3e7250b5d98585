// A project's monthly spend limit (openapi.json's `ProjectLimits.monthly_cost_usd`), set by
// operators: how it and the month's spend against it (`ProjectSpend`) are said, the field's
// check with the schema's range, and the events a turn gets when the project nears it
// (`session.spend_warning`, at 80 %) or reaches it (`session.budget_reached` with
// `scope: "project"`, and the run end's `budget`). Unlike a session's budget, the project's own
// admins cannot raise it.
import type { Schemas } from '../api/client';
import { describeCost, formatUsd } from './money';

export type ProjectLimits = Schemas['ProjectLimits'];
export type ProjectSpend = Schemas['ProjectSpend'];

/** The largest monthly limit the schema takes. */
export const MAX_MONTHLY_COST_USD = 1_000_000;

/** The project's monthly limit in US dollars, or null for none. */
export function monthlyLimitOf(limits: ProjectLimits | null | undefined): number | null {
  const v = limits?.monthly_cost_usd;
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** The field's problem as typed ('' is no limit), or null. */
export function validateMonthlyLimit(s: string): string | null {
  if (s.trim() === '') return null;
  const n = Number(s.trim());
  if (!Number.isFinite(n) || n < 0 || n > MAX_MONTHLY_COST_USD) return `A number of US dollars, 0 to ${MAX_MONTHLY_COST_USD.toLocaleString('en-US')}.`;
  return null;
}

/**
 * The limits a PATCH sends for the field as typed. The PATCH replaces the whole set, so it is
 * the project's `current` limits with the monthly one set, or left out to remove it (the
 * others, such as its capacity, are kept; `{}` removes the last one).
 */
export function limitsBody(s: string, current: ProjectLimits | null | undefined = {}): ProjectLimits {
  const rest = presentLimits(current);
  delete rest.monthly_cost_usd;
  return s.trim() === '' ? rest : { ...rest, monthly_cost_usd: Number(s.trim()) };
}

/** The limits that are set (a finite number), without the absent or null ones. */
export function presentLimits(limits: ProjectLimits | null | undefined): ProjectLimits {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(limits ?? {})) if (typeof v === 'number' && Number.isFinite(v)) out[k] = v;
  return out as ProjectLimits;
}

/** The share of the limit spent, in percent (past 100 when overshot), or null without a limit. */
export function spentPercent(spend: Pick<ProjectSpend, 'cost_usd' | 'limits'>): number | null {
  const max = monthlyLimitOf(spend.limits);
  if (max == null) return null;
  if (max <= 0) return 100;
  return (spend.cost_usd / max) * 100;
}

/** A whole percent, never rounded up to a threshold it has not reached ("79 %", "100 %"). */
export function percentText(pct: number): string {
  return `${Math.floor(pct + 1e-9)} %`;
}

/** How close to its limit it is: red at it, orange from the 80 % warning, else teal. */
export function spendColor(pct: number | null): string {
  if (pct == null) return 'gray';
  return pct >= 100 ? 'red' : pct >= 80 ? 'orange' : 'teal';
}

/** "$0.80 of $1.00 this month (2026-12)", or "$0.80 this month (2026-12)" without a limit. */
export function monthlySpendText(spend: Pick<ProjectSpend, 'cost_usd' | 'limits' | 'month'>): string {
  const max = monthlyLimitOf(spend.limits);
  return `${formatUsd(spend.cost_usd)}${max == null ? '' : ` of ${formatUsd(max)}`} this month (${spend.month})`;
}

/** The calls without a price, which the limit does not count: "+ 3 unpriced calls, not counted", or null. */
export function unpricedSpendNote(spend: Pick<ProjectSpend, 'cost_usd' | 'requests' | 'unpriced_requests'>): string | null {
  const c = describeCost(spend);
  if (!c.unpriced) return null;
  const calls = `${c.unpriced} unpriced call${c.unpriced === 1 ? '' : 's'}`;
  return `+ ${calls}, not counted against the limit`;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** Whether a `budget_reached` payload (the event's, or a run end's `budget`) is the project's monthly limit. */
export function isProjectScope(p: unknown): boolean {
  return !!p && typeof p === 'object' && (p as { scope?: unknown }).scope === 'project';
}

/**
 * `session.spend_warning`'s line (payload `limit`, `max`, `spent`, `month`, `at`): "The project
 * has spent $0.80 of its $1.00 monthly limit (80 %)".
 */
export function spendWarningText(p: { max?: unknown; spent?: unknown; at?: unknown }): string {
  const max = num(p.max);
  const spent = num(p.spent);
  if (max == null || spent == null) return `The project has spent ${percentText((num(p.at) ?? 0.8) * 100)} of its monthly limit`;
  const pct = max > 0 ? (spent / max) * 100 : 100;
  return `The project has spent ${formatUsd(spent)} of its ${formatUsd(max)} monthly limit (${percentText(pct)})`;
}

/**
 * A stop at the project's monthly limit (payload `max`, `used`): "Stopped at the project's
 * monthly spend limit: $1.00 spent of $1.00".
 */
export function projectLimitReachedText(p: { max?: unknown; used?: unknown }): string {
  const max = num(p.max);
  const used = num(p.used);
  if (max == null || used == null) return "Stopped at the project's monthly spend limit";
  return `Stopped at the project's monthly spend limit: ${formatUsd(used)} spent of ${formatUsd(max)}`;
}
