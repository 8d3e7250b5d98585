// The sessions page's first load in bytes on the wire (docs/benchmarks.md reports it): what
// Chromium receives with an empty cache, and what the same files cost with each
// Accept-Encoding the server may answer (none, gzip, brotli), read raw over HTTP/1.1.
import { expect, test, type Request } from '@playwright/test';
import http from 'node:http';

/** A GET read raw (no decoding): body bytes, header bytes and the Content-Encoding. */
function raw(url: string, acceptEncoding: string | null): Promise<{ body: number; headers: number; encoding: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (acceptEncoding) headers['Accept-Encoding'] = acceptEncoding;
    http
      .get(url, { headers }, (res) => {
        let body = 0;
        res.on('data', (c: Buffer) => (body += c.length));
        res.on('end', () => {
          const head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage}\r\n${res.rawHeaders.reduce((s, v, i) => s + (i % 2 ? `${v}\r\n` : `${v}: `), '')}\r\n`;
          resolve({ body, headers: Buffer.byteLength(head), encoding: String(res.headers['content-encoding'] ?? 'identity') });
        });
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

const kb = (n: number) => `${n} B (${(n / 1024).toFixed(1)} KB)`;

test('the sessions page first load, in bytes on the wire', async ({ page }) => {
  // The static proxy mode (SANDBOX_AGENTS_E2E_PROXY=1) serves web/dist itself, uncompressed:
  // only the server's own answers say what a person's browser gets.
  test.skip(process.env.SANDBOX_AGENTS_E2E_PROXY === '1', 'measures the server, not the harness');
  const done: Request[] = [];
  page.on('requestfinished', (r) => done.push(r));
  await page.goto(`${process.env.E2E_UI_URL}/sessions`);
  await expect(page.getByRole('heading', { name: 'Sessions' })).toBeVisible();
  await page.waitForLoadState('networkidle');

  const rows = await Promise.all(
    done.map(async (r) => {
      const s = await r.sizes();
      const res = await r.response();
      return { url: r.url(), acceptEncoding: (await r.allHeaders())['accept-encoding'] ?? '', encoding: res?.headers()['content-encoding'] ?? 'identity', wire: s.responseBodySize + s.responseHeadersSize };
    }),
  );
  const ui = rows.filter((r) => !new URL(r.url).pathname.startsWith('/api/'));
  const browserTotal = rows.reduce((a, r) => a + r.wire, 0);
  const browserUi = ui.reduce((a, r) => a + r.wire, 0);
  const lines = [
    `Chromium (Accept-Encoding: ${ui[0]?.acceptEncoding}): ${rows.length} requests, ${kb(browserTotal)} on the wire; the UI's ${ui.length} files ${kb(browserUi)} (${[...new Set(ui.map((r) => r.encoding))].join(', ')})`,
  ];
  const totals: Record<string, number> = {};
  for (const accept of [null, 'gzip', 'br, gzip']) {
    let total = 0;
    for (const r of ui) {
      const got = await raw(r.url, accept);
      total += got.body + got.headers;
    }
    totals[accept ?? 'none'] = total;
    lines.push(`the UI's files with Accept-Encoding ${accept ? `"${accept}"` : 'absent'}: ${kb(total)}`);
  }
  const report = lines.join('\n');
  console.log(report);
  await test.info().attach('first load', { body: report, contentType: 'text/plain' });
  // Sent compressed when asked: a regression to uncompressed files would triple the load.
  expect(totals['br, gzip']).toBeLessThan(totals.none / 2);
  expect(browserUi).toBeLessThan(totals.none / 2);
});
