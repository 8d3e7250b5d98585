// A project's monthly spend limit, end to end, on a server of its own (its model never stops
// calling the shell, each call reported at $0.10 by the provider, so no other spec's script may
// answer it). The server runs open (no credentials), where every caller is an operator: the
// limit is set to $0.50 on the project's page, a looping turn gets the 80 % warning and stops at
// the limit (in the transcript, in words apart from a session budget's), the project's bar is
// full, the next message is refused with 402 and its sentence in the composer, and once the
// limit is raised on the project's page a message is accepted again (its turn stops at the new
// limit; the warning is not sent twice in a month).
import { expect, test } from '@playwright/test';
import { ownServer } from './ownServer';
import { shot } from './shots';
import { noSidewaysScroll } from './layout';

const AGENT = 'spender';

type Session = { id: string; status: string; usage: Record<string, number>; runs: { status: string; stop_reason: string | null; turns: number }[] };
type Spend = { month: string; cost_usd: number; requests: number; unpriced_requests: number; limits: { monthly_cost_usd?: number }; warned_at: string | null };
type Event = { seq: number; type: string; payload: Record<string, unknown> };

async function call(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  return fetch(`${own.server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function api(method: string, p: string, body?: unknown) {
  const r = await call(method, p, body);
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

// Every call with the shell offered: another `echo again`, at $0.10 as the provider reports it.
const own = ownServer('spend-limit', [
  { when: { has_tool: 'shell' }, reply: { text: 'Once more.', tool_calls: [{ name: 'shell', arguments: { command: 'echo again' } }], usage: { prompt_tokens: 100, completion_tokens: 10, cost: 0.1 } } },
  { reply: { text: 'Done.' } },
]);

test('a project stops at the monthly limit an operator sets in the UI, refuses turns with 402, and goes on once it is raised', async ({ page }) => {
  test.setTimeout(480_000);
  // Tall enough for the whole turn to be drawn in the transcript (a virtual list).
  await page.setViewportSize({ width: 1280, height: 1200 });

  const [project] = (await api('GET', '/api/projects')) as { slug: string; limits: unknown }[];
  expect(project.limits).toEqual({});
  await api('POST', '/api/agents', { slug: AGENT, name: 'Spender', instructions: 'You are a test agent.', model: 'fake-model' });
  const month = new Date().toISOString().slice(0, 7);

  // The limit, set on the project's page (open mode: the caller is an operator).
  await page.goto(`${own.ui}/projects/${project.slug}`);
  const limits = page.getByTestId('project-limits');
  await expect(limits.getByTestId('project-no-limit')).toHaveText('No monthly limit is set.');
  const field = limits.getByRole('textbox', { name: 'Monthly limit (US dollars)' });
  // A value out of range is caught at the field before anything is sent.
  await field.fill('2000000');
  await limits.getByRole('button', { name: 'Set limit' }).click();
  await expect(limits.getByText('A number of US dollars, 0 to 1,000,000.')).toBeVisible();
  await field.fill('0.5');
  await limits.getByRole('button', { name: 'Set limit' }).click();
  await expect(limits.getByTestId('spend-meter-text')).toHaveText(`$0.00 of $0.50 this month (${month})`);
  await expect(limits.getByTestId('spend-meter-percent')).toHaveText('0 %');
  await expect(limits.getByRole('button', { name: 'Remove limit' })).toBeVisible();
  expect(((await api('GET', `/api/projects/${project.slug}`)) as { limits: unknown }).limits).toEqual({ monthly_cost_usd: 0.5 });
  await shot(page, 'project-spend-limit');

  // A looping turn: calls at $0.10 each; the warning at 80 % ($0.40), the stop at $0.50.
  const id = ((await api('POST', '/api/sessions', { agent_id: AGENT, title: 'Spending session' })) as Session).id;
  await page.goto(`${own.ui}/sessions/${id}`);
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 120_000 });
  await page.getByTestId('composer').fill('Loop until you are stopped');
  await page.getByRole('button', { name: 'Send' }).click();
  const warning = page.getByTestId('spend-warning-text');
  await expect(warning).toHaveText([/^The project has spent \$0\.[45]0 of its \$0\.50 monthly limit \((80|100) %\)$/], { timeout: 120_000 });
  const reached = page.getByTestId('budget-reached-text');
  await expect(reached).toHaveText(["Stopped at the project's monthly spend limit: $0.50 spent of $0.50"], { timeout: 120_000 });
  await expect(page.getByTestId('budget-reached')).toHaveAttribute('data-scope', 'project');
  const end = page.getByTestId('run-end').last();
  await expect(end).toContainText('Run finished · stopped at the project’s monthly spend limit');
  await expect(end).not.toContainText('failed');
  // Not the session's budget: no budget dialog, the project's page instead.
  await expect(end.getByRole('button', { name: 'Raise the budget' })).toHaveCount(0);
  await expect(end.getByTestId('project-limit-hint')).toContainText('until an operator raises its monthly limit');
  await expect(end.getByRole('link', { name: /Project’s spend limit/ })).toHaveAttribute('href', `/projects/${project.slug}`);
  await shot(page, 'session-project-limit-reached');

  const first = (await api('GET', `/api/sessions/${id}`)) as Session;
  expect(first.runs.map((r) => [r.status, r.stop_reason])).toEqual([['completed', 'budget_reached']]);
  expect(first.usage.cost_usd).toBeCloseTo(0.5, 9);
  const events = (await api('GET', `/api/sessions/${id}/events`)) as Event[];
  const warnings = events.filter((e) => e.type === 'session.spend_warning');
  expect(warnings).toHaveLength(1);
  expect(warnings[0].payload).toMatchObject({ limit: 'monthly_cost_usd', max: 0.5, month, at: 0.8 });
  let spend = (await api('GET', `/api/projects/${project.slug}/spend`)) as Spend;
  expect(spend).toMatchObject({ month, requests: 5, unpriced_requests: 0, limits: { monthly_cost_usd: 0.5 } });
  expect(spend.cost_usd).toBeCloseTo(0.5, 9);
  expect(spend.warned_at).not.toBeNull();

  // The project's page: the bar full, the warning's time.
  await page.goto(`${own.ui}/projects/${project.slug}`);
  await expect(limits.getByTestId('spend-meter-text')).toHaveText(`$0.50 of $0.50 this month (${month})`);
  await expect(limits.getByTestId('spend-meter-percent')).toHaveText(/^1\d\d % · reached$/);
  await expect(limits.getByTestId('spend-meter')).toHaveAttribute('data-reached', 'true');
  await expect(limits.getByRole('progressbar')).toHaveAttribute('aria-valuenow', '100');
  await expect(limits.getByTestId('spend-meter-warned')).toContainText('The 80 % warning went out');
  await shot(page, 'project-spend-limit-reached');

  // The usage page says it too.
  await page.goto(`${own.ui}/usage`);
  await expect(page.getByTestId('usage-monthly-limit').getByTestId('spend-meter-text')).toHaveText(`$0.50 of $0.50 this month (${month})`);
  await shot(page, 'usage-monthly-limit');

  // The next message is refused: the API's sentence in the composer.
  const refused = await call('POST', `/api/sessions/${id}/messages`, { prompt: 'probe' });
  expect(refused.status).toBe(402);
  const detail = ((await refused.json()) as { detail: string }).detail;
  expect(detail).toContain('$0.50');
  await page.goto(`${own.ui}/sessions/${id}`);
  await page.getByTestId('composer').fill('One more, please');
  await page.getByRole('button', { name: 'Send' }).click();
  const refusal = page.getByTestId('spend-limit-refusal');
  await expect(refusal).toContainText('The project’s monthly spend limit is reached');
  await expect(refusal.getByTestId('spend-limit-refusal-detail')).toHaveText(detail);
  // Nothing was sent: the message stays in the composer.
  await expect(page.getByTestId('composer')).toHaveValue('One more, please');
  await shot(page, 'session-spend-limit-402');

  // Raised on the project's page, reached from the refusal.
  await refusal.getByRole('link', { name: 'project’s page' }).click();
  await expect(page).toHaveURL(new RegExp(`/projects/${project.slug}$`));
  await field.fill('1');
  await limits.getByRole('button', { name: 'Save limit' }).click();
  await expect(limits.getByTestId('spend-meter-text')).toHaveText(`$0.50 of $1.00 this month (${month})`);
  await expect(limits.getByTestId('spend-meter-percent')).toHaveText('50 %');
  expect(((await api('GET', `/api/projects/${project.slug}`)) as { limits: unknown }).limits).toEqual({ monthly_cost_usd: 1 });

  // The message goes now; its turn stops at the new limit, and the warning is not sent again.
  await page.goto(`${own.ui}/sessions/${id}`);
  await page.getByTestId('composer').fill('Go on');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('composer')).toHaveValue('');
  await expect(page.getByTestId('spend-limit-refusal')).toHaveCount(0);
  // (The server sums the month's spend in floating point: $0.50 + 5 × $0.10 is just under
  // $1.00, so a sixth call may go before the stop, as a limit is overshot by at most one call.)
  await expect(reached.last()).toHaveText(/^Stopped at the project's monthly spend limit: \$1\.(00|10) spent of \$1\.00$/, { timeout: 120_000 });
  await expect(page.getByTestId('project-limit-hint')).toHaveCount(1);
  const second = (await api('GET', `/api/sessions/${id}`)) as Session;
  expect(second.runs.map((r) => [r.status, r.stop_reason])).toEqual([
    ['completed', 'budget_reached'],
    ['completed', 'budget_reached'],
  ]);
  expect(((await api('GET', `/api/sessions/${id}/events`)) as Event[]).filter((e) => e.type === 'session.spend_warning')).toHaveLength(1);
  spend = (await api('GET', `/api/projects/${project.slug}/spend`)) as Spend;
  expect(spend.cost_usd).toBeGreaterThan(0.99);
  expect(spend.cost_usd).toBeLessThan(1.11);

  // A phone-width screen: the project's page and its bar fit.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${own.ui}/projects/${project.slug}`);
  await page.reload();
  await expect(limits.getByTestId('spend-meter-text')).toHaveText(new RegExp(`^\\$1\\.(00|10) of \\$1\\.00 this month \\(${month}\\)$`));
  await noSidewaysScroll(page, 390);
  await limits.scrollIntoViewIfNeeded();
  await shot(page, 'project-spend-limit-phone');

  // Removed: no limit, no bar; the usage page's card goes.
  await page.setViewportSize({ width: 1280, height: 800 });
  await limits.getByRole('button', { name: 'Remove limit' }).click();
  await expect(limits.getByTestId('project-no-limit')).toBeVisible();
  await expect(limits.getByRole('progressbar')).toHaveCount(0);
  expect(((await api('GET', `/api/projects/${project.slug}`)) as { limits: unknown }).limits).toEqual({});
  await page.goto(`${own.ui}/usage`);
  await expect(page.getByTestId('usage-spend')).toBeVisible();
  await expect(page.getByTestId('usage-monthly-limit')).toHaveCount(0);
});
