// The agent form's structured editors, end to end: a manifest entry and a skills source made
// as rows of fields (a row added, edited, another removed), the JSON view in between (switched
// to and back, a broken edit there reported and not dropped), then the agent as the API has it;
// and the runtime class, which a server on Docker offers none of.
// In a project of its own: ui.spec.ts counts the default project's agents.
import { expect, test } from '@playwright/test';
import { tail } from './harness';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'editors-e2e';

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Editors e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
});

test.afterAll(async () => {
  await fetch(`${API()}/api/agents/rows-agent`, { method: 'DELETE', headers: { 'X-Project': PROJECT } });
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

test('an agent made with manifest rows and a skills source of fields is saved as built', async ({ page }) => {
  await page.goto(`${UI()}/agents/new`);
  await page.getByLabel('Slug').fill('rows-agent');
  await page.getByLabel('Name', { exact: false }).first().fill('Rows agent');

  await page.getByRole('tab', { name: 'Sandbox' }).click();
  // The test server runs on Docker, which offers no runtime class: the field says so and
  // cannot be changed (a Kubernetes server lists its classes there).
  await expect(page.getByRole('textbox', { name: 'Runtime class' })).toBeDisabled();
  await expect(page.getByText('This server offers no runtime class to choose')).toBeVisible();
  const entries = page.getByTestId('manifest-entries');
  await entries.getByRole('button', { name: 'Add entry' }).click();
  await entries.getByRole('button', { name: 'Add entry' }).click();
  const rows = entries.getByTestId('manifest-entry');
  await expect(rows).toHaveCount(2);
  // The first: a file.
  const first = rows.nth(0);
  await first.getByLabel('Path').fill('notes/hello.md');
  await first.getByRole('textbox', { name: 'Kind' }).click();
  await page.getByRole('option', { name: 'file', exact: true }).click();
  await first.getByLabel('Content').fill('# Hello\nfrom a row');
  // The second, a checkout, then thought better of.
  const second = rows.nth(1);
  await second.getByRole('textbox', { name: 'Kind' }).click();
  await page.getByRole('option', { name: 'git_repo', exact: true }).click();
  await second.getByLabel('Repository').fill('octo/unwanted');
  await second.getByRole('button', { name: /Remove entry/ }).click();
  await expect(rows).toHaveCount(1);
  await shot(page, 'agent-manifest-rows');

  // The JSON view shows the rows; a broken edit there is reported and keeps the view.
  await entries.getByText('JSON (advanced)').click();
  const editor = entries.getByRole('textbox', { name: 'Workspace entries' });
  await expect(editor).toContainText('"notes/hello.md"');
  await expect(editor).toContainText('"kind": "file"');
  await editor.click();
  await page.keyboard.press('ControlOrMeta+End');
  await page.keyboard.type(',');
  await entries.getByText('Form', { exact: true }).click();
  await expect(entries.getByTestId('entries-view-error')).toContainText('not valid JSON');
  await expect(editor).toContainText('}},');
  await editor.click();
  await page.keyboard.press('ControlOrMeta+End');
  await page.keyboard.press('Backspace');
  await expect(editor).not.toContainText('}},');
  await entries.getByText('Form', { exact: true }).click();
  await expect(entries.getByTestId('entries-view-error')).toHaveCount(0);
  await expect(rows).toHaveCount(1);
  await expect(rows.nth(0).getByLabel('Content')).toHaveValue('# Hello\nfrom a row');

  await page.getByRole('tab', { name: 'Subagents & skills' }).click();
  const skills = page.getByTestId('skills-source');
  await skills.getByRole('textbox', { name: 'Source' }).click();
  await page.getByRole('option', { name: 'git_repo', exact: true }).click();
  await skills.getByLabel('Repository').fill('octo/skills');
  await skills.getByLabel('Ref').fill('v1');
  await skills.getByLabel('Subpath').fill('skills');
  await shot(page, 'agent-skills-source');

  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(/\/agents\/rows-agent$/);
  // The detail page shows the subagent step limit, resolved to its default.
  await expect(page.getByText('10 (no subagents)')).toBeVisible();
  await expect(page.getByTestId('agent-runtime-class')).toHaveText(/^default/);
  const r = await fetch(`${API()}/api/agents/rows-agent`, { headers: { 'X-Project': PROJECT } });
  expect(r.ok).toBeTruthy();
  const agent = await r.json();
  expect(agent.manifest.entries).toEqual({ 'notes/hello.md': { kind: 'file', content: '# Hello\nfrom a row' } });
  expect(agent.skills_source).toMatchObject({ kind: 'git_repo', repo: 'octo/skills', ref: 'v1', subpath: 'skills' });

  // Opened again, the form shows them as rows and fields.
  await page.goto(`${UI()}/agents/rows-agent/edit`);
  await page.getByRole('tab', { name: 'Sandbox' }).click();
  await expect(page.getByTestId('manifest-entry')).toHaveCount(1);
  await expect(page.getByTestId('manifest-entry').getByLabel('Path')).toHaveValue('notes/hello.md');
  await page.getByRole('tab', { name: 'Subagents & skills' }).click();
  await expect(page.getByTestId('skills-source').getByLabel('Repository')).toHaveValue('octo/skills');
});
