// A session's budget (openapi.json's `Budget`): limits on what its turns spend, checked by the
// server before every model call. Shared by the forms that set one (a new session, a session's
// budget, an agent's default for its sessions) and the pages that show one: the fields' values,
// their checks with the schema's ranges, the body, and how a limit and its use are said.
import type { Schemas } from '../api/client';
import { formatUsd } from './money';
import { isProjectScope, projectLimitReachedText } from './spendLimit';
import { formatDuration, formatNumber } from './time';

export type Budget = Schemas['Budget'];
export type BudgetLimit = 'max_cost_usd' | 'max_total_tokens' | 'max_turns' | 'max_sandbox_seconds';

/** The limits in the server's order (the first reached is the one a stop names). */
export const BUDGET_LIMITS: BudgetLimit[] = ['max_cost_usd', 'max_total_tokens', 'max_turns', 'max_sandbox_seconds'];

type LimitInfo = {
  /** The field's label. */
  label: string;
  /** The limit in words, lower case, for sentences ("cost", "model steps"). */
  noun: string;
  /** The largest value the schema takes. */
  max: number;
  /** Whole numbers only. */
  whole: boolean;
  /** A value of it for people. */
  format: (n: number) => string;
  /** What the field is, under it. */
  help: string;
};

export const LIMIT_INFO: Record<BudgetLimit, LimitInfo> = {
  max_cost_usd: {
    label: 'Cost (US dollars)',
    noun: 'cost',
    max: 1_000_000,
    whole: false,
    format: formatUsd,
    help: 'What its model calls may cost. Calls without a price are not counted: give such models a token limit too.',
  },
  max_total_tokens: {
    label: 'Tokens',
    noun: 'tokens',
    max: 1_000_000_000_000,
    whole: true,
    format: (n) => formatNumber(n),
    help: 'Input and output tokens of its model calls.',
  },
  max_turns: {
    label: 'Model steps',
    noun: 'model steps',
    max: 1_000_000,
    whole: true,
    format: (n) => formatNumber(n),
    help: 'Model calls of its agent over all its turns (the runs’ turns).',
  },
  max_sandbox_seconds: {
    label: 'Sandbox time (seconds)',
    noun: 'sandbox time',
    max: 31_536_000,
    whole: false,
    format: (n) => formatDuration(n),
    help: 'How long its sandbox may have been up, over every boot.',
  },
};

/** The fields as typed: '' for no limit. */
export type BudgetValues = Record<BudgetLimit, string>;

export function emptyBudget(): BudgetValues {
  return { max_cost_usd: '', max_total_tokens: '', max_turns: '', max_sandbox_seconds: '' };
}

export function budgetValuesOf(b: Budget | null | undefined): BudgetValues {
  const v = emptyBudget();
  for (const k of BUDGET_LIMITS) if (b?.[k] != null) v[k] = String(b[k]);
  return v;
}

const given = (s: string) => s.trim() !== '';

/** Whether any field holds a limit. */
export function hasLimits(v: BudgetValues): boolean {
  return BUDGET_LIMITS.some((k) => given(v[k]));
}

/** Every field's problem, keyed as a 422 names it (`budget.max_cost_usd`). */
export function validateBudget(v: BudgetValues, prefix = 'budget'): Record<string, string> {
  const e: Record<string, string> = {};
  for (const k of BUDGET_LIMITS) {
    if (!given(v[k])) continue;
    const n = Number(v[k].trim());
    const info = LIMIT_INFO[k];
    const range = `0 to ${formatNumber(info.max)}`;
    if (!Number.isFinite(n) || n < 0 || n > info.max) e[`${prefix}.${k}`] = info.whole ? `A whole number, ${range}.` : `A number, ${range}.`;
    else if (info.whole && !Number.isInteger(n)) e[`${prefix}.${k}`] = `A whole number, ${range}.`;
  }
  return e;
}

/** The limits given, or null when none is (no budget). */
export function budgetBody(v: BudgetValues): Budget | null {
  if (!hasLimits(v)) return null;
  const b: Budget = {};
  for (const k of BUDGET_LIMITS) if (given(v[k])) b[k] = Number(v[k].trim());
  return b;
}

/** The limits a budget sets, in order. */
export function limitsOf(b: Budget | null | undefined): { limit: BudgetLimit; max: number }[] {
  return BUDGET_LIMITS.flatMap((limit) => (b?.[limit] != null ? [{ limit, max: b[limit] as number }] : []));
}

/** "$0.35 · 50 model steps", or "no budget". */
export function budgetSummary(b: Budget | null | undefined): string {
  const parts = limitsOf(b).map(({ limit, max }) => limitText(limit, max));
  return parts.length ? parts.join(' · ') : 'no budget';
}

/** One limit in words: "$0.35", "10,000 tokens", "50 model steps", "1h 0m of sandbox time". */
export function limitText(limit: BudgetLimit, n: number): string {
  const f = LIMIT_INFO[limit].format(n);
  switch (limit) {
    case 'max_cost_usd':
      return f;
    case 'max_total_tokens':
      return `${f} tokens`;
    case 'max_turns':
      return `${f} model step${n === 1 ? '' : 's'}`;
    case 'max_sandbox_seconds':
      return `${f} of sandbox time`;
  }
}

/** What was used against a limit, and the limit: "$0.40 of $0.55", "12 of 50 model steps". */
export function usedOf(limit: BudgetLimit, used: number, max: number): string {
  const f = LIMIT_INFO[limit].format;
  if (limit === 'max_cost_usd' || limit === 'max_sandbox_seconds') return `${f(used)} of ${f(max)}`;
  return `${f(used)} of ${limitText(limit, max)}`;
}

export function isBudgetLimit(s: unknown): s is BudgetLimit {
  return typeof s === 'string' && (BUDGET_LIMITS as string[]).includes(s);
}

/**
 * The sentence a stop at the budget is said with, from `session.budget_reached`'s payload
 * (`limit`, `max`, `used`): "Stopped at the budget: cost $0.40 of the $0.35 limit"; with
 * `scope: "project"`, the project's monthly limit's sentence (lib/spendLimit.ts).
 */
export function budgetReachedText(p: { limit?: unknown; max?: unknown; used?: unknown; scope?: unknown }): string {
  // The project's monthly limit (`scope: "project"`) is not the session's budget: said apart.
  if (isProjectScope(p)) return projectLimitReachedText(p);
  if (!isBudgetLimit(p.limit) || typeof p.max !== 'number' || typeof p.used !== 'number') {
    return `Stopped at the budget${typeof p.limit === 'string' ? ` (${p.limit})` : ''}`;
  }
  const info = LIMIT_INFO[p.limit];
  return `Stopped at the budget: ${info.noun} ${info.format(p.used)} of the ${info.format(p.max)} limit`;
}
