// A spec's own server and scripted model, for specs whose script must not answer others' (or
// others' theirs): started before the spec's tests (behind the static proxy when
// SANDBOX_AGENTS_E2E_PROXY=1), its log's tail printed when a test fails, its sessions deleted
// and both stopped after. The tests run in order, one after another.
import { test } from '@playwright/test';
import { setScript, startFakeModel, startServer, startStaticProxy, stopServer, tail, type Server } from './harness';

/** The server (set once the spec's tests start) and the UI's origin. */
export type OwnServer = { server: Server; ui: string };

/** `env` sets the server's flags over the harness's defaults. */
export function ownServer(label: string, script: unknown[], env: Record<string, string> = {}): OwnServer {
  const own = { ui: '' } as OwnServer;
  let model: Awaited<ReturnType<typeof startFakeModel>> | undefined;
  let proxy: Awaited<ReturnType<typeof startStaticProxy>> | null = null;
  test.describe.configure({ mode: 'serial' });

  test.beforeAll(async () => {
    test.setTimeout(240_000);
    model = await startFakeModel();
    await setScript(model.url, script);
    own.server = await startServer(model.url, { SANDBOX_AGENTS_WARM_POOL_SIZE: '0', ...env });
    if (process.env.SANDBOX_AGENTS_E2E_PROXY === '1') {
      proxy = await startStaticProxy(own.server.url);
      own.ui = proxy.url;
    } else own.ui = own.server.url;
  });

  test.afterEach(async ({}, testInfo) => {
    if (testInfo.status !== testInfo.expectedStatus) console.log(`--- ${label} server log (tail) ---\n${tail(own.server.logPath, 60)}`);
  });

  test.afterAll(async () => {
    if (!own.server) return;
    const left = (await (await fetch(`${own.server.url}/api/sessions?limit=100&offset=0`)).json()) as { id: string }[];
    for (const s of left) await fetch(`${own.server.url}/api/sessions/${s.id}`, { method: 'DELETE' });
    proxy?.server.close();
    await stopServer(own.server);
    model?.proc.kill('SIGTERM');
  });
  return own;
}
