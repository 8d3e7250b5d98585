import { describe, expect, it } from 'vitest';
import { budgetReachedText } from './budget';
import {
  isProjectScope,
  limitsBody,
  monthlyLimitOf,
  monthlySpendText,
  percentText,
  projectLimitReachedText,
  spendColor,
  spendWarningText,
  spentPercent,
  unpricedSpendNote,
  validateMonthlyLimit,
} from './spendLimit';

const spend = (cost_usd: number, limits: Record<string, number> = { monthly_cost_usd: 1 }, more: Record<string, unknown> = {}) => ({
  month: '2026-12',
  cost_usd,
  requests: 8,
  unpriced_requests: 0,
  limits,
  warned_at: null,
  ...more,
});

describe('the month’s spend against the limit', () => {
  it('says the spend, the limit and the month', () => {
    expect(monthlySpendText(spend(0.8))).toBe('$0.80 of $1.00 this month (2026-12)');
    expect(monthlySpendText(spend(0.8, {}))).toBe('$0.80 this month (2026-12)');
    expect(monthlySpendText(spend(0, { monthly_cost_usd: 1500 }))).toBe('$0.00 of $1,500.00 this month (2026-12)');
  });

  it('counts the share spent, past 100 when overshot, none without a limit', () => {
    expect(spentPercent(spend(0.8))).toBeCloseTo(80);
    expect(spentPercent(spend(0.6, { monthly_cost_usd: 0.5 }))).toBeCloseTo(120);
    expect(spentPercent(spend(0.6, {}))).toBeNull();
    // A limit of $0 allows nothing: it is reached.
    expect(spentPercent(spend(0, { monthly_cost_usd: 0 }))).toBe(100);
    // Float sums do not fall under the threshold they reached, nor are rounded up to one.
    expect(percentText((0.7 + 0.1) * 100)).toBe('80 %');
    expect(percentText(((0.1 * 8) / 1) * 100)).toBe('80 %');
    expect(percentText(99.99)).toBe('99 %');
    expect([spendColor(null), spendColor(50), spendColor(80), spendColor(100)]).toEqual(['gray', 'teal', 'orange', 'red']);
  });

  it('notes the calls without a price, which the limit does not count', () => {
    expect(unpricedSpendNote(spend(0.8))).toBeNull();
    expect(unpricedSpendNote(spend(0.8, undefined, { unpriced_requests: 3 }))).toBe('+ 3 unpriced calls, not counted against the limit');
    expect(unpricedSpendNote(spend(0, undefined, { requests: 1, unpriced_requests: 1 }))).toBe('+ 1 unpriced call, not counted against the limit');
  });
});

describe('the limit’s field', () => {
  it('takes 0 to 1,000,000 dollars, and empty for none', () => {
    expect(validateMonthlyLimit('')).toBeNull();
    expect(validateMonthlyLimit('0')).toBeNull();
    expect(validateMonthlyLimit('0.5')).toBeNull();
    expect(validateMonthlyLimit('1000000')).toBeNull();
    expect(validateMonthlyLimit('1000001')).toMatch(/0 to 1,000,000/);
    expect(validateMonthlyLimit('-1')).toMatch(/0 to 1,000,000/);
    expect(validateMonthlyLimit('abc')).toMatch(/0 to 1,000,000/);
  });

  it('sends the whole set: the limit, or {} to remove it', () => {
    expect(limitsBody(' 0.5 ')).toEqual({ monthly_cost_usd: 0.5 });
    expect(limitsBody('')).toEqual({});
    expect(monthlyLimitOf({})).toBeNull();
    expect(monthlyLimitOf({ monthly_cost_usd: null })).toBeNull();
    expect(monthlyLimitOf({ monthly_cost_usd: 2 })).toBe(2);
  });
});

describe('the events of a turn near or at the limit', () => {
  it('says the 80 % warning', () => {
    expect(spendWarningText({ limit: 'monthly_cost_usd', max: 1, spent: 0.8, month: '2026-12', at: 0.8 } as never)).toBe('The project has spent $0.80 of its $1.00 monthly limit (80 %)');
    expect(spendWarningText({ max: 0.5, spent: 0.4000000000000001, at: 0.8 })).toBe('The project has spent $0.40 of its $0.50 monthly limit (80 %)');
    expect(spendWarningText({ at: 0.8 })).toBe('The project has spent 80 % of its monthly limit');
  });

  it('says a stop at the project’s limit apart from a stop at the session’s budget', () => {
    const project = { limit: 'monthly_cost_usd', max: 1, used: 1, scope: 'project' };
    expect(isProjectScope(project)).toBe(true);
    expect(isProjectScope({ limit: 'max_cost_usd', max: 1, used: 1, budget: { max_cost_usd: 1 } })).toBe(false);
    expect(isProjectScope(null)).toBe(false);
    expect(projectLimitReachedText(project)).toBe("Stopped at the project's monthly spend limit: $1.00 spent of $1.00");
    expect(budgetReachedText(project)).toBe("Stopped at the project's monthly spend limit: $1.00 spent of $1.00");
    expect(budgetReachedText({ scope: 'project' })).toBe("Stopped at the project's monthly spend limit");
    expect(budgetReachedText({ limit: 'max_cost_usd', max: 0.35, used: 0.4 })).toBe('Stopped at the budget: cost $0.40 of the $0.35 limit');
  });
});
