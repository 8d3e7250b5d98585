import type { FullConfig } from '@playwright/test';
import { existsSync, readFileSync } from 'node:fs';
import { startFakeModel, startServer, startStaticProxy, startWebhookReceiver, stopServer, tail } from './harness';

// One server for the whole suite (CI has two cores). Tests find it through process.env.
export default async function globalSetup(_config: FullConfig) {
  const model = await startFakeModel();
  const server = await startServer(model.url);
  const hooks = await startWebhookReceiver();
  let proxy: Awaited<ReturnType<typeof startStaticProxy>> | null = null;
  let ui = server.url;
  if (process.env.SANDBOX_AGENTS_E2E_PROXY === '1') {
    proxy = await startStaticProxy(server.url);
    ui = proxy.url;
  } else {
    const r = await fetch(`${server.url}/sessions`, { headers: { Accept: 'text/html' } });
    const type = r.headers.get('content-type') ?? '';
    if (!type.includes('text/html')) {
      await stopServer(server);
      model.proc.kill();
      throw new Error(`${server.url}/sessions does not serve the UI (${r.status} ${type}): a server built without web/dist? Set SANDBOX_AGENTS_E2E_PROXY=1 to serve web/dist from the test harness.`);
    }
  }
  process.env.E2E_UI_URL = ui;
  process.env.E2E_API_URL = server.url;
  process.env.E2E_FAKE_MODEL_URL = model.url;
  process.env.E2E_WEBHOOK_URL = hooks.url;
  process.env.E2E_SERVER_LOG = server.logPath;
  return async () => {
    // Delete what the suite made, so no sandbox outlives it (with the key once one exists).
    const keyFile = `${server.logPath}.key`;
    const headers: Record<string, string> = existsSync(keyFile) ? { Authorization: `Bearer ${readFileSync(keyFile, 'utf8').trim()}` } : {};
    try {
      const r = await fetch(`${server.url}/api/sessions?limit=100&offset=0`, { headers });
      if (r.ok) {
        for (const s of (await r.json()) as { id: string }[]) {
          await fetch(`${server.url}/api/sessions/${s.id}`, { method: 'DELETE', headers });
        }
      }
    } catch {
      /* the teardown below still removes containers */
    }
    proxy?.server.close();
    hooks.server.close();
    await stopServer(server);
    model.proc.kill('SIGTERM');
    if (process.env.E2E_SHOW_LOG) console.log(tail(server.logPath));
  };
}
