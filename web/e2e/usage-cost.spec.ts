// What model calls cost, end to end, on a server of its own (so the model catalogue's prices
// are read fresh, and the shared server's usage stays out of the sums): the fake model lists
// `fake-model` with per-token prices and `local-model` without any. One session's first turn is
// priced by the provider (the reply's `usage.cost`, $0.25), its second by the catalogue
// (1000 × $0.000002 + 100 × $0.00001 = $0.003); another session's turn on `local-model` has
// no price. The usage page, each session's page and the agent's page say $0.253, and that one
// call is unpriced, never as $0.00.
import { expect, test } from '@playwright/test';
import { setScript, startFakeModel, startServer, startStaticProxy, stopServer, tail, type Server } from './harness';
import { shot } from './shots';
import { noSidewaysScroll } from './layout';

let server: Server;
let model: Awaited<ReturnType<typeof startFakeModel>>;
let proxy: Awaited<ReturnType<typeof startStaticProxy>> | null = null;
let ui = '';
let priced = '';
let unpriced = '';
const AGENT = 'coster';

type Session = { id: string; status: string; usage: Record<string, unknown>; runs: { status: string }[] };

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const r = await fetch(`${server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

/** Waits until the session's `runs` turns all completed. */
async function turnsDone(id: string, runs: number) {
  await expect
    .poll(
      async () => {
        const s = (await api('GET', `/api/sessions/${id}`)) as Session;
        return s.runs.length === runs && s.runs.every((r) => r.status === 'completed');
      },
      { timeout: 180_000, message: `session ${id}: ${runs} turns to finish` },
    )
    .toBe(true);
}

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  test.setTimeout(360_000);
  model = await startFakeModel();
  await setScript(
    model.url,
    [
      { when: { last_user_contains: 'provider' }, reply: { text: 'Priced by the provider.', usage: { prompt_tokens: 1000, completion_tokens: 100, cost: 0.25 } } },
      { when: { last_user_contains: 'catalogue' }, reply: { text: 'Priced by the catalogue.', usage: { prompt_tokens: 1000, completion_tokens: 100 } } },
      { reply: { text: 'Nobody prices me.', usage: { prompt_tokens: 500, completion_tokens: 50 } } },
    ],
    {
      models: [
        { id: 'fake-model', max_input_tokens: 128_000, max_output_tokens: 16_384, input_cost_per_token: 0.000002, output_cost_per_token: 0.00001 },
        { id: 'local-model', max_input_tokens: 32_000, max_output_tokens: 4_096 },
      ],
    },
  );
  server = await startServer(model.url, { SANDBOX_AGENTS_WARM_POOL_SIZE: '0' });
  if (process.env.SANDBOX_AGENTS_E2E_PROXY === '1') {
    proxy = await startStaticProxy(server.url);
    ui = proxy.url;
  } else ui = server.url;

  await api('POST', '/api/agents', { slug: AGENT, name: 'Coster', instructions: 'You are a test agent.', model: 'fake-model' });
  priced = ((await api('POST', '/api/sessions', { agent_id: AGENT, title: 'Priced session', prompt: 'Priced by the provider, please' })) as Session).id;
  unpriced = ((await api('POST', '/api/sessions', { agent_id: AGENT, title: 'Unpriced session', model: 'local-model', prompt: 'Hello' })) as Session).id;
  await turnsDone(priced, 1);
  await api('POST', `/api/sessions/${priced}/messages`, { prompt: 'Now one the catalogue prices' });
  await turnsDone(priced, 2);
  await turnsDone(unpriced, 1);
});

test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus) console.log(`--- cost server log (tail) ---\n${tail(server.logPath, 40)}`);
});

test.afterAll(async () => {
  if (!server) return;
  const left = (await (await fetch(`${server.url}/api/sessions?limit=100&offset=0`)).json()) as { id: string }[];
  for (const s of left) await fetch(`${server.url}/api/sessions/${s.id}`, { method: 'DELETE' });
  proxy?.server.close();
  await stopServer(server);
  model.proc.kill('SIGTERM');
});

test('the API prices each call by the provider, else the catalogue, and counts the rest as unpriced', async () => {
  const s = (await api('GET', `/api/sessions/${priced}`)) as Session;
  expect(s.usage.requests).toBe(2);
  expect(s.usage.cost_usd as number).toBeCloseTo(0.253, 9);
  expect(s.usage.unpriced_requests).toBe(0);
  const u = (await api('GET', `/api/sessions/${unpriced}`)) as Session;
  expect([u.usage.cost_usd, u.usage.unpriced_requests]).toEqual([0, 1]);
  const report = await api('GET', `/api/usage?agent=${AGENT}`);
  expect(report.total.cost_usd).toBeCloseTo(0.253, 9);
  expect([report.total.requests, report.total.runs, report.total.unpriced_requests]).toEqual([3, 3, 1]);
});

test('the usage page: the spend in all, by day and by model, with the unpriced call said', async ({ page }) => {
  await page.goto(`${ui}/usage`);
  await expect(page.getByTestId('usage-spend-value')).toHaveText('≥ $0.253');
  await expect(page.getByTestId('usage-spend-note')).toHaveText('+ 1 unpriced call');
  await expect(page.getByTestId('spend-chart')).toBeVisible();
  await expect(page.getByTestId('spend-chart-unpriced')).toHaveText('+ 1 call without a price, not in these bars');
  // Today's bar is drawn (recharts renders one rectangle per bar with a value).
  await expect(page.getByTestId('spend-chart').locator('.recharts-bar-rectangle')).toHaveCount(1);
  await expect(page.getByTestId('usage-row')).toHaveCount(1);
  await expect(page.getByTestId('usage-row-spend')).toHaveText('≥ $0.253+ 1 unpriced call');
  await shot(page, 'usage');

  await page.getByText('By model', { exact: true }).click();
  await expect(page.locator('[data-testid="usage-row"][data-key="fake-model"]').getByTestId('usage-row-spend')).toHaveText('$0.253');
  await expect(page.locator('[data-testid="usage-row"][data-key="local-model"]').getByTestId('usage-row-spend')).toHaveText('Unpriced1 call unpriced');
  await expect(page.getByTestId('spend-chart').locator('.recharts-bar-rectangle')).toHaveCount(2);

  // A phone-width screen: the cards and charts stack, the table scrolls in its own box.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${ui}/usage?group_by=model`);
  await expect(page.getByTestId('usage-spend-value')).toHaveText('≥ $0.253');
  await expect(page.getByTestId('usage-row')).toHaveCount(2);
  await noSidewaysScroll(page, 390);
  await shot(page, 'usage-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
});

test("a session's page: its cost in the header and in the Usage tab, by model, agent and run", async ({ page }) => {
  await page.goto(`${ui}/sessions/${priced}`);
  await expect(page.getByTestId('session-cost')).toHaveText('$0.253 spent');
  await page.getByTestId('session-cost').click();
  await expect(page).toHaveURL(new RegExp(`/sessions/${priced}/usage$`));
  await expect(page.getByTestId('session-usage-cost-value')).toHaveText('$0.253');
  await expect(page.getByTestId('session-usage-cost-note')).toHaveCount(0);
  await expect(page.getByTestId('usage-by-model').locator('tr[data-key="fake-model"]').getByTestId('breakdown-cost')).toHaveText('$0.253');
  await expect(page.getByTestId('usage-by-agent').locator(`tr[data-key="${AGENT}"]`).getByTestId('breakdown-cost')).toHaveText('$0.253');
  await expect(page.getByTestId('run-cost')).toHaveText(['$0.25', '$0.003']);
  await shot(page, 'session-usage');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await expect(page.getByTestId('session-usage-cost-value')).toHaveText('$0.253');
  await noSidewaysScroll(page, 390);
  await page.setViewportSize({ width: 1280, height: 800 });

  await page.goto(`${ui}/sessions/${unpriced}/usage`);
  await expect(page.getByTestId('session-cost')).toHaveText('cost unknown: 1 call unpriced');
  await expect(page.getByTestId('session-usage-cost-value')).toHaveText('Unpriced');
  await expect(page.getByTestId('session-usage-cost-note')).toHaveText('1 call unpriced');
  await expect(page.getByTestId('usage-by-model').locator('tr[data-key="local-model"]').getByTestId('breakdown-cost')).toHaveText('Unpriced1 call unpriced');
  await expect(page.getByTestId('run-cost')).toHaveText(['Unpriced1 call unpriced']);
  await expect(page.getByText('$0.00')).toHaveCount(0);
});

test("the agent's page: what its sessions cost over the last 30 days, linked to its usage", async ({ page }) => {
  await page.goto(`${ui}/agents/${AGENT}`);
  const card = page.getByTestId('agent-usage');
  await expect(card.getByRole('heading', { name: 'Usage, last 30 days' })).toBeVisible();
  await expect(card.getByTestId('agent-cost-value')).toHaveText('≥ $0.253');
  await expect(card.getByTestId('agent-cost-note')).toHaveText('+ 1 unpriced call');
  await card.scrollIntoViewIfNeeded();
  await shot(page, 'agent-usage');
  await card.getByRole('link', { name: 'Usage of this agent' }).click();
  await expect(page).toHaveURL(new RegExp(`/usage\\?agent=${AGENT}$`));
  await expect(page.getByTestId('usage-agent')).toHaveText(`Agent: ${AGENT}`);
  await expect(page.getByTestId('usage-spend-value')).toHaveText('≥ $0.253');
});
