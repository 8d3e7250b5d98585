// An agent's MCP servers, end to end, on a server of its own that may reach loopback MCP
// servers (SANDBOX_AGENTS_MCP_ALLOW_PRIVATE): a real MCP server (tests/mcp/server.py, the
// Python SDK, tools add, fail, sleep, environment and grow) and one at an address nothing listens on, both added
// on the agent's MCP servers tab. The tab shows the first's protocol and its tools by the
// names the model calls them, the second's error; a header reading a secret the project lacks
// is refused at its field; allowed tools leave the others unoffered. Then a session whose
// model calls mcp__calc__add shows the call with its server, and the unreachable server as a
// warning line. Last, a server run in the sandbox (a command) is added on the tab and shown as
// declared (its tools are listed per session), and a session started with it left out says so.
import { expect, test, type Locator, type Page } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { freePort, REPO_ROOT } from './harness';
import { ownServer } from './ownServer';
import { shot } from './shots';

const AGENT = 'toolsmith';
const PYTHON = path.join(REPO_ROOT, 'target/mcp-venv/bin/python');

const own = ownServer(
  'mcp-servers',
  [
    { when: { last_message_role: 'tool' }, reply: { text: 'The sum is 5.' } },
    { when: { last_message_role: 'user' }, reply: { tool_calls: [{ name: 'mcp__calc__add', arguments: { a: 2, b: 3 } }] } },
    { reply: { text: 'Done.' } },
  ],
  { SANDBOX_AGENTS_MCP_ALLOW_PRIVATE: 'true' },
);

let mcp: ChildProcess | null = null;
let mcpUrl = '';

/** Whether something accepts connections on the port. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

test.beforeAll(async () => {
  if (!existsSync(PYTHON)) throw new Error(`${PYTHON} does not exist: scripts/test installs it from tests/mcp/requirements.txt`);
  const port = await freePort();
  mcp = spawn(PYTHON, [path.join(REPO_ROOT, 'tests/mcp/server.py'), '--port', String(port)], { stdio: 'ignore' });
  let exited: number | null = null;
  mcp.once('exit', (code) => (exited = code ?? -1));
  await expect.poll(async () => exited ?? (await listening(port)), { timeout: 30_000, message: 'the MCP server accepts connections' }).toBe(true);
  mcpUrl = `http://127.0.0.1:${port}/mcp`;
});

test.afterAll(() => {
  mcp?.kill('SIGTERM');
});

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const r = await fetch(`${own.server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

const card = (page: Page, name: string): Locator => page.locator(`[data-testid="mcp-server"][data-name="${name}"]`);

async function addServer(page: Page, name: string, url: string) {
  await page.getByRole('button', { name: 'Add a server' }).click();
  const fresh = page.locator('[data-testid="mcp-server"][data-name=""]');
  await fresh.getByLabel('Name', { exact: true }).fill(name);
  await card(page, name).getByLabel('URL', { exact: true }).fill(url);
}

test('MCP servers are added on their tab and show what the control plane finds', async ({ page }) => {
  test.setTimeout(180_000);
  await api('POST', '/api/agents', { slug: AGENT, name: 'Toolsmith', instructions: 'You add numbers.', model: 'fake-model' });
  await page.goto(`${own.ui}/agents/${AGENT}?tab=mcp`);
  await expect(page.getByText('No MCP servers')).toBeVisible();

  await addServer(page, 'calc', mcpUrl);
  await addServer(page, 'gone', 'http://127.0.0.1:9/mcp');
  await expect(card(page, 'calc').getByTestId('mcp-status-unsaved')).toBeVisible();

  // A header from a secret the project does not have: the server's 422 lands on the headers.
  await card(page, 'calc').getByRole('button', { name: 'Add a header' }).click();
  await card(page, 'calc').getByLabel('Header name 1').fill('Authorization');
  await card(page, 'calc').getByLabel('Header 1 from').getByText('Secret', { exact: true }).click();
  await card(page, 'calc').getByLabel('Header secret 1').fill('NO_SUCH_SECRET');
  await card(page, 'calc').getByLabel('Header format 1').fill('Bearer {value}');
  await page.getByTestId('mcp-save').click();
  await expect(card(page, 'calc').getByText(/NO_SUCH_SECRET/)).toBeVisible();
  expect(((await api('GET', `/api/agents/${AGENT}`)) as { mcp_servers: unknown[] }).mcp_servers).toEqual([]);
  await card(page, 'calc').getByRole('button', { name: 'Remove header Authorization' }).click();

  await page.getByTestId('mcp-save').click();
  // The cards stand before the save answers: wait for the save itself, not for the page.
  type Saved = { version: number; mcp_servers: { name: string; url: string }[] };
  const saved = async () => (await api('GET', `/api/agents/${AGENT}`)) as Saved;
  await expect.poll(async () => (await saved()).mcp_servers.map((s) => [s.name, s.url])).toEqual([
    ['calc', mcpUrl],
    ['gone', 'http://127.0.0.1:9/mcp'],
  ]);
  expect((await saved()).version).toBe(2);

  // The real server: its protocol, and every tool by the name the model calls it.
  const calc = card(page, 'calc');
  await expect(calc.getByTestId('mcp-protocol')).toHaveText('protocol 2026-07-28');
  const tools = ['add', 'fail', 'sleep', 'environment', 'grow'];
  for (const tool of tools) {
    await expect(calc.locator(`[data-testid="mcp-tool"][data-tool="${tool}"]`).getByTestId('mcp-tool-offered-as')).toHaveText(`mcp__calc__${tool}`);
  }
  await expect(calc.locator('[data-testid="mcp-tool"][data-offered="true"]')).toHaveCount(tools.length);
  // Nothing listens at the other's address: its error, and no tools.
  const gone = card(page, 'gone');
  await expect(gone.getByTestId('mcp-status-error')).toBeVisible();
  await expect(gone.getByTestId('mcp-status-error')).toContainText('gone could not be reached');
  await expect(gone.getByTestId('mcp-tool')).toHaveCount(0);
  await shot(page, 'agent-mcp-servers');
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(calc.getByTestId('mcp-protocol')).toBeVisible();
  await shot(page, 'agent-mcp-servers-phone');
  await page.setViewportSize({ width: 1280, height: 800 });

  // "Check again" asks the server again.
  const asked = page.waitForResponse((r) => r.url().endsWith(`/api/agents/${AGENT}/mcp-servers`) && r.ok());
  await page.getByTestId('mcp-check-again').click();
  await asked;
  await expect(calc.getByTestId('mcp-protocol')).toHaveText('protocol 2026-07-28');

  // Only `add` offered: the others are listed as not offered.
  await calc.getByText('Offer every tool of the server').click();
  const offered = calc.getByLabel('Tools offered');
  await offered.fill('add');
  await offered.press('Enter');
  await page.getByTestId('mcp-save').click();
  await expect(calc.locator('[data-testid="mcp-tool"][data-tool="fail"]')).toHaveAttribute('data-offered', 'false');
  await expect(calc.locator('[data-testid="mcp-tool"][data-tool="add"]')).toHaveAttribute('data-offered', 'true');
  const narrowed = (await api('GET', `/api/agents/${AGENT}`)) as { version: number; mcp_servers: { name: string; allowed_tools: string[] | null }[] };
  expect(narrowed.mcp_servers.map((s) => s.allowed_tools ?? null)).toEqual([['add'], null]);
  expect(narrowed.version).toBe(3);

  // The overview names them, and the Permissions tab offers their keys.
  await page.getByRole('tab', { name: 'Overview' }).click();
  await expect(page.getByTestId('agent-mcp-servers')).toHaveText('calc (remote), gone (remote)');
  await page.goto(`${own.ui}/agents/${AGENT}/edit`);
  await page.getByRole('tab', { name: 'Permissions' }).click();
  await expect(page.getByTestId('permission-mcp__calc')).toBeVisible();
  await expect(page.getByTestId('permission-mcp__calc__add')).toBeVisible();
  await expect(page.getByTestId('permission-mcp__gone')).toBeVisible();
});

test('a session’s MCP call carries its server, and an unreachable server is a warning', async ({ page }) => {
  test.setTimeout(240_000);
  const session = (await api('POST', '/api/sessions', { agent_id: AGENT, title: 'Adds', prompt: 'Add 2 and 3' })) as { id: string };
  await page.goto(`${own.ui}/sessions/${session.id}`);
  const call = page.locator('[data-testid="tool-call"][data-tool="mcp__calc__add"]');
  await expect(call).toBeVisible({ timeout: 180_000 });
  await expect(call.getByTestId('mcp-badge')).toHaveText('MCP · calc');
  await expect(page.getByText('The sum is 5.')).toBeVisible({ timeout: 60_000 });
  const warning = page.locator('[data-testid="mcp-server-error"][data-server="gone"]').first();
  await expect(warning).toBeVisible();
  await expect(warning).toHaveAttribute('data-required', 'false');
  await expect(warning).toContainText('MCP server gone could not be reached');
  await shot(page, 'session-mcp-call');
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(call.getByTestId('mcp-badge')).toBeVisible();
  await shot(page, 'session-mcp-call-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
});

test('a server run in the sandbox is added as a command, and a session can leave it out', async ({ page }) => {
  test.setTimeout(180_000);
  const slug = 'localsmith';
  await api('POST', '/api/agents', { slug, name: 'Localsmith', instructions: 'You use local tools.', model: 'fake-model' });
  await page.goto(`${own.ui}/agents/${slug}?tab=mcp`);
  await expect(page.getByText(/started in each session’s sandbox when a turn starts/)).toBeVisible();
  await expect(page.getByText(/not supported yet/)).toHaveCount(0);

  // A remote server beside it, so that the session keeps one and leaves the other out.
  await addServer(page, 'calc', mcpUrl);
  await page.getByRole('button', { name: 'Add a server' }).click();
  await page.locator('[data-testid="mcp-server"][data-name=""]').getByLabel('Name', { exact: true }).fill('local');
  const local = card(page, 'local');
  await local.getByText('In the sandbox (command)').click();
  await local.getByLabel('Command', { exact: true }).fill("python3 server.py --stdio --greeting 'hello there'");
  await expect(local.getByText('Started in the sandbox, spoken to over stdio: 5 words', { exact: false })).toBeVisible();
  await local.getByRole('button', { name: 'Add a variable' }).click();
  await local.getByLabel('Variable 1', { exact: true }).fill('MODE');
  await local.getByLabel('Value 1', { exact: true }).fill('test');
  await expect(local.getByTestId('mcp-status-unsaved')).toContainText('sessions start it when their turns start');
  await page.getByTestId('mcp-save').click();

  // Saved as a command, and shown as declared: not an error, its tools listed per session.
  await expect(local.getByTestId('mcp-status-sandbox')).toBeVisible();
  await expect(local.getByTestId('mcp-status-sandbox')).toContainText('its tools are listed then, in that session');
  await expect(local.getByTestId('mcp-status')).toContainText('in the sandbox');
  await expect(local.getByTestId('mcp-status-error')).toHaveCount(0);
  await expect(card(page, 'calc').getByTestId('mcp-protocol')).toHaveText('protocol 2026-07-28');
  const saved = (await api('GET', `/api/agents/${slug}`)) as { mcp_servers: { name: string; command?: string[] | null; env?: Record<string, string> | null; url?: string | null }[] };
  expect(saved.mcp_servers.map((s) => [s.name, s.command ?? null, s.env ?? null])).toEqual([
    ['calc', null, null],
    ['local', ['python3', 'server.py', '--stdio', '--greeting', 'hello there'], { MODE: 'test' }],
  ]);
  await shot(page, 'agent-mcp-sandbox-server');
  await page.setViewportSize({ width: 390, height: 844 });
  await local.getByTestId('mcp-status').scrollIntoViewIfNeeded();
  await expect(local.getByTestId('mcp-status-sandbox')).toBeInViewport();
  await shot(page, 'agent-mcp-sandbox-server-phone');
  await page.setViewportSize({ width: 1280, height: 800 });

  // The overview names it as run in the sandbox.
  await page.getByRole('tab', { name: 'Overview' }).click();
  await expect(page.getByTestId('agent-mcp-servers')).toHaveText('calc (remote), local (in the sandbox)');

  // Starting a session offers the agent's servers, every one kept; leaving one out narrows it.
  await page.getByRole('button', { name: 'Start a session' }).click();
  const dialog = page.getByRole('dialog');
  const keepLocal = dialog.getByRole('checkbox', { name: /^local/ });
  const keepCalc = dialog.getByRole('checkbox', { name: /^calc/ });
  await expect(keepLocal).toBeChecked();
  await expect(keepCalc).toBeChecked();
  await expect(dialog.getByTestId('start-mcp-servers')).toContainText('All of the agent’s');
  await dialog.getByLabel('Title').fill('Narrowed');
  await keepLocal.uncheck();
  await expect(dialog.getByTestId('start-mcp-servers')).toContainText('Only calc');
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(keepCalc).toBeVisible();
  await shot(page, 'start-session-mcp-servers-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
  const created = page.waitForResponse((r) => r.url().endsWith('/api/sessions') && r.request().method() === 'POST');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  const body = (await (await created).request().postDataJSON()) as { mcp_servers?: string[] };
  expect(body.mcp_servers).toEqual(['calc']);

  // The session's page says which it uses, and the API agrees.
  await expect(page).toHaveURL(/\/sessions\/[^/]+$/);
  await expect(page.getByTestId('session-mcp-servers')).toHaveText('MCP servers: calc');
  const id = page.url().split('/sessions/')[1];
  expect(((await api('GET', `/api/sessions/${id}`)) as { mcp_servers: string[] | null }).mcp_servers).toEqual(['calc']);
  await shot(page, 'session-mcp-servers-narrowed');
});
