// Agent versions, end to end: an agent whose instructions are edited twice in the UI has three
// versions on its History tab (who made each, the field it changed, the current one marked);
// v1 and v3 compared show the old and the new instructions; v1 restored is v4 "restored from
// v1" with the first instructions back; a session started pinned to v2 says "agent v2", links
// to that version in the history, and is then moved (Details) to follow the latest. Then the
// refusals: a restore from a page another edit made stale (409) and one whose subagent is gone
// (422), each said in words and changing nothing.
// In a project of its own: ui.spec.ts counts the default project's agents.
import { expect, test } from '@playwright/test';
import { tail } from './harness';
import { noSidewaysScroll } from './layout';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'versions-e2e';
const AGENT = 'versioned';
const FIRST = 'First instructions: answer tersely.';
const SECOND = 'Second instructions: answer thoroughly.';
const THIRD = 'Third instructions: answer kindly.';

async function api(method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = { 'X-Project': PROJECT };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${API()}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  expect(r.ok, `${method} ${path}: ${r.status} ${text}`).toBeTruthy();
  return text ? JSON.parse(text) : null;
}

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Versions e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
});

test.afterAll(async () => {
  const headers = { 'X-Project': PROJECT };
  const sessions = (await (await fetch(`${API()}/api/sessions?limit=100&offset=0`, { headers })).json()) as { id: string }[];
  for (const s of sessions) await fetch(`${API()}/api/sessions/${s.id}`, { method: 'DELETE', headers });
  for (const slug of [AGENT, 'boss']) await fetch(`${API()}/api/agents/${slug}`, { method: 'DELETE', headers });
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

test('every edit is a version: listed, compared, restored, and a session pinned to one', async ({ page }) => {
  test.setTimeout(180_000);
  // (Its subagent step limit set as the form sends it: the form sends the limit it shows, 10,
  // and the server counts a limit left to its default then set to 10 as a change.)
  await api('POST', '/api/agents', { slug: AGENT, name: 'Versioned', model: 'fake-model', instructions: FIRST, subagent_max_steps: 10 });

  // Two edits of the instructions in the form: versions 2 and 3.
  for (const [text, version] of [
    [SECOND, 2],
    [THIRD, 3],
  ] as const) {
    await page.goto(`${UI()}/agents/${AGENT}/edit`);
    await page.getByRole('tab', { name: 'Instructions' }).click();
    const editor = page.getByRole('textbox', { name: 'Instructions' });
    await expect(editor).toContainText(version === 2 ? FIRST : SECOND);
    await editor.fill(text);
    await page.getByRole('button', { name: 'Save' }).click();
    await expect(page).toHaveURL(new RegExp(`/agents/${AGENT}$`));
    await expect(page.getByTestId('agent-version-link')).toHaveText(`version ${version}`);
  }

  // The History tab: three versions, newest first, each with who made it and what it changed.
  await page.getByRole('tab', { name: 'History' }).click();
  await expect(page).toHaveURL(/\?tab=history$/);
  const rows = page.getByTestId('agent-version');
  await expect(rows.getByTestId('version-number')).toHaveText(['v3', 'v2', 'v1']);
  await expect(rows.nth(0).getByTestId('version-current')).toHaveText('current');
  await expect(page.getByTestId('version-current')).toHaveCount(1);
  await expect(rows.nth(0).getByTestId('version-changed-field')).toHaveText(['instructions']);
  await expect(rows.nth(1).getByTestId('version-changed-field')).toHaveText(['instructions']);
  await expect(rows.nth(2).getByTestId('version-changes')).toHaveText('created');
  // The shared server runs without sign-in: every version was made in open mode.
  for (let i = 0; i < 3; i++) await expect(rows.nth(i).getByTestId('version-by')).toHaveText('open mode');
  // The current version has nothing to restore; the older ones do.
  await expect(rows.nth(0).getByRole('button', { name: 'Restore' })).toHaveCount(0);
  await expect(rows.nth(2).getByRole('button', { name: 'Restore' })).toBeVisible();
  const compare = page.getByTestId('version-compare');
  await expect(compare.getByTestId('compare-summary')).toContainText('v2 → v3: differ in instructions');
  // (The save's notice gone first, for the picture.)
  await expect(page.getByText(`Saved ${AGENT} (version 3)`)).toHaveCount(0, { timeout: 15_000 });
  await shot(page, 'agent-versions-history');

  // v1 against v3: the old instructions on the left, the new on the right, their lines marked.
  await rows.nth(2).getByRole('button', { name: 'Compare with current' }).click();
  await expect(compare.getByTestId('compare-summary')).toContainText('v1 → v3: differ in instructions');
  const diff = compare.getByTestId('version-diff');
  await expect(diff.locator('.cm-merge-a .cm-changedLine')).toContainText([`"instructions": "${FIRST}"`]);
  await expect(diff.locator('.cm-merge-b .cm-changedLine')).toContainText([`"instructions": "${THIRD}"`]);
  // Only the instructions differ: nothing else is marked.
  await expect(diff.locator('.cm-merge-a .cm-changedLine')).toHaveCount(1);
  // The instructions alone, unified: the old line deleted, the new inserted.
  await compare.getByText('Instructions', { exact: true }).click();
  await compare.getByText('Unified', { exact: true }).click();
  await expect(diff.getByTestId('diff-view')).toHaveAttribute('data-mode', 'unified');
  await expect(diff.locator('.cm-deletedChunk')).toContainText(FIRST);
  await expect(diff.locator('.cm-insertedLine')).toContainText(THIRD);
  await compare.getByText('Definition', { exact: true }).click();
  await compare.getByText('Side by side', { exact: true }).click();
  await expect(diff.locator('.cm-merge-b .cm-changedLine')).toContainText([THIRD]);
  await compare.evaluate((e) => e.scrollIntoView({ block: 'start' }));
  await shot(page, 'agent-versions-diff');

  // Restore v1: asked first, then v4, restored from v1, with the first instructions back.
  await rows.nth(2).getByRole('button', { name: 'Restore' }).click();
  await expect(page.getByText("Make v1's definition the agent's again? It becomes v4")).toBeVisible();
  await page.getByRole('button', { name: 'Restore v1' }).click();
  await expect(rows.getByTestId('version-number')).toHaveText(['v4', 'v3', 'v2', 'v1']);
  await expect(rows.nth(0).getByTestId('version-restored-from')).toHaveText('restored from v1');
  await expect(rows.nth(0).getByTestId('version-current')).toBeVisible();
  await expect(rows.nth(0).getByTestId('version-changed-field')).toHaveText(['instructions']);
  await expect(page.getByTestId('version-current')).toHaveCount(1);
  await expect(page.getByTestId('agent-version-link')).toHaveText('version 4');
  // What the restore changed: v3 against the new v4.
  await expect(compare.getByTestId('compare-summary')).toContainText('v3 → v4: differ in instructions');
  await expect(diff.locator('.cm-merge-b .cm-changedLine')).toContainText([FIRST]);
  await expect(page.getByTestId('restore-error')).toHaveCount(0);
  const restored = await api('GET', `/api/agents/${AGENT}`);
  expect(restored.version).toBe(4);
  expect(restored.instructions).toBe(FIRST);
  const history = await api('GET', `/api/agents/${AGENT}/versions`);
  expect(history.map((v: { version: number; restored_from: number | null }) => [v.version, v.restored_from])).toEqual([
    [4, 1],
    [3, null],
    [2, null],
    [1, null],
  ]);
  await page.getByRole('tab', { name: 'Overview' }).click();
  await expect(page.getByText(FIRST, { exact: true })).toBeVisible();

  // A phone-width screen: the history (its table scrolls in its card) and the diff fit.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${UI()}/agents/${AGENT}?tab=history`);
  await expect(rows).toHaveCount(4);
  await expect(compare.getByTestId('diff-view')).toHaveAttribute('data-mode', 'unified');
  await expect(diff.locator('.cm-insertedLine')).toContainText([FIRST]);
  await noSidewaysScroll(page, 390);
  await page.setViewportSize({ width: 1280, height: 800 });

  // A session pinned to v2, picked in the dialog from the versions.
  await page.goto(`${UI()}/agents/${AGENT}`);
  await page.getByRole('button', { name: 'Start a session' }).click();
  const dialog = page.getByRole('dialog');
  const pick = dialog.getByRole('textbox', { name: 'Agent version' });
  await expect(pick).toHaveValue('Current: v4 (pinned)');
  await pick.click();
  await expect(page.getByRole('option')).toHaveText(['Current: v4 (pinned)', 'Latest (follows every edit)', 'v3 (instructions)', 'v2 (instructions)', 'v1 (created)']);
  await page.getByRole('option', { name: 'v2 (instructions)' }).click();
  await expect(pick).toHaveValue('v2 (instructions)');
  await dialog.getByLabel('Title').fill('Pinned to v2');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const id = page.url().split('/').pop()!;
  const session = await api('GET', `/api/sessions/${id}`);
  expect(session.agent_version).toBe(2);
  // Its detail shows the agent as the session runs it: v2, with the second instructions.
  expect([session.agent.version, session.agent.instructions]).toEqual([2, SECOND]);
  const pinned = page.getByTestId('session-agent-version');
  await expect(pinned).toHaveText('agent v2');
  await expect(pinned).toHaveAttribute('href', `/agents/${AGENT}?tab=history&version=2`);
  await expect(page.getByTestId('session-agent-version-now')).toHaveText('(the agent is at v4 now)');
  // The link opens the history at v2, compared with the current version.
  await pinned.click();
  await expect(page).toHaveURL(new RegExp(`/agents/${AGENT}\\?tab=history&version=2$`));
  await expect(page.locator('[data-testid="agent-version"][data-focused]').getByTestId('version-number')).toHaveText('v2');
  await expect(compare.getByTestId('compare-summary')).toContainText('v2 → v4: differ in instructions');

  // Moved on from its page (Details): it follows the latest from its next turn, and says so.
  await page.goto(`${UI()}/sessions/${id}`);
  await expect(pinned).toHaveText('agent v2');
  await page.getByRole('button', { name: 'Details', exact: true }).click();
  const details = page.getByRole('dialog', { name: 'Session details' });
  const moveTo = details.getByRole('textbox', { name: 'Agent version' });
  await expect(moveTo).toHaveValue('v2 (instructions)');
  await moveTo.click();
  await page.getByRole('option', { name: 'Latest (follows every edit)' }).click();
  await details.getByRole('button', { name: 'Save' }).click();
  await expect(details).toHaveCount(0);
  await expect(pinned).toHaveText('agent latest');
  await expect(pinned).toHaveAttribute('href', `/agents/${AGENT}?tab=history`);
  await expect(page.getByTestId('session-agent-version-now')).toHaveCount(0);
  const moved = await api('GET', `/api/sessions/${id}`);
  expect([moved.agent_version, moved.agent.version, moved.agent.instructions]).toEqual(['latest', 4, FIRST]);
});

test('a restore refused is said: a stale page (409), a subagent gone (422); nothing changes', async ({ page }) => {
  // A version that names a subagent, then one without it, then the subagent deleted.
  await api('POST', '/api/agents', { slug: 'helper', name: 'Helper', model: 'fake-model' });
  await api('POST', '/api/agents', { slug: 'boss', name: 'Boss', model: 'fake-model', subagents: [{ agent: 'helper' }] });
  await api('PATCH', '/api/agents/boss', { version: 1, subagents: [] });
  await api('DELETE', '/api/agents/helper');

  await page.goto(`${UI()}/agents/boss?tab=history`);
  const rows = page.getByTestId('agent-version');
  await expect(rows.getByTestId('version-number')).toHaveText(['v2', 'v1']);
  await expect(rows.nth(0).getByTestId('version-changed-field')).toHaveText(['subagents']);

  // v1 names the deleted helper: a 422, said with its field.
  await rows.nth(1).getByRole('button', { name: 'Restore' }).click();
  await page.getByRole('button', { name: 'Restore v1' }).click();
  const refused = page.getByTestId('restore-error');
  await expect(refused).toContainText('Not restored: v1 is not valid now');
  await expect(refused).toContainText("subagents.0.agent: there is no agent 'helper' in this project");
  await expect(rows).toHaveCount(2);

  // Someone else edits it meanwhile: this page's v2 is stale, a 409; the list catches up.
  await api('PATCH', '/api/agents/boss', { version: 2, description: 'Edited by a script.' });
  await rows.nth(1).getByRole('button', { name: 'Restore' }).click();
  await page.getByRole('button', { name: 'Restore v1' }).click();
  await expect(refused).toContainText('Not restored: the agent changed meanwhile');
  await expect(refused).toContainText('version 2 is stale; current is 3');
  await expect(rows.getByTestId('version-number')).toHaveText(['v3', 'v2', 'v1']);
  await expect(rows.nth(0).getByTestId('version-changed-field')).toHaveText(['description']);
  await expect(page.getByTestId('agent-version-link')).toHaveText('version 3');
  const boss = await api('GET', '/api/agents/boss');
  expect(boss.version).toBe(3);
  expect(boss.subagents).toEqual([]);
});
