import { describe, expect, it } from 'vitest';
import { budgetBody, budgetReachedText, budgetSummary, budgetValuesOf, emptyBudget, hasLimits, limitText, usedOf, validateBudget } from './budget';

describe('a budget’s fields', () => {
  it('round-trip a budget, empty fields being no limit', () => {
    const v = budgetValuesOf({ max_cost_usd: 0.35, max_turns: 40 });
    expect(v).toEqual({ max_cost_usd: '0.35', max_total_tokens: '', max_turns: '40', max_sandbox_seconds: '' });
    expect(budgetBody(v)).toEqual({ max_cost_usd: 0.35, max_turns: 40 });
    expect(budgetValuesOf(null)).toEqual(emptyBudget());
    expect(hasLimits(emptyBudget())).toBe(false);
    expect(budgetBody({ ...emptyBudget(), max_total_tokens: '  ' })).toBeNull();
    // 0 is a limit (no call at all), not "none".
    expect(budgetBody({ ...emptyBudget(), max_total_tokens: '0' })).toEqual({ max_total_tokens: 0 });
  });

  it('are checked with the schema’s ranges: whole tokens and steps, nothing negative or past the maximum', () => {
    expect(validateBudget({ max_cost_usd: '0.5', max_total_tokens: '1000', max_turns: '0', max_sandbox_seconds: '3600.5' })).toEqual({});
    const e = validateBudget({ max_cost_usd: '-1', max_total_tokens: '1.5', max_turns: '1000001', max_sandbox_seconds: '31536001' });
    expect(Object.keys(e)).toEqual(['budget.max_cost_usd', 'budget.max_total_tokens', 'budget.max_turns', 'budget.max_sandbox_seconds']);
    expect(e['budget.max_total_tokens']).toMatch(/whole number/);
    expect(validateBudget({ ...emptyBudget(), max_cost_usd: 'abc' }, 'x')).toEqual({ 'x.max_cost_usd': expect.stringMatching(/A number/) });
  });
});

describe('a budget in words', () => {
  it('says each limit and its use', () => {
    expect(budgetSummary({ max_cost_usd: 0.35, max_total_tokens: 10000, max_turns: 1, max_sandbox_seconds: 3600 })).toBe('$0.35 · 10,000 tokens · 1 model step · 1h 0m of sandbox time');
    expect(budgetSummary(null)).toBe('no budget');
    expect(budgetSummary({})).toBe('no budget');
    expect(limitText('max_turns', 50)).toBe('50 model steps');
    expect(usedOf('max_cost_usd', 0.4, 0.55)).toBe('$0.40 of $0.55');
    expect(usedOf('max_turns', 12, 50)).toBe('12 of 50 model steps');
    expect(usedOf('max_total_tokens', 330, 250)).toBe('330 of 250 tokens');
    expect(usedOf('max_sandbox_seconds', 90, 600)).toBe('1m 30s of 10m 0s');
  });

  it('says which limit a turn stopped at, from session.budget_reached', () => {
    expect(budgetReachedText({ limit: 'max_cost_usd', max: 0.35, used: 0.4000000000000001 })).toBe('Stopped at the budget: cost $0.40 of the $0.35 limit');
    expect(budgetReachedText({ limit: 'max_turns', max: 3, used: 3 })).toBe('Stopped at the budget: model steps 3 of the 3 limit');
    expect(budgetReachedText({ limit: 'max_total_tokens', max: 250, used: 330 })).toBe('Stopped at the budget: tokens 330 of the 250 limit');
    expect(budgetReachedText({ limit: 'max_widgets', max: 1, used: 2 })).toBe('Stopped at the budget (max_widgets)');
    expect(budgetReachedText({})).toBe('Stopped at the budget');
  });
});
