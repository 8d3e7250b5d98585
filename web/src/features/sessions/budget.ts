// A session's budget against what it used, as the server counts it (`Budget`): the cost and
// tokens of `usage`, the sum of its runs' `turns` and its `sandbox_seconds`. A limit is reached
// when what was used is at it or past it; the server then starts no model call.
import type { Session, SessionDetail } from '../../api/client';
import { limitsOf, limitText, usedOf, type BudgetLimit } from '../../lib/budget';

/** What a session used of each limit; a list row lacks runs and sandbox time (undefined). */
export type BudgetUse = Partial<Record<BudgetLimit, number>>;

type Usage = { cost_usd?: number; total_tokens?: number };

export function budgetUseOf(s: Pick<Session, 'usage'> & Partial<Pick<SessionDetail, 'runs' | 'sandbox_seconds'>>): BudgetUse {
  const u = (s.usage ?? {}) as Usage;
  const use: BudgetUse = { max_cost_usd: u.cost_usd ?? 0, max_total_tokens: u.total_tokens ?? 0 };
  if (s.runs) use.max_turns = s.runs.reduce((n, r) => n + (r.turns ?? 0), 0);
  if (typeof s.sandbox_seconds === 'number') use.max_sandbox_seconds = s.sandbox_seconds;
  return use;
}

export type LimitRow = {
  limit: BudgetLimit;
  max: number;
  /** Null when the page does not know it (a list row's turns and sandbox time). */
  used: number | null;
  /** used / max, 0 to 1 (1 for a limit of 0). */
  fraction: number;
  reached: boolean;
  /** "$0.40 of $0.55". */
  text: string;
};

/** Each limit of the session's budget with its use, in the server's order. */
export function limitRows(budget: Session['budget'], use: BudgetUse): LimitRow[] {
  return limitsOf(budget).map(({ limit, max }) => {
    const used = use[limit] ?? null;
    const fraction = used == null ? 0 : max <= 0 ? 1 : Math.min(1, used / max);
    return { limit, max, used, fraction, reached: used != null && used >= max, text: used == null ? `limit ${limitText(limit, max)}` : usedOf(limit, used, max) };
  });
}

/** The progress bar's colour: orange at the limit, yellow past 80 %. */
export function meterColor(row: Pick<LimitRow, 'fraction' | 'reached'>): string {
  return row.reached ? 'orange' : row.fraction >= 0.8 ? 'yellow' : 'teal';
}

/** Its last turn stopped at the budget (a detail, which has its runs). */
export function lastTurnStoppedAtBudget(s: Pick<SessionDetail, 'runs'>): boolean {
  const last = s.runs.at(-1);
  return last?.stop_reason === 'budget_reached';
}

/**
 * Whether the session is at its budget: on a detail, its last turn stopped there or a limit is
 * reached now (the next message would stop before any model call); on a list row, which has
 * neither runs nor sandbox time, a cost or token limit is reached.
 */
export function atBudget(s: Pick<Session, 'budget' | 'usage'> & Partial<Pick<SessionDetail, 'runs' | 'sandbox_seconds'>>): boolean {
  if (s.runs && s.runs.at(-1)?.stop_reason === 'budget_reached') return true;
  if (!s.budget) return false;
  return limitRows(s.budget, budgetUseOf(s)).some((r) => r.reached);
}
