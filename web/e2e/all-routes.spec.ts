// Every page of the UI, opened against the real server with data in it: each route the router
// has (src/routes.ts, the list App.tsx renders), with its `:params` filled from what the setup
// seeded through the API, in open mode and then signed in as a person. A page fails the sweep
// on any API answer of 400 or more and on any console error or uncaught exception. The one
// error a page may meet on a healthy server, the Models page's 502 without a LiteLLM proxy,
// has its own test below, on a server without one.
//
// The sweep runs on servers of its own (the harness's startServer), so its data and the
// deployment it closes do not change what the other specs see.
import { expect, test, type Page } from '@playwright/test';
import { ROUTES } from '../src/routes';
import { setScript, startFakeModel, startServer, startStaticProxy, startWebhookReceiver, stopServer, tail, type Server } from './harness';
import { tgz } from './tar';

test.describe.configure({ mode: 'serial' });

// The session page's tabs (`sessions/:id/:tab?`; TABS in SessionDetailPage.tsx).
const SESSION_TABS = ['transcript', 'notebook', 'files', 'terminal', 'processes', 'ports', 'network', 'snapshots', 'skills', 'events', 'usage'];
const ADA = { email: 'ada@example.com', name: 'Ada', password: 'correct horse battery' };

type Seeded = Record<string, string>;

let model: Awaited<ReturnType<typeof startFakeModel>>;
let server: Server;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let proxy: Awaited<ReturnType<typeof startStaticProxy>> | null = null;
let ui = '';
const params: Seeded = {};

let bearer: string | null = null;

async function call(method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = {};
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined && !(body instanceof FormData)) headers['Content-Type'] = 'application/json';
  const init: RequestInit = { method, headers, body: body instanceof FormData ? body : body === undefined ? undefined : JSON.stringify(body) };
  const r = await fetch(`${server.url}${path}`, init);
  const text = await r.text();
  expect(r.ok, `${method} ${path}: ${r.status} ${text}`).toBeTruthy();
  return text ? JSON.parse(text) : null;
}

/** The UI paths of a route: its params filled from the seed; the session's page once per tab. */
function pathsOf(route: string): string[] {
  if (route === 'sessions/:id/:tab?') return ['', ...SESSION_TABS.slice(1)].map((tab) => `/sessions/${params.id_session}${tab ? `/${tab}` : ''}`);
  const filled = route.replace(/:(\w+)\??/g, (_, name: string) => {
    const value = params[`${name}_${route.split('/')[0]}`];
    if (!value) throw new Error(`no seeded value for :${name} in ${route}`);
    return encodeURIComponent(value);
  });
  // The delivery log's filter comes from the URL: one the API takes, and one it does not
  // (which must list every delivery, not send the API a 422).
  if (route === 'webhooks/:id') return [`/${filled}`, `/${filled}?status=failed`, `/${filled}?status=nonsense`];
  // The agent's tabs that read more of the API than the page does: its history (the versions
  // and two of them read whole, compared), its memory, its schedules and its MCP servers.
  if (route === 'agents/:ref') return [`/${filled}`, `/${filled}?tab=history`, `/${filled}?tab=memory`, `/${filled}?tab=schedules`, `/${filled}?tab=mcp`];
  return [`/${filled}`];
}

/** Opens `path` and waits until the page settled: its API calls answered, no loader left. */
async function openAndSettle(page: Page, path: string, pending: Set<string>) {
  await page.goto(`${ui}${path}`);
  await expect(page.getByRole('main')).toBeVisible({ timeout: 10_000 });
  await expect(page.getByRole('heading').first()).toBeVisible({ timeout: 10_000 });
  await expect(page.getByText('Page not found')).toHaveCount(0);
  // Settled: no API request in flight at two polls in a row, and no loader on the page.
  let quiet = 0;
  await expect
    .poll(async () => {
      const idle = pending.size === 0 && (await page.locator('.mantine-Loader-root:visible').count()) === 0;
      quiet = idle ? quiet + 1 : 0;
      return quiet >= 2;
    }, { timeout: 30_000, intervals: [250] })
    .toBe(true);
}

/** Visits every route; returns what went wrong, per path. */
async function sweep(page: Page): Promise<{ visited: Set<string>; problems: string[] }> {
  const problems: string[] = [];
  const pending = new Set<string>();
  let at = '';
  const isApi = (url: string) => new URL(url).pathname.startsWith('/api/');
  // The event stream stays open for as long as the page does: it is not "in flight".
  const tracked = (url: string) => isApi(url) && !url.includes('/events/stream');
  page.on('request', (r) => tracked(r.url()) && pending.add(r.url() + r.method()));
  page.on('requestfinished', (r) => pending.delete(r.url() + r.method()));
  page.on('requestfailed', (r) => pending.delete(r.url() + r.method()));
  page.on('response', (r) => {
    if (isApi(r.url()) && r.status() >= 400) problems.push(`${at}: ${r.request().method()} ${new URL(r.url()).pathname}${new URL(r.url()).search} answered ${r.status()}`);
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`${at}: console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`${at}: uncaught: ${e.message}`));
  const visited = new Set<string>();
  for (const route of ROUTES) {
    for (const path of pathsOf(route)) {
      at = path;
      // A page that does not settle is one more problem: the sweep goes on, so that the
      // report names every broken page and what its API answered.
      await openAndSettle(page, path, pending).catch((e: Error) => problems.push(`${path}: did not load: ${e.message.split('\n')[0]}`));
    }
    visited.add(route);
  }
  // The index redirects to the sessions.
  at = '/';
  await page.goto(`${ui}/`);
  await expect(page).toHaveURL(/\/sessions$/);
  return { visited, problems };
}

test.beforeAll(async () => {
  test.setTimeout(300_000);
  model = await startFakeModel();
  await setScript(model.url, [{ reply: { text: 'Hello from the sweep.' } }]);
  server = await startServer(model.url);
  hooks = await startWebhookReceiver();
  if (process.env.SANDBOX_AGENTS_E2E_PROXY === '1') proxy = await startStaticProxy(server.url);
  ui = proxy?.url ?? server.url;

  // What every page shows something of: an agent (with two versions and a schedule), a session with a
  // finished turn, a webhook (with a delivery), an environment, a skill bundle with a version,
  // the default project.
  const agent = await call('POST', '/api/agents', { slug: 'sweep-agent', name: 'Sweep agent', capabilities: ['shell', 'skills'] });
  params.ref_agents = agent.slug;
  // Edited once: its History tab has two versions to compare.
  await call('PATCH', `/api/agents/${agent.slug}`, { version: agent.version, description: 'Edited once.' });
  // A schedule (weekdays at nine in Paris), for the Schedules page and the agent's tab.
  await call('POST', `/api/agents/${agent.slug}/schedules`, { name: 'Sweep schedule', cron: '0 9 * * 1-5', timezone: 'Europe/Paris', message: 'Good morning.' });
  const hook = await call('POST', '/api/webhooks', { name: 'Sweep hook', url: hooks.url });
  params.id_webhooks = hook.id;
  const env = await call('POST', '/api/environments', { name: 'sweep-env', description: 'No packages: nothing to build.' });
  params.ref_environments = env.id;
  const bundle = await call('POST', '/api/skill-bundles', { slug: 'sweep-bundle', description: 'Seeded.' });
  params['slug_skill-bundles'] = bundle.slug;
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(tgz([{ name: 'report/SKILL.md', content: '---\nname: report\ndescription: Write a report\n---\n' }]))]), 'bundle.tar.gz');
  await call('POST', '/api/skill-bundles/sweep-bundle/versions', form);
  const [project] = await call('GET', '/api/projects');
  params.ref_projects = project.slug;
  const session = await call('POST', '/api/sessions', { agent_id: agent.slug, title: 'Sweep session' });
  params.id_session = session.id;
  await expect.poll(async () => (await call('GET', `/api/sessions/${session.id}`)).status, { timeout: 120_000, message: 'the seeded session to boot' }).toBe('running');
  await call('POST', `/api/sessions/${session.id}/messages`, { prompt: 'Say hello.' });
  await expect
    .poll(async () => {
      const s = await call('GET', `/api/sessions/${session.id}`);
      const runs = (s.runs ?? []) as { status: string }[];
      return s.status === 'running' && runs.length > 0 && runs.every((r) => r.status === 'completed');
    }, { timeout: 180_000, message: 'the seeded turn to finish' })
    .toBe(true);
});

test.afterAll(async () => {
  if (!server) return;
  proxy?.server.close();
  hooks?.server.close();
  await stopServer(server);
  model?.proc.kill('SIGTERM');
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus && server) console.log(`--- server log (tail) ---\n${tail(server.logPath, 40)}`);
});

test('every route loads in open mode with no API error and no console error', async ({ page }) => {
  test.setTimeout(300_000);
  const { visited, problems } = await sweep(page);
  expect([...visited]).toEqual([...ROUTES]);
  expect(problems).toEqual([]);
});

test('the account page explains open mode and asks for no profile', async ({ page }) => {
  const asked: string[] = [];
  page.on('request', (r) => asked.push(new URL(r.url()).pathname));
  await page.goto(`${ui}/account`);
  const note = page.getByTestId('account-open-mode');
  await expect(note).toContainText('checks no credentials');
  await expect(note).toContainText('SANDBOX_AGENTS_TOKEN');
  expect(asked).not.toContain('/api/me/profile');
});

test('every route loads signed in as a person with no API error and no console error', async ({ page }) => {
  test.setTimeout(300_000);
  // Close the deployment with a key of the operators' (unbound: made while two projects
  // exist, so none resolves), then make Ada, a person, and add her to the project that holds
  // the seeded data: people reach projects through memberships only.
  await call('POST', '/api/projects', { name: 'Spare', slug: 'spare', description: '' });
  bearer = (await call('POST', '/api/api-keys', { name: 'sweep' })).key;
  await call('POST', '/api/users', { email: ADA.email, name: ADA.name, password: ADA.password, operator: true });
  await call('POST', `/api/projects/${params.ref_projects}/members`, { email: ADA.email, role: 'admin' });
  await page.goto(`${ui}/sessions`);
  await expect(page).toHaveURL(/\/login/);
  await page.getByLabel('Email').fill(ADA.email);
  await page.getByLabel('Password').fill(ADA.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => !u.pathname.startsWith('/login'));
  await expect(page.getByTestId('me-label')).toHaveText(ADA.email);
  const { visited, problems } = await sweep(page);
  expect([...visited]).toEqual([...ROUTES]);
  expect(problems).toEqual([]);
  await page.goto(`${ui}/account`);
  await expect(page.getByRole('heading', { name: 'Your account' })).toBeVisible();
  await expect(page.getByLabel('Name')).toHaveValue(ADA.name);
});

test.describe('without a LiteLLM proxy', () => {
  let bare: Server | null = null;
  test.afterAll(async () => {
    if (bare) await stopServer(bare);
  });

  test('the Models page explains the 502 and what to set', async ({ page }) => {
    test.setTimeout(180_000);
    bare = await startServer(model.url, { LITELLM_PROXY_API_BASE: '', LITELLM_PROXY_API_KEY: '' });
    const bareProxy = process.env.SANDBOX_AGENTS_E2E_PROXY === '1' ? await startStaticProxy(bare.url) : null;
    try {
      const errors: string[] = [];
      const statuses: number[] = [];
      page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('response', (r) => new URL(r.url()).pathname === '/api/models' && statuses.push(r.status()));
      await page.goto(`${bareProxy?.url ?? bare.url}/models`);
      const alert = page.getByTestId('models-unavailable');
      await expect(alert).toContainText('no LiteLLM proxy is configured');
      await expect(alert).toContainText('LITELLM_PROXY_API_BASE');
      await expect(alert).toContainText('Agents can still be saved');
      expect(statuses).toEqual([502]);
      // The browser reports a failed resource load as a console error; nothing else may fail.
      expect(errors.filter((e) => !/Failed to load resource: .* 502/.test(e))).toEqual([]);
    } finally {
      bareProxy?.server.close();
    }
  });
});
