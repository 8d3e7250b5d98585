// The limits on turns in flight, end to end, on a server of its own started with
// --max-runs-per-project 1 (the suite's shared server has no limit, which its other tests
// rely on): a second turn in the project waits, and its session's page says why and where it
// stands; interrupting the first from its page lets the second run, and its answer appears.
import { expect, test } from '@playwright/test';
import { setScript, startFakeModel, startServer, startStaticProxy, stopServer, tail, type Server } from './harness';
import { shot } from './shots';

let server: Server;
let model: Awaited<ReturnType<typeof startFakeModel>>;
let proxy: Awaited<ReturnType<typeof startStaticProxy>> | null = null;
let ui = '';

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const r = await fetch(`${server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

async function runningSession(): Promise<string> {
  const s = (await api('POST', '/api/sessions', { agent_id: 'limited' })) as { id: string };
  await expect.poll(async () => ((await api('GET', `/api/sessions/${s.id}`)) as { status: string }).status, { timeout: 120_000 }).toBe('running');
  return s.id;
}

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  model = await startFakeModel();
  await setScript(model.url, [
    { when: { last_user_contains: 'slow' }, reply: { text: 'Too late.', delay_ms: 120_000 } },
    { reply: { text: 'The second turn got its slot.' } },
  ]);
  server = await startServer(model.url, { SANDBOX_AGENTS_MAX_RUNS_PER_PROJECT: '1', SANDBOX_AGENTS_WARM_POOL_SIZE: '0' });
  if (process.env.SANDBOX_AGENTS_E2E_PROXY === '1') {
    proxy = await startStaticProxy(server.url);
    ui = proxy.url;
  } else ui = server.url;
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- limited server log (tail) ---\n${tail(server.logPath, 40)}`);
});

test.afterAll(async () => {
  const left = (await (await fetch(`${server.url}/api/sessions?limit=100&offset=0`)).json()) as { id: string }[];
  for (const s of left) await fetch(`${server.url}/api/sessions/${s.id}`, { method: 'DELETE' });
  proxy?.server.close();
  await stopServer(server);
  model.proc.kill('SIGTERM');
});

test('a turn over the project limit says it waits, and runs once the first is interrupted', async ({ page }) => {
  await api('POST', '/api/agents', { slug: 'limited', name: 'Limited', instructions: 'You are a test agent.' });
  const first = await runningSession();
  const second = await runningSession();
  await api('POST', `/api/sessions/${first}/messages`, { prompt: 'slow work' });
  // The first turn holds the slot once it reached the model (sent second, the other could win it).
  await expect.poll(async () => ((await (await fetch(`${model.url}/_requests`)).json()) as unknown[]).length, { timeout: 60_000 }).toBeGreaterThan(0);
  await api('POST', `/api/sessions/${second}/messages`, { prompt: 'next please' });

  await page.goto(`${ui}/sessions/${second}`);
  await expect(page.getByText("Turn waiting to start: this project's limit on turns in flight is reached (position 1 in the queue)")).toBeVisible();
  await expect(page.getByText('The second turn got its slot.')).toHaveCount(0);
  await shot(page, 'turn-queued');
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(page.getByText(/Turn waiting to start/)).toBeVisible();
  await shot(page, 'turn-queued-phone');
  await page.setViewportSize({ width: 1280, height: 800 });

  await page.goto(`${ui}/sessions/${first}`);
  await page.getByRole('button', { name: 'Interrupt' }).click();
  await expect(page.getByRole('button', { name: 'Interrupt' })).toHaveCount(0, { timeout: 30_000 });

  await page.goto(`${ui}/sessions/${second}`);
  await expect(page.getByText('The second turn got its slot.')).toBeVisible({ timeout: 30_000 });
  await expect(page.getByText("Turn waiting to start: this project's limit on turns in flight is reached (position 1 in the queue)")).toBeVisible();
});
