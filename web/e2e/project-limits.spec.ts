// A project's capacity, end to end, on a server of its own (no warm pool, so every session
// boots a sandbox of its own, and no per-project flags). The server runs open (no credentials),
// where every caller is an operator. On the project's page: a monthly spend limit first, then
// "Sandboxes at once" (0 is refused at the field, 1 is saved); of two sessions made through the
// API the second waits queued (`provisioning`) and the card says so; raised to 2 in the UI, the
// second boots and the card says 2 of 2. "Turns in flight" and "Requests per minute" are kept
// over a reload, a capacity save keeps the monthly limit and removing the monthly limit keeps
// the capacity (the PATCH replaces the whole set), and a phone-width screen has no sideways
// scroll.
import { expect, test } from '@playwright/test';
import { ownServer } from './ownServer';
import { shot } from './shots';
import { noSidewaysScroll } from './layout';

const AGENT = 'capacity';

type Session = { id: string; status: string };
type Spend = { limits: Record<string, number>; sandboxes: number; sandboxes_queued: number; runs: number; runs_queued: number };
type Event = { seq: number; type: string };

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const r = await fetch(`${own.server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

const statusOf = async (id: string) => ((await api('GET', `/api/sessions/${id}`)) as Session).status;

const own = ownServer('project-limits', [{ reply: { text: 'Done.' } }]);

test('an operator sets the project’s capacity on its page: a session past it waits queued until it is raised, and every save keeps the other limits', async ({ page }) => {
  test.setTimeout(480_000);
  await page.setViewportSize({ width: 1280, height: 1000 });

  const [project] = (await api('GET', '/api/projects')) as { slug: string; limits: unknown }[];
  expect(project.limits).toEqual({});
  await api('POST', '/api/agents', { slug: AGENT, name: 'Capacity', instructions: 'You are a test agent.', model: 'fake-model' });
  const month = new Date().toISOString().slice(0, 7);
  const limitsNow = async () => ((await api('GET', `/api/projects/${project.slug}`)) as { limits: unknown }).limits;

  await page.goto(`${own.ui}/projects/${project.slug}`);
  const spendCard = page.getByTestId('project-limits');
  const card = page.getByTestId('project-capacity');

  // A monthly spend limit first, which every capacity save must keep.
  await spendCard.getByRole('textbox', { name: 'Monthly limit (US dollars)' }).fill('5');
  await spendCard.getByRole('button', { name: 'Set limit' }).click();
  await expect(spendCard.getByTestId('spend-meter-text')).toHaveText(`$0.00 of $5.00 this month (${month})`);
  expect(await limitsNow()).toEqual({ monthly_cost_usd: 5 });

  // Nothing runs yet, and no capacity of the project's own.
  await expect(card.getByTestId('capacity-sandboxes')).toHaveText('0 sandboxes · no project limit');
  await expect(card.getByTestId('capacity-runs')).toHaveText('0 turns in flight · no project limit');
  const sandboxes = card.getByRole('textbox', { name: 'Sandboxes at once' });
  const runs = card.getByRole('textbox', { name: 'Turns in flight' });
  const rpm = card.getByRole('textbox', { name: 'Requests per minute' });
  const save = card.getByRole('button', { name: 'Save capacity' });
  await expect(sandboxes).toHaveValue('');
  await expect(sandboxes).toHaveAttribute('placeholder', 'server’s default');

  // 0 is caught at the field before anything is sent; 1 is saved, the monthly limit kept.
  await sandboxes.fill('0');
  await save.click();
  await expect(card.getByText('A whole number, 1 to 1,000,000 (empty for the server’s default).')).toBeVisible();
  await expect(sandboxes).toHaveAttribute('aria-invalid', 'true');
  expect(await limitsNow()).toEqual({ monthly_cost_usd: 5 });
  await sandboxes.fill('1');
  await save.click();
  await expect(card.getByTestId('capacity-sandboxes')).toHaveText('0 of 1 sandboxes');
  await expect(sandboxes).not.toHaveAttribute('aria-invalid', 'true');
  expect(await limitsNow()).toEqual({ monthly_cost_usd: 5, max_sandboxes: 1 });

  // Two sessions: the first boots, the second waits queued for a sandbox.
  const first = ((await api('POST', '/api/sessions', { agent_id: AGENT, title: 'First' })) as Session).id;
  await expect.poll(() => statusOf(first), { timeout: 120_000 }).toBe('running');
  const second = ((await api('POST', '/api/sessions', { agent_id: AGENT, title: 'Second' })) as Session).id;
  await expect
    .poll(async () => {
      const s = (await api('GET', `/api/projects/${project.slug}/spend`)) as Spend;
      return [s.sandboxes, s.sandboxes_queued];
    }, { timeout: 60_000 })
    .toEqual([1, 1]);
  await expect.poll(async () => ((await api('GET', `/api/sessions/${second}/events`)) as Event[]).some((e) => e.type === 'session.queued'), { timeout: 30_000 }).toBe(true);
  expect(await statusOf(second)).toBe('provisioning');
  // The card reads it again by itself (no reload).
  await expect(card.getByTestId('capacity-sandboxes')).toHaveText('1 of 1 sandboxes · 1 queued');
  await expect(card.getByTestId('capacity-sandboxes')).toHaveAttribute('data-full', 'true');

  // Raised to 2 in the UI: the second boots.
  await sandboxes.fill('2');
  await save.click();
  await expect.poll(() => statusOf(second), { timeout: 120_000 }).toBe('running');
  await expect(card.getByTestId('capacity-sandboxes')).toHaveText('2 of 2 sandboxes');
  expect(await limitsNow()).toEqual({ monthly_cost_usd: 5, max_sandboxes: 2 });

  // Turns in flight and requests per minute, kept over a reload, the monthly limit still there.
  await runs.fill('3');
  await rpm.fill('600');
  await save.click();
  await expect(card.getByTestId('capacity-runs')).toHaveText('0 of 3 turns in flight');
  await expect(card.getByTestId('capacity-requests')).toHaveText('600 a minute, all its callers together');
  await page.reload();
  await expect(card.getByTestId('capacity-sandboxes')).toHaveText('2 of 2 sandboxes');
  await expect(sandboxes).toHaveValue('2');
  await expect(runs).toHaveValue('3');
  await expect(rpm).toHaveValue('600');
  await expect(spendCard.getByTestId('spend-meter-text')).toHaveText(`$0.00 of $5.00 this month (${month})`);
  const capacity = { max_sandboxes: 2, max_runs: 3, requests_per_minute: 600 };
  expect(await limitsNow()).toEqual({ monthly_cost_usd: 5, ...capacity });
  expect(((await api('GET', `/api/projects/${project.slug}/spend`)) as Spend).limits).toEqual({ monthly_cost_usd: 5, ...capacity });
  await card.scrollIntoViewIfNeeded();
  await shot(page, 'project-limits');

  // Removing the monthly limit keeps the capacity.
  await spendCard.getByRole('button', { name: 'Remove limit' }).click();
  await expect(spendCard.getByTestId('project-no-limit')).toBeVisible();
  await expect.poll(limitsNow).toEqual(capacity);
  await expect(runs).toHaveValue('3');

  // A phone-width screen: both cards fit.
  await page.setViewportSize({ width: 375, height: 812 });
  await page.reload();
  await expect(card.getByTestId('capacity-sandboxes')).toHaveText('2 of 2 sandboxes');
  await expect(rpm).toHaveValue('600');
  await noSidewaysScroll(page, 375);
  await card.scrollIntoViewIfNeeded();
  await noSidewaysScroll(page, 375);
  await shot(page, 'project-limits-phone');
});
