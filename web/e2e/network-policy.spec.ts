// Network policies in the UI, end to end (issue 36): an agent's allowlist with a preset set in
// its form and read back after a reload, a bad entry refused by the server with its message
// beside that entry, and a session's own policy changed from its Network tab (PATCH, no
// restart), as the API then has it. In a project of its own: ui.spec.ts counts the default
// project's agents.
import { expect, test } from '@playwright/test';
import { tail } from './harness';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'network-e2e';
const AGENT = 'net-agent';

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = { 'X-Project': PROJECT, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
  const r = await fetch(`${API()}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

let sessionId: string | null = null;

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Network e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
});

test.afterAll(async () => {
  const headers = { 'X-Project': PROJECT };
  if (sessionId) await fetch(`${API()}/api/sessions/${sessionId}`, { method: 'DELETE', headers });
  await fetch(`${API()}/api/agents/${AGENT}`, { method: 'DELETE', headers });
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

test('an agent’s allowlist is saved as set, a bad entry is refused beside it, and a session narrows it', async ({ page }) => {
  await page.goto(`${UI()}/agents/new`);
  await page.getByLabel('Slug').fill(AGENT);
  await page.getByLabel('Name', { exact: false }).first().fill('Network agent');

  // An allowlist: one entry with a port, and the pypi preset.
  await page.getByRole('tab', { name: 'Network' }).click();
  const policy = page.getByTestId('network-policy');
  await policy.getByTestId('network-egress').getByText('allowlist', { exact: true }).click();
  await expect(policy.getByTestId('network-note')).toContainText('An empty allowlist allows nothing');
  await policy.getByRole('button', { name: 'Add entry' }).click();
  await policy.getByLabel('Allowed entry 1').fill('github.com:443');
  await policy.getByTestId('network-presets').getByText('pypi', { exact: true }).click();
  await expect(policy.getByTestId('network-note')).toHaveCount(0);
  await shot(page, 'agent-network');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${AGENT}$`));

  // After a reload the agent's page and its form show the policy as it was set.
  await page.reload();
  await expect(page.getByTestId('agent-network')).toHaveText('allowlist: pypi preset, github.com:443');
  const stored = await api('GET', `/api/agents/${AGENT}`);
  expect(stored.network).toEqual({ egress: 'allowlist', allow: ['github.com:443'], presets: ['pypi'] });
  await page.goto(`${UI()}/agents/${AGENT}/edit`);
  await page.getByRole('tab', { name: 'Network' }).click();
  await expect(policy.getByLabel('Allowed entry 1')).toHaveValue('github.com:443');
  await expect(policy.getByTestId('network-presets').getByRole('checkbox', { name: /^pypi/ })).toBeChecked();

  // A bad entry: the server's 422 names it, and its message stands beside that entry.
  await policy.getByRole('button', { name: 'Add entry' }).click();
  await policy.getByLabel('Allowed entry 2').fill('*.com');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await expect(page.getByRole('alert').filter({ hasText: 'The server refused the agent' })).toBeVisible();
  const bad = policy.getByTestId('network-entry').nth(1);
  await expect(bad.getByTestId('network-entry-error')).toContainText("'*.com' is not an entry");
  await expect(policy.getByTestId('network-entry').nth(0).getByTestId('network-entry-error')).toHaveCount(0);
  await shot(page, 'agent-network-refused');
  expect((await api('GET', `/api/agents/${AGENT}`)).network.allow).toEqual(['github.com:443']);

  // A session of the agent narrows it to no network at all, from its Network tab.
  const created = (await api('POST', '/api/sessions', { agent_id: AGENT, title: 'Network e2e' })) as { id: string };
  sessionId = created.id;
  await page.goto(`${UI()}/sessions/${sessionId}/network`);
  const layers = page.getByTestId('network-layer');
  await expect(layers.first()).toContainText('agent');
  await expect(layers.first()).toContainText('github.com:443');
  // This server runs no egress proxy: the log says so rather than that nothing was sent.
  await expect(page.getByTestId('egress-log')).toContainText('Egress control is off on this server');
  await page.getByRole('button', { name: 'Give it a policy of its own' }).click();
  await expect(policy.getByLabel('Allowed entry 1')).toHaveValue('github.com:443');
  await policy.getByTestId('network-egress').getByText('none', { exact: true }).click();
  await page.getByRole('button', { name: 'Save policy' }).click();
  await expect(page.getByTestId('network-layer').filter({ hasText: 'session' })).toContainText('none');
  await shot(page, 'session-network');
  const session = await api('GET', `/api/sessions/${sessionId}`);
  expect(session.network).toEqual({ egress: 'none', allow: [], presets: [] });
  expect(session.network_layers.map((l: { from: string }) => l.from)).toContain('session');

  // Read again after a reload; then removed, the agent's and the environment's still apply.
  await page.reload();
  await expect(policy.getByTestId('network-egress').getByRole('radio', { name: 'none' })).toBeChecked();
  await page.getByRole('button', { name: 'Remove its own policy' }).click();
  await page.getByRole('button', { name: 'Remove', exact: true }).click();
  await expect(page.getByTestId('network-own-none')).toBeVisible();
  expect((await api('GET', `/api/sessions/${sessionId}`)).network).toBeNull();
});
