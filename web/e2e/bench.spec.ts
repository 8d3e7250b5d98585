// Opening a session with 10,000 events: the server's answers are stood in for (page.route), so
// this measures the UI alone: parse the replay, build the transcript, render the virtual list.
import { expect, test } from '@playwright/test';

const ID = '00000000-0000-4000-8000-000000000bench'.slice(0, 36);
const N = 10_000;

function events() {
  const out: unknown[] = [];
  let seq = 0;
  const at = new Date('2026-01-01T00:00:00Z').getTime();
  const push = (type: string, payload: Record<string, unknown>, run: string | null = 'R') =>
    out.push({ seq: ++seq, session_id: ID, run_id: run, type, payload, created_at: new Date(at + seq * 1000).toISOString() });
  push('session.created', {}, null);
  push('session.status_running', {}, null);
  while (seq < N - 2) {
    push('user.message', { text: `Question ${seq}` });
    for (let i = 0; i < 3 && seq < N - 4; i++) {
      push('agent.tool_use', { tool: 'shell', call_id: `c${seq}`, arguments: JSON.stringify({ cmd: `ls -la /workspace/${seq}` }) });
      push('agent.tool_result', { tool: 'shell', call_id: `c${seq - 1}`, output: 'total 0\n'.repeat(3) });
    }
    push('agent.message', { text: `Answer ${seq}: ${'lorem ipsum '.repeat(8)}` });
    push('session.status_idle', { stop_reason: 'end_turn', run_status: 'completed', turns: 1, usage: { input_tokens: 10, output_tokens: 20, requests: 1 } });
  }
  while (seq < N) push('agent.thinking', { text: 'pondering' });
  return out;
}

test('a session with 10,000 events opens quickly', async ({ page }) => {
  const log = events();
  expect(log).toHaveLength(N);
  const sse = log.map((e) => `id: ${(e as { seq: number }).seq}\nevent: x\ndata: ${JSON.stringify(e)}\n\n`).join('');
  const now = new Date().toISOString();
  await page.route(`**/api/sessions/${ID}`, (r) =>
    r.fulfill({ json: { id: ID, agent_id: 'A', title: 'Benchmark', status: 'running', activity: 'idle', backend: 'docker', exposed_ports: [], metadata: {}, usage: {}, workdir: '/workspace', created_at: now, updated_at: now, runs: [], sandbox_seconds: 0, agent: null } }),
  );
  await page.route(`**/api/sessions/${ID}/tool-calls`, (r) => r.fulfill({ json: [] }));
  let served = false;
  await page.route(`**/api/sessions/${ID}/events/stream*`, (r) => {
    // The replay once; a reconnect after it gets nothing new.
    const body = served ? '' : sse;
    served = true;
    return r.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body });
  });
  await page.goto(`${process.env.E2E_UI_URL}/sessions`);
  await expect(page.getByRole('heading', { name: 'Sessions' })).toBeVisible();
  // In-app navigation, as a person clicks a session: the app's code is loaded already.
  const t0 = Date.now();
  await page.evaluate((id) => {
    window.history.pushState({}, '', `/sessions/${id}`);
    window.dispatchEvent(new PopStateEvent('popstate'));
  }, ID);
  await expect(page.getByTestId('event-count')).toHaveText(String(N), { timeout: 20_000 });
  await expect(page.getByTestId('transcript')).toBeVisible();
  const elapsed = Date.now() - t0;
  console.log(`opened a ${N}-event session in ${elapsed} ms`);
  await test.info().attach('bench', { body: `${elapsed} ms`, contentType: 'text/plain' });
  // Virtualized: only a screenful of rows is in the DOM.
  expect(await page.locator('[data-testid="transcript"] [data-index]').count()).toBeLessThan(80);
  // Scrolling to the top renders the start of the log.
  await page.getByTestId('transcript').evaluate((el) => (el.scrollTop = 0));
  await expect(page.getByText('Question 2', { exact: true })).toBeVisible();
  expect(elapsed).toBeLessThan(Number(process.env.E2E_BENCH_LIMIT_MS ?? 5000));
});

test('the sessions page loads at most 300 KB of JavaScript, gzipped', async ({ page }) => {
  const { gzipSync } = await import('node:zlib');
  const scripts: Promise<number>[] = [];
  page.on('response', (r) => {
    if (r.request().resourceType() === 'script') scripts.push(r.body().then((b) => gzipSync(b, { level: 9 }).length));
  });
  await page.goto(`${process.env.E2E_UI_URL}/sessions`);
  await expect(page.getByRole('heading', { name: 'Sessions' })).toBeVisible();
  await page.waitForLoadState('networkidle');
  const total = (await Promise.all(scripts)).reduce((a, b) => a + b, 0);
  console.log(`sessions page first load: ${scripts.length} scripts, ${(total / 1024).toFixed(1)} KB gzipped`);
  expect(total).toBeLessThanOrEqual(300 * 1024);
});
