// Secret bindings the sandbox never holds (issue 36), end to end in the agent editor: a
// header the egress proxy injects and a placeholder it swaps, the server's 422 beside a header
// it refuses, then the agent as saved, on its page and in the form after a reload. Saving
// needs no egress proxy (it matters when a sandbox boots), so the shared server does.
// In a project of its own: ui.spec.ts counts the default project's agents.
import { expect, test } from '@playwright/test';
import { tail } from './harness';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'bindings-e2e';
const H = { 'Content-Type': 'application/json', 'X-Project': PROJECT };

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Bindings e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
  const s = await fetch(`${API()}/api/secrets`, { method: 'POST', headers: H, body: JSON.stringify({ name: 'GH_TOKEN', value: 'ghp_not_a_real_token' }) });
  expect([201, 409], await s.clone().text()).toContain(s.status);
});

test.afterAll(async () => {
  await fetch(`${API()}/api/agents/bound-agent`, { method: 'DELETE', headers: H });
  await fetch(`${API()}/api/secrets/GH_TOKEN`, { method: 'DELETE', headers: H });
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

test('an agent with an inject and a placeholder binding is saved, shown and edited as built', async ({ page }) => {
  await page.goto(`${UI()}/agents/new`);
  await page.getByLabel('Slug').fill('bound-agent');
  await page.getByLabel('Name', { exact: false }).first().fill('Bound agent');

  await page.getByRole('tab', { name: 'Secrets' }).click();
  await page.getByRole('button', { name: 'Bind a secret' }).click();
  await page.getByRole('button', { name: 'Bind a secret' }).click();
  const rows = page.getByTestId('secret-binding');
  await expect(rows).toHaveCount(2);

  // A header the proxy injects; Proxy-Authorization is a header name, but one the server refuses.
  const inject = rows.nth(0);
  await inject.getByRole('textbox', { name: 'Secret' }).fill('GH_TOKEN');
  await page.keyboard.press('Escape');
  await inject.getByText('Header (inject)').click();
  await expect(inject.getByText(/the secret never enters the sandbox/)).toBeVisible();
  await inject.getByRole('textbox', { name: 'Host', exact: true }).fill('api.github.com');
  await inject.getByRole('textbox', { name: 'Header', exact: true }).fill('Proxy-Authorization');
  await inject.getByRole('textbox', { name: 'Format', exact: true }).fill('Bearer {value}');

  // A placeholder swapped on two hosts.
  const placeholder = rows.nth(1);
  await placeholder.getByRole('textbox', { name: 'Secret' }).fill('GH_TOKEN');
  await page.keyboard.press('Escape');
  await placeholder.getByText('Placeholder', { exact: true }).click();
  await placeholder.getByRole('textbox', { name: 'Variable', exact: true }).fill('GITHUB_TOKEN');
  await placeholder.getByRole('textbox', { name: 'Hosts', exact: true }).fill('api.github.com, uploads.github.com');

  await page.getByRole('button', { name: 'Create agent' }).click();
  // The 422 stands beside the header it names, and goes once the header is changed.
  await expect(inject.getByText(/hop-by-hop header/)).toBeVisible();
  await expect(page).toHaveURL(/\/agents\/new$/);
  await shot(page, 'agent-secret-bindings-422');
  await inject.getByRole('textbox', { name: 'Header', exact: true }).fill('Authorization');
  await expect(inject.getByText(/hop-by-hop header/)).toHaveCount(0);
  await shot(page, 'agent-secret-bindings');

  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(/\/agents\/bound-agent$/);
  const r = await fetch(`${API()}/api/agents/bound-agent`, { headers: H });
  expect(r.ok).toBeTruthy();
  expect((await r.json()).secret_bindings).toEqual([
    { secret: 'GH_TOKEN', env: '', inject: { host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' } },
    { secret: 'GH_TOKEN', env: 'GITHUB_TOKEN', placeholder: { env: 'GITHUB_TOKEN', hosts: ['api.github.com', 'uploads.github.com'] } },
  ]);

  // After a reload the agent's page says where each binding puts the secret.
  await page.reload();
  const shown = page.getByTestId('secret-binding-shown');
  await expect(shown).toHaveCount(2);
  await expect(shown.nth(0)).toContainText('GH_TOKEN → header Authorization: Bearer {value} on api.github.com');
  await expect(shown.nth(1)).toContainText('GITHUB_TOKEN ← placeholder for GH_TOKEN, swapped on api.github.com, uploads.github.com');

  // The form opens with each row's kind and fields.
  await page.goto(`${UI()}/agents/bound-agent/edit`);
  await page.getByRole('tab', { name: 'Secrets' }).click();
  await expect(rows).toHaveCount(2);
  await expect(rows.nth(0).getByRole('textbox', { name: 'Header', exact: true })).toHaveValue('Authorization');
  await expect(rows.nth(0).getByRole('textbox', { name: 'Format', exact: true })).toHaveValue('Bearer {value}');
  await expect(rows.nth(1).getByRole('textbox', { name: 'Variable', exact: true })).toHaveValue('GITHUB_TOKEN');
  await expect(rows.nth(1).getByRole('textbox', { name: 'Hosts', exact: true })).toHaveValue('api.github.com, uploads.github.com');
});
