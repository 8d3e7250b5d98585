/// <reference types="vitest" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';
import { compression, defineAlgorithm } from 'vite-plugin-compression2';
import { constants as zlib } from 'node:zlib';

// In development the UI runs on Vite's server and the API on a sandbox-agents server of your
// own (SANDBOX_AGENTS_DEV_API, default http://127.0.0.1:8000). The server refuses
// state-changing requests whose Origin names another origin, so the proxy drops the browser's
// Origin and Sec-Fetch-Site headers: to the server the request then comes from its own origin.
const api = process.env.SANDBOX_AGENTS_DEV_API ?? 'http://127.0.0.1:8000';
// Whole path segments only: `/api` must not catch a client route such as `/api-keys`.
const serverRoutes = ['api', 'docs', 'openapi\\.json', 'login', 'logout', 'recovery', 'settings', 'mcp'].map((r) => `^/${r}(?:/|\\?|$)`);

export default defineConfig({
  plugins: [
    react(),
    // A brotli and a gzip copy beside every text file of the build (name.br, name.gz; none
    // where it would not be smaller), at the highest levels: they are made once and sent on
    // every load. The server sends the copy the browser accepts (crates/api/src/ui.rs).
    compression({
      algorithms: [
        defineAlgorithm('brotliCompress', { params: { [zlib.BROTLI_PARAM_QUALITY]: zlib.BROTLI_MAX_QUALITY } }),
        defineAlgorithm('gzip', { level: 9 }),
      ],
      logLevel: 'silent',
    }),
  ],
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 900,
  },
  server: {
    proxy: Object.fromEntries(
      serverRoutes.map((route) => [
        route,
        {
          target: api,
          changeOrigin: true,
          // The session's terminal is a WebSocket.
          ws: true,
          configure: (proxy: any) => {
            for (const event of ['proxyReq', 'proxyReqWs']) {
              proxy.on(event, (req: any) => {
                req.removeHeader('origin');
                req.removeHeader('sec-fetch-site');
              });
            }
          },
        },
      ]),
    ),
  },
  test: {
    environment: 'jsdom',
    globals: false,
    setupFiles: ['src/test/setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    css: false,
  },
});
