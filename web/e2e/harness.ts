// The processes the end-to-end suite runs against, as tests/contract/harness.py starts them for
// the contract suite: the scripted fake model (the server's LiteLLM proxy), the real
// `sandbox-agents serve` on a free port with a temporary data directory, and a webhook receiver.
// The browser goes straight at the server, which serves the UI itself. With
// SANDBOX_AGENTS_E2E_PROXY=1 (for a server built without the UI) a small static server serves
// web/dist and forwards the server's routes to it instead.
import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = path.resolve(WEB_DIR, '..');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startFakeModel(): Promise<{ url: string; proc: ChildProcess }> {
  const bin = process.env.SANDBOX_AGENTS_FAKE_MODEL_BIN || path.join(REPO_ROOT, 'target/debug/fake-model');
  if (!existsSync(bin)) throw new Error(`${bin} does not exist: build it with cargo build -p sandbox-agents-fake-model, or set SANDBOX_AGENTS_FAKE_MODEL_BIN`);
  const proc = spawn(bin, ['--bind', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const rl = readline.createInterface({ input: proc.stdout! });
  const line: string = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the fake model did not start within 20 s')), 20_000);
    rl.once('line', (l) => {
      clearTimeout(t);
      resolve(l.trim());
    });
    proc.once('exit', (code) => reject(new Error(`the fake model exited with ${code}`)));
  });
  rl.close();
  proc.stdout!.resume();
  const prefix = 'listening on ';
  if (!line.startsWith(prefix)) throw new Error(`the fake model did not start: ${line}`);
  return { url: line.slice(prefix.length), proc };
}

/**
 * Scripts the fake model: its `rules`, and with `models` the models it lists (with their limits
 * and per-token prices, as LiteLLM's `/model/info` gives them) instead of the one `fake-model`.
 */
export async function setScript(fakeModelUrl: string, rules: unknown[], { models }: { models?: unknown[] } = {}) {
  const r = await fetch(`${fakeModelUrl}/_script`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(models ? { rules, models } : { rules }) });
  if (!r.ok) throw new Error(`PUT /_script: ${r.status} ${await r.text()}`);
  await fetch(`${fakeModelUrl}/_requests`, { method: 'DELETE' });
}

// Environment the server must not inherit (it would point it elsewhere), as harness.py drops it.
const DROP = [
  'DATABASE_URL', 'SANDBOX_AGENTS_BIND', 'SANDBOX_AGENTS_DATA_DIR', 'SANDBOX_AGENTS_DEFAULT_MODEL', 'SANDBOX_AGENTS_DB_MAX_CONNECTIONS',
  'SANDBOX_AGENTS_LOG_FORMAT', 'SANDBOX_AGENTS_BACKEND', 'SANDBOX_AGENTS_IMAGE', 'SANDBOX_AGENTS_SANDBOX_CPUS', 'SANDBOX_AGENTS_SANDBOX_MEMORY_MB',
  'SANDBOX_AGENTS_SANDBOX_PIDS', 'SANDBOX_AGENTS_IDLE_TTL_SECONDS', 'SANDBOX_AGENTS_LOCAL_DIR_ROOTS', 'SANDBOX_AGENTS_GIT_KNOWN_HOSTS',
  'SANDBOX_AGENTS_PUBLIC_URL', 'SANDBOX_AGENTS_PREVIEW_KEY', 'SANDBOX_AGENTS_PREVIEW_BIND', 'SANDBOX_AGENTS_PREVIEW_PUBLIC_URL',
  'SANDBOX_AGENTS_PREVIEW_DOMAIN', 'SANDBOX_AGENTS_ALLOWED_HOSTS', 'SANDBOX_AGENTS_TOKEN', 'LITELLM_PROXY_API_BASE', 'LITELLM_PROXY_API_KEY',
  'OPENAI_BASE_URL', 'OPENAI_API_KEY', 'SANDBOX_AGENTS_BASE_URL', 'SANDBOX_AGENTS_API_KEY', 'SANDBOX_AGENTS_PROJECT',
];

const HOST_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

export type Server = { url: string; proc: ChildProcess; dataDir: string; logPath: string };

/** A server of its own on a fresh data directory; `extraEnv` sets flags over the defaults. */
export async function startServer(fakeModelUrl: string, extraEnv: Record<string, string> = {}): Promise<Server> {
  const bin = process.env.SANDBOX_AGENTS_BIN || path.join(REPO_ROOT, 'target/debug/sandbox-agents');
  if (!existsSync(bin)) throw new Error(`${bin} does not exist: build it with cargo build -p sandbox-agents-server, or set SANDBOX_AGENTS_BIN`);
  // A short path: the embedded cluster's unix socket path must fit 107 bytes.
  const dataDir = mkdtempSync('/tmp/sa-web-');
  const logPath = `${dataDir}.log`;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !DROP.includes(k)) env[k] = v;
  Object.assign(env, {
    RUST_LOG: env.RUST_LOG ?? 'info',
    NO_COLOR: '1',
    LITELLM_PROXY_API_BASE: fakeModelUrl,
    LITELLM_PROXY_API_KEY: 'e2e',
    SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE: 'true',
    SANDBOX_AGENTS_WEBHOOK_RETRY_BASE_SECONDS: '0.2',
    SANDBOX_AGENTS_WEBHOOK_RETRY_MAX_SECONDS: '1',
    SANDBOX_AGENTS_WARM_POOL_SIZE: env.SANDBOX_AGENTS_WARM_POOL_SIZE ?? '1',
    // No server-wide disk limit, so the frequent check asks the engine for sizes only while a
    // session has a limit of its own (notebook.spec.ts stops one with it).
    SANDBOX_AGENTS_SANDBOX_DISK_MB: env.SANDBOX_AGENTS_SANDBOX_DISK_MB ?? '0',
    SANDBOX_AGENTS_SANDBOX_DISK_CHECK_SECONDS: env.SANDBOX_AGENTS_SANDBOX_DISK_CHECK_SECONDS ?? '2',
  });
  // Environment builds (pip and apt in Docker, as the python capability's built-in analysis
  // environment needs) trust the host's bundle, which holds the CA of a network that inspects
  // TLS, as an operator's --extra-ca-certs file would (tests/contract does the same).
  if (!env.SANDBOX_AGENTS_EXTRA_CA_CERTS && existsSync(HOST_CA_BUNDLE)) env.SANDBOX_AGENTS_EXTRA_CA_CERTS = HOST_CA_BUNDLE;
  Object.assign(env, extraEnv);
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const log = openSync(logPath, 'a');
    const proc = spawn(bin, ['serve', '--bind', `127.0.0.1:${port}`, '--preview-bind', '127.0.0.1:0', '--data-dir', dataDir], { stdio: ['ignore', log, log], env });
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 90_000;
    let exited = false;
    proc.once('exit', () => (exited = true));
    while (Date.now() < deadline && !exited) {
      try {
        const r = await fetch(`${url}/api/health`);
        if (r.ok) return { url, proc, dataDir, logPath };
      } catch {
        /* not yet */
      }
      await sleep(100);
    }
    if (!exited) {
      proc.kill('SIGKILL');
      throw new Error(`the server did not answer /api/health within 90 s\n${tail(logPath)}`);
    }
    if (!tail(logPath).includes('cannot listen')) break;
  }
  throw new Error(`the server exited before answering /api/health\n${tail(logPath)}`);
}

export function tail(file: string, lines = 60): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export async function stopServer(s: Server) {
  if (s.proc.exitCode === null) {
    s.proc.kill('SIGTERM');
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        s.proc.kill('SIGKILL');
        resolve();
      }, 30_000);
      s.proc.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
  // Sandboxes outlive a server process by design (the next one adopts them): `teardown`, with
  // the same data directory, stops what is left and removes the warm pool.
  const bin = process.env.SANDBOX_AGENTS_BIN || path.join(REPO_ROOT, 'target/debug/sandbox-agents');
  const code = await new Promise<number | null>((resolve) => {
    const log = openSync(s.logPath, 'a');
    const p = spawn(bin, ['teardown', '--data-dir', s.dataDir], { stdio: ['ignore', log, log], env: { ...process.env, NO_COLOR: '1' } });
    const t = setTimeout(() => {
      p.kill('SIGKILL');
      resolve(null);
    }, 120_000);
    p.once('exit', (c) => {
      clearTimeout(t);
      resolve(c);
    });
  });
  if (code !== 0) {
    console.error(`sandbox-agents teardown failed (${code}); containers may be left behind:\n${tail(s.logPath, 30)}`);
    return;
  }
  if (!process.env.SANDBOX_AGENTS_E2E_KEEP_DATA) {
    rmSync(s.dataDir, { recursive: true, force: true });
    rmSync(`${s.logPath}.key`, { force: true });
    rmSync(s.logPath, { force: true });
  }
}

/** Receives webhook deliveries and answers 200. */
export async function startWebhookReceiver(): Promise<{ url: string; server: http.Server; received: { headers: http.IncomingHttpHeaders; body: string }[] }> {
  const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${port}/hooks`, server, received };
}

export const UI_CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; worker-src 'self' blob:; font-src 'self' data:; frame-ancestors 'none'";
const SERVER_ROUTES = ['/api', '/docs', '/openapi.json', '/login', '/logout', '/recovery', '/settings', '/preview', '/mcp'];
const isServerRoute = (p: string) => SERVER_ROUTES.some((r) => p === r || p.startsWith(r + '/'));
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png', '.woff2': 'font/woff2', '.json': 'application/json' };

/**
 * The fallback for a server that does not serve the UI yet: web/dist on a port of its own, the
 * server's routes forwarded to it (WebSocket upgrades too, as a reverse proxy must). The forwarded request carries the server's own Host and no
 * Origin, so the server's cross-site guard sees a same-origin request, as it will once it
 * serves the UI itself.
 */
export async function startStaticProxy(target: string): Promise<{ url: string; server: http.Server }> {
  const dist = path.join(WEB_DIR, 'dist');
  if (!existsSync(path.join(dist, 'index.html'))) throw new Error('web/dist/index.html is missing: run npm run build first');
  const t = new URL(target);
  const forwarded = (req: http.IncomingMessage) => {
    const headers = { ...req.headers, host: t.host };
    delete headers.origin;
    delete headers['sec-fetch-site'];
    return { host: t.hostname, port: t.port, method: req.method, path: req.url, headers };
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (isServerRoute(url.pathname)) {
      const up = http.request(forwarded(req), (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      });
      up.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      req.pipe(up);
      res.on('close', () => up.destroy());
      return;
    }
    let file = path.join(dist, path.normalize(url.pathname).replace(/^(\.\.[/\\])+/, ''));
    if (!file.startsWith(dist) || !existsSync(file) || statSync(file).isDirectory()) file = path.join(dist, 'index.html');
    const headers: Record<string, string> = { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream' };
    // The policy the server puts on the UI, so a violation shows in this mode too.
    if (file.endsWith('index.html')) headers['Content-Security-Policy'] = UI_CSP;
    res.writeHead(200, headers);
    createReadStream(file).pipe(res);
  });
  // A WebSocket (the terminal) is an upgrade, which Node hands to this event and not to the
  // request handler: passed on as is, then the two sockets are joined both ways. The server's
  // refusal (a 4xx instead of 101) goes back as an ordinary answer.
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    if (!isServerRoute(new URL(req.url ?? '/', 'http://x').pathname)) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    const up = http.request(forwarded(req));
    const statusLine = (res: http.IncomingMessage) => `HTTP/1.1 ${res.statusCode} ${res.statusMessage}\r\n`;
    up.on('upgrade', (res, upSocket, upHead) => {
      socket.write(`${statusLine(res)}${res.rawHeaders.reduce((a, v, i) => a + (i % 2 ? `${v}\r\n` : `${v}: `), '')}\r\n`);
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      upSocket.pipe(socket).pipe(upSocket);
      upSocket.on('error', () => socket.destroy());
      socket.on('error', () => upSocket.destroy());
      socket.on('close', () => upSocket.destroy());
      upSocket.on('close', () => socket.destroy());
    });
    up.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        const type = res.headers['content-type'] ?? 'application/json';
        socket.end(Buffer.concat([Buffer.from(`${statusLine(res)}Content-Type: ${type}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`), body]));
      });
    });
    up.on('error', () => socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n'));
    socket.on('error', () => up.destroy());
    up.end();
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${port}`, server };
}
