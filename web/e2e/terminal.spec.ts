// The session's terminal, end to end: a real shell in a real sandbox on a WebSocket, kept state,
// resizing, its end and a new one. In a project of its own (ui.spec.ts counts the default
// project's sessions), and run in both modes of the harness: the server serving the UI, and
// the static proxy (SANDBOX_AGENTS_E2E_PROXY=1), which must pass the WebSocket upgrade on as
// a reverse proxy in front of the server would (scripts/test runs this file in that mode too).
import { expect, test } from '@playwright/test';
import { tail } from './harness';
import { shot } from './shots';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const PROJECT = 'terminal-e2e';
let sessionId = '';

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = { 'X-Project': PROJECT };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${API()}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

test.beforeAll(async () => {
  const r = await fetch(`${API()}/api/projects`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Terminal e2e', slug: PROJECT, description: '' }) });
  expect([201, 409], await r.clone().text()).toContain(r.status);
  await api('POST', '/api/agents', { slug: 'shell-user', name: 'Shell user', instructions: 'You are a test agent.' });
  const s = (await api('POST', '/api/sessions', { agent_id: 'shell-user', title: 'Terminal e2e' })) as { id: string };
  sessionId = s.id;
  await expect.poll(async () => ((await api('GET', `/api/sessions/${s.id}`)) as { status: string }).status, { timeout: 120_000 }).toBe('running');
});

// The project goes again, with whatever a failed test left in it.
test.afterAll(async () => {
  const left = await fetch(`${API()}/api/sessions?limit=100&offset=0`, { headers: { 'X-Project': PROJECT } });
  for (const s of left.ok ? ((await left.json()) as { id: string }[]) : []) await fetch(`${API()}/api/sessions/${s.id}`, { method: 'DELETE', headers: { 'X-Project': PROJECT } });
  await expect.poll(async () => (await fetch(`${API()}/api/projects/${PROJECT}`, { method: 'DELETE' })).status, { timeout: 60_000 }).toBe(204);
});

test.beforeEach(async ({ page }) => {
  await page.addInitScript((slug) => localStorage.setItem('sandbox-agents.project', slug), PROJECT);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
});

test('use an interactive shell in the terminal tab, resize it, exit and open a new one', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}/terminal`);
  const terminal = page.getByTestId('terminal');
  const state = page.getByTestId('terminal-state');
  await expect(state).toHaveAttribute('data-phase', 'open');
  await terminal.click();
  await page.keyboard.type('mkdir -p uploads && echo hello-$((6*7)) && tty');
  await page.keyboard.press('Enter');
  await expect(terminal).toContainText('hello-42');
  await expect(terminal).toContainText('/dev/pts/');
  // The shell keeps its state between lines, as a shell does.
  await page.keyboard.type('cd uploads && X=kept-$((2*3))');
  await page.keyboard.press('Enter');
  await page.keyboard.type('echo "$X in $PWD"');
  await page.keyboard.press('Enter');
  await expect(terminal).toContainText('kept-6 in /workspace/uploads');
  await shot(page, 'terminal');
  // A narrower window is a narrower terminal, down to the shell.
  await page.keyboard.type('echo cols-$(stty size | cut -d" " -f2)');
  await page.keyboard.press('Enter');
  await expect(terminal).toContainText(/cols-\d+/);
  const wide = Number((await terminal.textContent())!.match(/cols-(\d+)/)![1]);
  await page.setViewportSize({ width: 800, height: 720 });
  await page.keyboard.type('clear; echo narrow-$(stty size | cut -d" " -f2)');
  await page.keyboard.press('Enter');
  await expect(terminal).toContainText(/narrow-\d+/);
  const narrow = Number((await terminal.textContent())!.match(/narrow-(\d+)/)![1]);
  expect(narrow).toBeLessThan(wide);
  await page.setViewportSize({ width: 1280, height: 800 });
  // Its end is said, and a new shell is a click away.
  await page.keyboard.type('exit 3');
  await page.keyboard.press('Enter');
  await expect(state).toHaveAttribute('data-phase', 'ended');
  await expect(state).toContainText('The shell exited with 3');
  await state.getByRole('button', { name: 'New shell' }).click();
  await expect(state).toHaveAttribute('data-phase', 'open');
  await terminal.click();
  await page.keyboard.type('echo again-$((5+5))');
  await page.keyboard.press('Enter');
  await expect(terminal).toContainText('again-10');
});
