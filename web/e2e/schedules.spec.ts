// Schedules, end to end, on the shared server (whose every process fires schedules each
// second): an agent made through the API, a schedule made on its Schedules tab in the UI
// (every second, in Tokyo, seen from New York), a bad expression refused on the cron field, the
// schedule listed on the Schedules page with its next fire in both zones, a `started` fire in
// its history with a link to the session it made, paused (no next fire), a bad expression
// refused again in the edit form, and deleted.
// In a project of its own: ui.spec.ts counts the default project's agents.
import { expect, test, type Page } from '@playwright/test';
import { tail } from './harness';
import { noSidewaysScroll } from './layout';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'schedules-e2e';
const AGENT = 'scheduled';
const MESSAGE = 'Write the morning report.';

async function api(method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = { 'X-Project': PROJECT };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${API()}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  expect(r.ok, `${method} ${path}: ${r.status} ${text}`).toBeTruthy();
  return text ? JSON.parse(text) : null;
}

test.describe.configure({ mode: 'serial' });
// The viewer's zone, unlike the schedule's.
test.use({ timezoneId: 'America/New_York' });

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Schedules e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
});

test.afterAll(async () => {
  const headers = { 'X-Project': PROJECT };
  const schedules = await fetch(`${API()}/api/agents/${AGENT}/schedules`, { headers });
  if (schedules.ok) for (const s of (await schedules.json()) as { id: string }[]) await fetch(`${API()}/api/agents/${AGENT}/schedules/${s.id}`, { method: 'DELETE', headers });
  const sessions = (await (await fetch(`${API()}/api/sessions?limit=100&offset=0`, { headers })).json()) as { id: string }[];
  for (const s of sessions) await fetch(`${API()}/api/sessions/${s.id}`, { method: 'DELETE', headers });
  await fetch(`${API()}/api/agents/${AGENT}`, { method: 'DELETE', headers });
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

/** The cron field's error, as the form shows it under the field. */
async function expectCronRefused(page: Page) {
  const dialog = page.getByRole('dialog');
  const cron = dialog.getByTestId('schedule-cron');
  await expect(cron).toHaveAttribute('aria-invalid', 'true');
  const errorId = (await cron.getAttribute('aria-describedby'))!.split(' ').find((id) => id.endsWith('-error'))!;
  await expect(dialog.locator(`[id="${errorId}"]`)).not.toBeEmpty();
  return (await dialog.locator(`[id="${errorId}"]`).textContent())!;
}

test('a schedule made in the UI fires every second, is paused, refuses a bad expression, and is deleted', async ({ page }) => {
  test.setTimeout(240_000);
  await api('POST', '/api/agents', { slug: AGENT, name: 'Scheduled agent', model: 'fake-model' });

  // The agent's Schedules tab: none yet.
  await page.goto(`${UI()}/agents/${AGENT}`);
  await page.getByRole('tab', { name: 'Schedules' }).click();
  await expect(page).toHaveURL(/tab=schedules/);
  await expect(page.getByText('No schedules', { exact: true })).toBeVisible();

  // The form: the viewer's zone by default, a preset, then a zone searched for.
  await page.getByRole('button', { name: 'New schedule' }).click();
  const dialog = page.getByRole('dialog', { name: 'New schedule' });
  const zone = dialog.getByRole('textbox', { name: 'Time zone' });
  await expect(zone).toHaveValue('America/New_York');
  await dialog.getByLabel('Name').fill('Morning report');
  await dialog.getByText('Weekdays at 9:00').click();
  await expect(dialog.getByTestId('schedule-cron')).toHaveValue('0 9 * * 1-5');
  await zone.click();
  await zone.fill('Tokyo');
  await page.getByRole('option', { name: 'Asia/Tokyo' }).click();
  await expect(zone).toHaveValue('Asia/Tokyo');
  await dialog.getByRole('textbox', { name: 'Message' }).fill(MESSAGE);
  await dialog.getByRole('textbox', { name: 'Model steps' }).fill('5');

  // An expression the server does not take (the form counts five fields): refused on its field.
  await dialog.getByTestId('schedule-cron').fill('61 * * * *');
  await dialog.getByRole('button', { name: 'Create schedule' }).click();
  const refused = await expectCronRefused(page);
  expect(refused.length).toBeGreaterThan(0);
  expect(await api('GET', `/api/agents/${AGENT}/schedules`)).toEqual([]);

  // Every second.
  await dialog.getByTestId('schedule-cron').fill('* * * * * *');
  await dialog.getByRole('button', { name: 'Create schedule' }).click();
  await expect(dialog).toHaveCount(0);
  const [made] = (await api('GET', `/api/agents/${AGENT}/schedules`)) as any[];
  expect(made).toMatchObject({ name: 'Morning report', cron: '* * * * * *', timezone: 'Asia/Tokyo', message: MESSAGE, session: 'new', budget: { max_turns: 5 }, paused: false, missed: 'skip', busy: 'skip' });
  const tabRow = page.getByTestId('schedule-row');
  await expect(tabRow).toHaveCount(1);
  await expect(tabRow.getByTestId('schedule-cron')).toHaveText('* * * * * *');

  // The Schedules page: the agent's schedule with its next fire in New York's time and Tokyo's.
  await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Schedules' }).click();
  await expect(page).toHaveURL(/\/schedules$/);
  await expect(page.getByRole('heading', { name: 'Schedules' })).toBeVisible();
  const row = page.getByTestId('schedule-row');
  await expect(row).toHaveCount(1);
  await expect(row.getByTestId('schedule-name')).toHaveText('Morning report');
  await expect(row.getByTestId('schedule-agent')).toHaveText('Scheduled agent');
  await expect(row.getByTestId('schedule-timezone')).toHaveText('Asia/Tokyo');
  await expect(row.getByTestId('schedule-session')).toHaveText('new session');
  await expect(row.getByTestId('next-fire-viewer')).toHaveText(/^\w{3} \d{1,2}, \d{4}, \d\d:\d\d(:\d\d)? E[SD]T$/);
  await expect(row.getByTestId('next-fire-local')).toHaveText(/^\w{3} \d{1,2}, \d{4}, \d\d:\d\d(:\d\d)? GMT\+9 in Asia\/Tokyo$/);
  // The two say one moment: Tokyo is 13 or 14 hours ahead of New York.
  const [mine, theirs] = [await row.getByTestId('next-fire-viewer').textContent(), await row.getByTestId('next-fire-local').textContent()];
  const hour = (s: string | null) => Number(/, (\d\d):/.exec(s ?? '')![1]);
  expect([13, 14]).toContain((hour(theirs) - hour(mine) + 24) % 24);
  await noSidewaysScroll(page, 1280);
  await shot(page, 'schedules');

  // Its history: a fire that started a new session, linked.
  await row.getByRole('button', { name: 'History' }).click();
  const history = page.getByRole('dialog', { name: /History of Morning report/ });
  const started = history.getByTestId('schedule-fire').filter({ has: page.getByTestId('fire-status').getByText('started', { exact: true }) }).first();
  await expect(started).toBeVisible({ timeout: 60_000 });
  const sessionLink = started.getByTestId('fire-session');
  await expect(sessionLink).toHaveText(/^[0-9a-f]{8}$/);
  await page.keyboard.press('Escape');
  await expect(history).toHaveCount(0);

  // Paused: no next fire, and no fire after the pause.
  await row.getByRole('button', { name: 'Pause' }).click();
  await expect(row.getByTestId('schedule-paused')).toHaveText('paused');
  await expect(row.getByRole('button', { name: 'Resume' })).toBeVisible();
  const paused = await api('GET', `/api/agents/${AGENT}/schedules/${made.id}`);
  expect(paused).toMatchObject({ paused: true, next_fire_at: null });

  // The history again, for the picture: the fires the second-by-second schedule made.
  await row.getByRole('button', { name: 'History' }).click();
  await expect(started).toBeVisible();
  await shot(page, 'schedule-fires');
  const fires = (await api('GET', `/api/agents/${AGENT}/schedules/${made.id}/fires?limit=100&offset=0`)) as { status: string; session_id: string | null }[];
  // The link opens the session the fire made: the agent's, with the schedule's budget.
  const linked = (await sessionLink.getAttribute('href'))!;
  const sessionId = linked.split('/').pop()!;
  expect(fires.filter((f) => f.status === 'started').map((f) => f.session_id)).toContain(sessionId);
  await sessionLink.click();
  await expect(page).toHaveURL(new RegExp(`/sessions/${sessionId}$`));
  const session = await api('GET', `/api/sessions/${sessionId}`);
  expect(session).toMatchObject({ agent_id: made.agent_id, budget: { max_turns: 5 } });

  // The edit form refuses a bad expression on its field too, and changes nothing.
  await page.goto(`${UI()}/schedules`);
  await row.getByRole('button', { name: 'Edit' }).click();
  const edit = page.getByRole('dialog', { name: /Edit schedule/ });
  await expect(edit.getByTestId('schedule-session')).toBeDisabled();
  await edit.getByTestId('schedule-cron').fill('61 * * * *');
  await edit.getByRole('button', { name: 'Save' }).click();
  await expectCronRefused(page);
  expect((await api('GET', `/api/agents/${AGENT}/schedules/${made.id}`)).cron).toBe('* * * * * *');
  await edit.getByRole('button', { name: 'Cancel' }).click();
  await expect(edit).toHaveCount(0);

  // A phone-width screen: the table scrolls in its card, not the page.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${UI()}/schedules`);
  await expect(row.getByTestId('schedule-paused')).toBeVisible();
  await noSidewaysScroll(page, 390);
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(`${UI()}/schedules`);

  // Deleted, once confirmed.
  await row.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await expect(row).toHaveCount(0);
  await expect(page.getByText('No schedules yet')).toBeVisible();
  expect(await api('GET', `/api/agents/${AGENT}/schedules`)).toEqual([]);
});
