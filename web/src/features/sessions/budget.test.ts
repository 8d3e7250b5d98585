import { describe, expect, it } from 'vitest';
import type { SessionDetail } from '../../api/client';
import { atBudget, budgetUseOf, lastTurnStoppedAtBudget, limitRows, meterColor } from './budget';

const run = (turns: number, stop_reason: string | null = 'end_turn') => ({ id: `r${turns}`, turns, stop_reason, status: 'completed' });
const detail = (budget: unknown, runs: unknown[], usage = { cost_usd: 0.4, total_tokens: 440 }, sandbox_seconds = 30) =>
  ({ budget, runs, usage, sandbox_seconds }) as unknown as SessionDetail;

describe('a session’s budget against its use', () => {
  it('counts cost and tokens from usage, model steps from its runs, and its sandbox time', () => {
    expect(budgetUseOf(detail(null, [run(3), run(2)]))).toEqual({ max_cost_usd: 0.4, max_total_tokens: 440, max_turns: 5, max_sandbox_seconds: 30 });
    // A list row: no runs, no sandbox time.
    expect(budgetUseOf({ usage: {} } as SessionDetail)).toEqual({ max_cost_usd: 0, max_total_tokens: 0 });
  });

  it('gives each limit a bar, reached at the limit as the server counts it', () => {
    const rows = limitRows({ max_cost_usd: 0.55, max_turns: 5, max_sandbox_seconds: 300 }, budgetUseOf(detail(null, [run(3), run(2)])));
    expect(rows.map((r) => [r.limit, r.text, r.reached])).toEqual([
      ['max_cost_usd', '$0.40 of $0.55', false],
      ['max_turns', '5 of 5 model steps', true],
      ['max_sandbox_seconds', '30s of 5m 0s', false],
    ]);
    expect(rows[0].fraction).toBeCloseTo(0.4 / 0.55);
    expect(rows.map(meterColor)).toEqual(['teal', 'orange', 'teal']);
    expect(meterColor({ fraction: 0.85, reached: false })).toBe('yellow');
    // A limit the page cannot count (a list row's steps) is said alone, never reached.
    expect(limitRows({ max_turns: 5 }, { max_cost_usd: 0 })).toEqual([{ limit: 'max_turns', max: 5, used: null, fraction: 0, reached: false, text: 'limit 5 model steps' }]);
    // A limit of 0 is reached at once.
    expect(limitRows({ max_total_tokens: 0 }, { max_total_tokens: 0 })[0]).toMatchObject({ fraction: 1, reached: true });
  });

  it('knows a session at its budget: its last turn stopped there, or a limit is reached now', () => {
    const stopped = detail({ max_cost_usd: 0.55 }, [run(4, 'budget_reached')]);
    expect(lastTurnStoppedAtBudget(stopped)).toBe(true);
    expect(atBudget(stopped)).toBe(true);
    // A later turn that ended otherwise: no longer.
    expect(atBudget(detail({ max_cost_usd: 0.55 }, [run(4, 'budget_reached'), run(1, 'end_turn')]))).toBe(false);
    // A list row, from its cost and tokens alone.
    expect(atBudget({ budget: { max_cost_usd: 0.35 }, usage: { cost_usd: 0.4 } } as never)).toBe(true);
    expect(atBudget({ budget: { max_total_tokens: 1000 }, usage: { total_tokens: 440 } } as never)).toBe(false);
    expect(atBudget({ budget: null, usage: { cost_usd: 9 } } as never)).toBe(false);
  });
});
