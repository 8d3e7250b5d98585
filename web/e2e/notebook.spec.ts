// The python capability and a session's limits, end to end against the real server and the
// scripted fake model: an agent given `python` in the form boots in the project's built-in
// `analysis` environment (its image builds the first time, 1–3 minutes), the model runs cells,
// the transcript shows their code and output, the Notebook tab shows the cells (a kernel
// restart too) and downloads them as .ipynb. Then a session started with a lifetime and
// resources, shown on its page until its lifetime ends it for good; and one stopped by its own
// disk limit.
//
// In a project of its own, deleted at the end: the story in ui.spec.ts counts the default
// project's sessions and environments.
import { expect, test } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { setScript, tail } from './harness';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'python-e2e';

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = { 'X-Project': PROJECT };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return fetch(`${API()}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}
async function apiGet(p: string) {
  const r = await api('GET', p);
  expect(r.ok, `${p}: ${r.status}`).toBeTruthy();
  return r.json();
}

// A cell with every kind of output: stdout, stderr, a figure and a result.
const SQUARES = [
  'import sys, numpy as np, matplotlib.pyplot as plt',
  'xs = np.arange(10)',
  'print("sum of squares:", int((xs ** 2).sum()))',
  'print("plotting to the inline backend", file=sys.stderr)',
  'plt.figure(figsize=(4, 2)); plt.plot(xs, xs ** 2, marker="o"); plt.title("squares"); plt.show()',
  'xs.mean()',
].join('\n');

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Python e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
  await setScript(process.env.E2E_FAKE_MODEL_URL!, [
    { when: { last_message_role: 'tool', last_tool_result_contains: 'NameError' }, reply: { text: 'xs is gone: the kernel restarted.' } },
    { when: { last_message_role: 'tool', last_tool_result_contains: 'sum of squares: 285' }, reply: { text: 'The squares add up to 285.' } },
    { when: { has_tool: 'python', last_message_role: 'user', last_user_contains: 'squares' }, reply: { tool_calls: [{ name: 'python', arguments: { code: SQUARES } }] } },
    { when: { has_tool: 'python', last_message_role: 'user', last_user_contains: 'again' }, reply: { tool_calls: [{ name: 'python', arguments: { code: 'print(xs.sum())', timeout: 30 } }] } },
    { reply: { text: 'Hello from the fake model.' } },
  ]);
});

// ui.spec.ts calls the API without X-Project, which the server only accepts while there is one
// project: the project goes again, with whatever a failed test left in it.
test.afterAll(async () => {
  const left = await api('GET', '/api/sessions?limit=100&offset=0');
  for (const s of left.ok ? ((await left.json()) as { id: string }[]) : []) await api('DELETE', `/api/sessions/${s.id}`);
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

test('a python agent: its cells in the transcript and the Notebook tab, a kernel restart, the .ipynb download', async ({ page }) => {
  test.setTimeout(10 * 60_000);
  // The capability, picked in the form with its explanation.
  await page.goto(`${UI()}/agents/new`);
  await expect(page.getByTestId('project-switcher')).toHaveValue('Python e2e');
  await page.getByLabel('Slug').fill('e2e-pythonist');
  await page.getByLabel('Name', { exact: false }).first().fill('E2E pythonist');
  await page.getByLabel('Default capabilities (shell, filesystem and compaction)').uncheck();
  // The picker's box lies over its input (the chosen pills are in it): click through to it.
  await page.getByRole('textbox', { name: 'Capabilities' }).click({ force: true });
  await page.getByRole('option', { name: /^python/ }).click();
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('python-capability-note')).toContainText('built-in analysis environment');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(/\/agents\/e2e-pythonist$/);
  expect((await apiGet('/api/agents/e2e-pythonist')).capabilities).toEqual(['shell', 'filesystem', 'python']);

  // Its session waits for the analysis environment's image, then runs.
  await page.getByRole('button', { name: 'Start a session' }).click();
  await page.getByRole('dialog').getByLabel('Title').fill('Squares');
  await page.getByRole('dialog').getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const id = page.url().split('/sessions/')[1];
  await expect(page.getByRole('tab', { name: 'Notebook' })).toBeVisible();
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 6 * 60_000 });
  const envs: { name: string }[] = await apiGet('/api/environments');
  expect(envs.map((e) => e.name)).toContain('analysis');

  // Before any cell, the tab says where cells come from.
  await page.getByRole('tab', { name: 'Notebook' }).click();
  await expect(page).toHaveURL(new RegExp(`/sessions/${id}/notebook$`));
  await expect(page.getByText('No Python cells yet: an agent with the python capability writes them')).toBeVisible();

  // The transcript shows the call's code as code, and its output.
  await page.getByRole('tab', { name: 'Transcript' }).click();
  await page.getByTestId('composer').fill('Please analyse the squares');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('The squares add up to 285.', { timeout: 120_000 });
  const call = page.locator('[data-testid="tool-call"][data-tool="python"]').first();
  await expect(call).toContainText('done');
  await call.getByRole('button').first().click();
  await expect(call.getByTestId('python-code')).toContainText('print("sum of squares:", int((xs ** 2).sum()))');
  await expect(call).toContainText('sum of squares: 285');

  // The Notebook tab: the cell, its outputs in order and its status.
  await page.getByRole('tab', { name: 'Notebook' }).click();
  const cells = page.getByTestId('notebook-cell');
  await expect(cells).toHaveCount(1);
  await expect(cells.nth(0)).toHaveAttribute('data-status', 'ok');
  await expect(cells.nth(0).getByTestId('cell-status')).toHaveText('ok');
  await expect(cells.nth(0).getByTestId('cell-source')).toContainText('xs = np.arange(10)');
  await expect(cells.nth(0).getByTestId('cell-stdout')).toHaveText('sum of squares: 285\n');
  await expect(cells.nth(0).getByTestId('cell-stderr')).toContainText('plotting to the inline backend');
  await expect(cells.nth(0).getByTestId('cell-result')).toContainText('4.5');
  const image = cells.nth(0).getByTestId('cell-image');
  await expect(image).toHaveAttribute('src', /^data:image\/png;base64,/);
  expect(await image.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0)).toBe(true);
  await expect(page.getByTestId('kernel-restart')).toHaveCount(0);

  // A stop and a start give a new kernel: the tab says the earlier state was lost, and the
  // cell that needed it fails. The open tab refreshes from the event stream.
  await page.getByRole('button', { name: 'Stop', exact: true }).click();
  await expect(page.getByTestId('session-status').first()).toHaveText('stopped', { timeout: 60_000 });
  await page.getByRole('button', { name: 'Start', exact: true }).click();
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 120_000 });
  await page.getByRole('tab', { name: 'Transcript' }).click();
  await page.getByTestId('composer').fill('Sum xs again');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByRole('tab', { name: 'Notebook' }).click();
  await expect(cells).toHaveCount(2, { timeout: 60_000 });
  await expect(cells.nth(1)).toHaveAttribute('data-status', 'error');
  await expect(cells.nth(1).getByTestId('cell-status')).toHaveText('error');
  await expect(cells.nth(1).getByTestId('cell-error')).toContainText("NameError: name 'xs' is not defined");
  expect(await cells.nth(1).getByTestId('cell-error').textContent()).not.toContain('\u001b');
  await expect(page.getByTestId('kernel-restart')).toHaveText('kernel restarted — earlier state was lost');
  expect(await page.getByTestId('kernel-restart').evaluate((d) => d.previousElementSibling?.getAttribute('data-status'))).toBe('ok');
  await expect(page.getByTestId('notebook-summary')).toContainText('2 cells');
  // For the picture: the tabs at the top (under the app's header), then the notebook.
  await page.getByRole('tablist').evaluate((el) => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 64));
  await shot(page, 'notebook');

  // The .ipynb: the same notebook, named for the session.
  const download = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Download .ipynb' }).click();
  const file = await download;
  expect(file.suggestedFilename()).toBe(`${id}.ipynb`);
  const ipynb = JSON.parse(readFileSync((await file.path())!, 'utf8'));
  expect(ipynb).toEqual(await apiGet(`/api/sessions/${id}/notebook`));
  expect([ipynb.nbformat, ipynb.nbformat_minor]).toEqual([4, 5]);
  expect(ipynb.cells.map((c: { metadata: { sandbox_agents: { status: string } } }) => c.metadata.sandbox_agents.status)).toEqual(['ok', 'error']);

  // On a phone: nothing overflows sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${UI()}/sessions/${id}/notebook`);
  await expect(cells).toHaveCount(2);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  // For the picture: the restart in the middle, the failing cell's traceback below it.
  await page.getByTestId('kernel-restart').evaluate((el) => el.scrollIntoView({ block: 'center' }));
  await shot(page, 'notebook-phone');
  await page.setViewportSize({ width: 1280, height: 800 });

  expect((await api('DELETE', `/api/sessions/${id}`)).ok).toBeTruthy();
});

// The e2e server has no server-wide disk limit and checks every 2 seconds (harness.ts): the
// session's own limit is what stops it.
test('a session over its own disk limit is stopped, its workspace kept, and its page says whose limit', async ({ page }) => {
  test.setTimeout(3 * 60_000);
  const r = await api('POST', '/api/agents', { slug: 'e2e-disk', name: 'E2E disk' });
  expect(r.status, await r.clone().text()).toBe(201);
  const created = await api('POST', '/api/sessions', { agent_id: 'e2e-disk', title: 'Small disk', resources: { disk_mb: 16 } });
  expect(created.status, await created.clone().text()).toBe(202);
  const id = ((await created.json()) as { id: string }).id;
  await expect.poll(async () => (await apiGet(`/api/sessions/${id}`)).status, { timeout: 90_000 }).toBe('running');
  await page.goto(`${UI()}/sessions/${id}`);
  await expect(page.getByTestId('session-resources')).toHaveText('16 MiB disk');
  const noted = await api('POST', `/api/sessions/${id}/exec`, { command: 'echo kept > note.txt' });
  expect(noted.ok, await noted.clone().text()).toBeTruthy();
  // 32 MiB: the check may stop the sandbox while this still runs, so its answer is not read.
  await api('POST', `/api/sessions/${id}/exec`, { command: 'head -c 33554432 /dev/zero > /tmp/big.bin' });
  await expect(page.getByTestId('disk-limit')).toContainText('Its own limit is 16 MiB', { timeout: 60_000 });
  await expect(page.getByTestId('session-status').first()).toHaveText('stopped');
  expect((await apiGet(`/api/sessions/${id}`)).stopped_reason).toBe('disk');
  // Start brings the workspace back.
  await page.getByRole('button', { name: 'Start', exact: true }).click();
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 90_000 });
  const read = await api('POST', `/api/sessions/${id}/exec`, { command: 'cat note.txt' });
  expect(((await read.json()) as { stdout: string }).stdout).toBe('kept\n');
  expect((await api('DELETE', `/api/sessions/${id}`)).ok).toBeTruthy();
});

test('start a session with limits: checked in the form, shown on its page, and its lifetime ends it for good', async ({ page }) => {
  test.setTimeout(5 * 60_000);
  const r = await api('POST', '/api/agents', { slug: 'e2e-limited', name: 'E2E limited' });
  expect(r.status, await r.clone().text()).toBe(201);
  await page.goto(`${UI()}/agents/e2e-limited`);
  await page.getByRole('button', { name: 'Start a session' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Title').fill('Short-lived');
  await dialog.getByRole('button', { name: /Limits/ }).click();
  await dialog.getByRole('textbox', { name: 'Idle TTL (seconds)' }).fill('0');
  await dialog.getByRole('textbox', { name: 'Max lifetime (seconds)' }).fill('30');
  await dialog.getByRole('textbox', { name: 'CPUs' }).fill('64');
  await dialog.getByRole('textbox', { name: 'Memory (MiB)' }).fill('32');
  await dialog.getByRole('textbox', { name: 'Disk (MiB)' }).fill('2048');
  // Checked as the server checks, before anything is sent…
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(dialog.getByRole('textbox', { name: 'Memory (MiB)' })).toHaveAccessibleDescription(/Whole MiB, at least 64\./);
  // …and the server's own maximum lands on its field.
  await dialog.getByRole('textbox', { name: 'Memory (MiB)' }).fill('512');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(dialog.getByRole('textbox', { name: 'CPUs' })).toHaveAccessibleDescription(/cpus is more than 0 and at most \d+(\.\d+)? on this server/);
  await dialog.getByRole('textbox', { name: 'CPUs' }).fill('0.5');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const id = page.url().split('/sessions/')[1];
  const detail = await apiGet(`/api/sessions/${id}`);
  expect(detail).toMatchObject({ idle_ttl_seconds: 0, max_lifetime_seconds: 30, resources: { cpus: 0.5, memory_mb: 512, disk_mb: 2048 } });
  expect(Date.parse(detail.expires_at) - Date.parse(detail.created_at)).toBe(30_000);

  // Its page says them.
  await expect(page.getByTestId('session-resources')).toHaveText('0.5 CPUs · 512 MiB · 2 GiB disk');
  await expect(page.getByTestId('session-idle-ttl')).toHaveText('never released when idle');
  await expect(page.getByTestId('session-expires')).toContainText('stops for good');
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 90_000 });

  // Past its lifetime it is stopped for good: said, and Start is refused before it is sent.
  await expect(page.getByTestId('session-status').first()).toHaveText('ended', { timeout: 120_000 });
  await expect(page.getByTestId('lifetime-ended')).toContainText('Its lifetime ended; it cannot be started again');
  await expect(page.getByTestId('session-expires')).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Start', exact: true })).toBeDisabled();
  await expect(page.getByTestId('composer')).toBeDisabled();
  const after = await apiGet(`/api/sessions/${id}`);
  expect([after.status, after.stopped_reason]).toEqual(['stopped', 'lifetime']);
  expect((await api('POST', `/api/sessions/${id}/start`)).status).toBe(409);
  await shot(page, 'session-ended');
  expect((await api('DELETE', `/api/sessions/${id}`)).ok).toBeTruthy();
});
