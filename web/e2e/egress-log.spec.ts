// A session's egress log end to end (issue 36), on a server of its own run with the egress
// proxy (the suite's shared server runs without it): a connection the session's allowlist
// refuses shows in the Network tab's log (host:port, one refusal) and in the transcript as one
// line with the rule that refused it. Nothing leaves the machine: the name is refused by the
// policy before it is resolved.
import { expect, test } from '@playwright/test';
import { startServer, stopServer, tail, type Server } from './harness';
import { shot } from './shots';

let server: Server;
let sessionId: string | null = null;

async function api(method: string, p: string, body?: unknown) {
  const r = await fetch(`${server.url}${p}`, { method, headers: body === undefined ? {} : { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

test.beforeAll(async () => {
  server = await startServer(process.env.E2E_FAKE_MODEL_URL!, { SANDBOX_AGENTS_EGRESS_PROXY: 'true', SANDBOX_AGENTS_WARM_POOL_SIZE: '0' });
});

test.afterAll(async () => {
  if (sessionId) await fetch(`${server.url}/api/sessions/${sessionId}`, { method: 'DELETE' });
  await stopServer(server);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- egress server log (tail) ---\n${tail(server.logPath, 40)}`);
});

test('a refused connection is in the session’s egress log and its transcript', async ({ page }) => {
  await api('POST', '/api/agents', { slug: 'egress-e2e', name: 'Egress e2e', network: { egress: 'allowlist', allow: ['pypi.org'] } });
  sessionId = ((await api('POST', '/api/sessions', { agent_id: 'egress-e2e', title: 'Egress e2e' })) as { id: string }).id;
  await expect.poll(async () => (await api('GET', `/api/sessions/${sessionId}`)).status, { timeout: 90_000 }).toBe('running');

  // Before any traffic: the log is on, and empty.
  await page.goto(`${server.url}/sessions/${sessionId}/network`);
  await expect(page.getByTestId('egress-log')).toContainText('No egress recorded yet');

  const exec = await api('POST', `/api/sessions/${sessionId}/exec`, { command: "curl -sS -o /dev/null -w '%{http_code}' --max-time 10 http://refused.example/" });
  expect(exec.stdout).toBe('403');

  // Summed within 5 s on the server, read again every 5 s by the tab.
  const row = page.getByTestId('egress-row').filter({ hasText: 'refused.example:80' });
  await expect(row).toBeVisible({ timeout: 30_000 });
  await expect(row.getByRole('cell').nth(4)).toHaveText('1');
  await shot(page, 'session-egress-log');

  await page.goto(`${server.url}/sessions/${sessionId}`);
  await expect(page.getByTestId('status-sandbox.egress_denied').first()).toContainText('Egress refused: refused.example:80 — ');
});
