// Session budgets, end to end, on a server of its own (its model never stops calling the shell,
// so no other spec's script may answer it): an agent made in the UI with a default budget of
// $0.35, a session started from its page with a budget of its own (the agent's $0.35, plus a
// step limit), a message, and each model call reported at $0.10 by the provider. The turn
// stops before the call that would pass $0.35 (at $0.40: a budget is overshot by at most one
// call), the transcript says so in words as a normal end, the budget is raised to $0.55 from
// there, and the next message goes on and stops at the new limit ($0.60).
import { expect, test } from '@playwright/test';
import { ownServer } from './ownServer';
import { shot } from './shots';
import { noSidewaysScroll } from './layout';

const AGENT = 'looper';

type Session = { id: string; status: string; budget: Record<string, number> | null; usage: Record<string, number>; runs: { status: string; stop_reason: string | null; turns: number }[] };

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const r = await fetch(`${own.server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

// Every call with the shell offered: another `echo again`, at $0.10 as the provider reports it.
const own = ownServer('budget', [
  { when: { has_tool: 'shell' }, reply: { text: 'Once more.', tool_calls: [{ name: 'shell', arguments: { command: 'echo again' } }], usage: { prompt_tokens: 100, completion_tokens: 10, cost: 0.1 } } },
  { reply: { text: 'Done.' } },
]);

test('a turn stops at the budget set in the UI, and goes on to the next limit once it is raised', async ({ page }) => {
  test.setTimeout(360_000);

  // The agent, with a default budget for its sessions.
  await page.goto(`${own.ui}/agents/new`);
  await page.getByLabel('Slug').fill(AGENT);
  await page.getByLabel('Name', { exact: false }).first().fill('Looper');
  await page.getByRole('textbox', { name: 'Model' }).fill('fake-model');
  await page.getByRole('tab', { name: 'Budget' }).click();
  await page.getByRole('textbox', { name: 'Cost (US dollars)' }).fill('0.35');
  await shot(page, 'agent-budget-form');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${AGENT}$`));
  await expect(page.getByTestId('agent-budget')).toHaveText('$0.35 per session');
  expect(((await api('GET', `/api/agents/${AGENT}`)) as { budget: unknown }).budget).toEqual({ max_cost_usd: 0.35 });

  // A session of its own budget: the agent's limit to start from, and a step limit besides.
  await page.getByRole('button', { name: 'Start a session' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Title').fill('Budgeted session');
  await dialog.getByRole('button', { name: /Budget/ }).click();
  await expect(dialog.getByTestId('agent-budget')).toHaveText('The agent’s, copied now: $0.35.');
  await dialog.getByText('Its own').click();
  await expect(dialog.getByRole('textbox', { name: 'Cost (US dollars)' })).toHaveValue('0.35');
  await dialog.getByRole('textbox', { name: 'Model steps' }).fill('100');
  await shot(page, 'session-budget-create');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const id = page.url().split('/').pop()!;
  expect(((await api('GET', `/api/sessions/${id}`)) as Session).budget).toEqual({ max_cost_usd: 0.35, max_turns: 100 });
  await expect(page.getByTestId('session-budget-text')).toHaveText('$0.00 of $0.35 budget (+1)');
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 120_000 });

  // The first turn: calls at $0, 0.1, 0.2 and 0.3; at $0.40 the next would pass the limit.
  await page.getByTestId('composer').fill('Loop until you are stopped');
  await page.getByRole('button', { name: 'Send' }).click();
  const reached = page.getByTestId('budget-reached-text');
  await expect(reached).toHaveText(['Stopped at the budget: cost $0.40 of the $0.35 limit'], { timeout: 120_000 });
  const end = page.getByTestId('run-end').last();
  await expect(end).toContainText('Run finished · stopped at the budget · 4 turns');
  await expect(end).not.toContainText('failed');
  // The header says it too: the status, and the limit reached.
  await expect(page.getByTestId('session-budget-reached')).toHaveText('budget reached');
  await expect(page.getByTestId('session-budget-text')).toHaveText('$0.40 of $0.35 budget (+1)');
  await expect(page.getByTestId('composer')).toHaveAttribute('placeholder', /budget is reached/);
  await shot(page, 'session-budget-reached');
  const first = (await api('GET', `/api/sessions/${id}`)) as Session;
  expect(first.runs.map((r) => [r.status, r.stop_reason, r.turns])).toEqual([['completed', 'budget_reached', 4]]);
  expect(first.usage.cost_usd).toBeCloseTo(0.4, 9);

  // Raised from the transcript's end: each limit against its use, then the new cost limit.
  await end.getByRole('button', { name: 'Raise the budget' }).click();
  const budget = page.getByRole('dialog', { name: 'Budget' });
  await expect(budget.getByTestId('budget-meter-text')).toHaveText(['$0.40 of $0.35 · reached', '4 of 100 model steps']);
  await budget.getByRole('textbox', { name: 'Cost (US dollars)' }).fill('0.55');
  await shot(page, 'session-budget-raise');
  await budget.getByRole('button', { name: 'Save' }).click();
  await expect(budget).toHaveCount(0);
  await expect(page.getByTestId('session-budget-text')).toHaveText('$0.40 of $0.55 budget (+1)');
  expect(((await api('GET', `/api/sessions/${id}`)) as Session).budget).toEqual({ max_cost_usd: 0.55, max_turns: 100 });

  // The next message goes on where the turn stopped: calls at $0.40 and 0.50, then $0.60.
  await page.getByTestId('composer').fill('Go on');
  await page.getByRole('button', { name: 'Send' }).click();
  // (The transcript is a virtual list: the newest rows are the ones certainly drawn.)
  await expect(reached.last()).toHaveText('Stopped at the budget: cost $0.60 of the $0.55 limit', { timeout: 120_000 });
  await expect(page.getByTestId('run-end').last()).toContainText('Run finished · stopped at the budget · 2 turns');
  await expect(page.getByTestId('raise-budget-hint')).toHaveCount(1);
  await expect(page.getByTestId('session-budget-text')).toHaveText('$0.60 of $0.55 budget (+1)');
  await expect(page.getByTestId('session-budget-reached')).toBeVisible();
  await shot(page, 'session-budget-again');
  const second = (await api('GET', `/api/sessions/${id}`)) as Session;
  expect(second.runs.map((r) => [r.stop_reason, r.turns])).toEqual([['budget_reached', 4], ['budget_reached', 2]]);
  expect(second.usage.cost_usd).toBeCloseTo(0.6, 9);
  expect(second.usage.requests).toBe(6);

  // The Usage tab: the budget against its use, each run's end in words.
  await page.getByRole('tab', { name: 'Usage' }).click();
  await expect(page.getByTestId('usage-budget').getByTestId('budget-meter-text')).toHaveText(['$0.60 of $0.55 · reached', '6 of 100 model steps']);
  await expect(page.getByText('completed · stopped at the budget')).toHaveCount(2);

  // The sessions list marks it (its cost is past its limit).
  await page.goto(`${own.ui}/sessions`);
  const row = page.getByRole('row').filter({ hasText: 'Budgeted session' });
  await expect(row.getByTestId('session-budget-reached')).toHaveText('budget reached');
  await shot(page, 'sessions-budget-reached');

  // A phone-width screen: the header, the transcript's stop and its end fit.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${own.ui}/sessions/${id}`);
  await expect(page.getByTestId('budget-reached-text').last()).toHaveText('Stopped at the budget: cost $0.60 of the $0.55 limit');
  await expect(page.getByTestId('session-budget-text')).toBeVisible();
  await noSidewaysScroll(page, 390);
  await shot(page, 'session-budget-phone');
  await page.getByTestId('edit-budget').click();
  await expect(page.getByRole('dialog', { name: 'Budget' }).getByTestId('budget-meter')).toHaveCount(2);
  await noSidewaysScroll(page, 390);
  await shot(page, 'session-budget-dialog-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
});
