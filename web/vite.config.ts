/// <reference types="vitest" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// In development the UI runs on Vite's server and the API on a sandbox-agents server of your
// own (SANDBOX_AGENTS_DEV_API, default http://127.0.0.1:8000). The server refuses
// state-changing requests whose Origin names another origin, so the proxy drops the browser's
// Origin and Sec-Fetch-Site headers: to the server the request then comes from its own origin.
const api = process.env.SANDBOX_AGENTS_DEV_API ?? 'http://127.0.0.1:8000';
// Whole path segments only: `/api` must not catch a client route such as `/api-keys`.
const serverRoutes = ['api', 'docs', 'openapi\\.json', 'login', 'logout', 'recovery', 'settings'].map((r) => `^/${r}(?:/|\\?|$)`);

export default defineConfig({
  plugins: [react()],
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
