// Every call of the API goes through the typed client (`api` in client.ts, openapi-fetch over
// the types generated from openapi/openapi.json), so an API change the UI does not follow fails
// the build instead of a page at run time. This reads the UI's sources and fails on a call made
// around it: `fetch(`, `new Request(`, `XMLHttpRequest`, `EventSource`, a WebSocket, or a URL
// string that starts with `/api/` other than the path of a typed call. The few that cannot go
// through the client are allowed below, each for the kinds it needs and with the reason.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

type Kind = 'fetch' | 'Request' | 'XMLHttpRequest' | 'EventSource' | 'WebSocket' | 'api URL';

const RULES: [Kind, RegExp][] = [
  // The global fetch, called or passed on (`fetch(`, `globalThis.fetch(`, `fetch.bind(…)`);
  // not `refetch(`, `fetchQuery(`, `q.fetch(` or an option named `fetch:`.
  ['fetch', /(?:\b(?:globalThis|window|self)\s*\.\s*|(?<![\w$.]))fetch\b(?!\s*\??:)/g],
  ['Request', /\bnew\s+Request\s*\(/g],
  ['XMLHttpRequest', /\bnew\s+XMLHttpRequest\b/g],
  ['EventSource', /\bnew\s+EventSource\b/g],
  ['WebSocket', /\bnew\s+WebSocket\s*\(/g],
  // A string or template that starts with `/api/`, unless it is the path of a typed call
  // (`api.GET('/api/agents/{ref}', …)`, removed before this runs).
  ['api URL', /['"`]\/api\//g],
];

/** Files that may make such calls, each for the kinds it needs and why the client cannot. */
const ALLOWED: Record<string, { kinds: Kind[]; why: string }> = {
  'api/client.ts': {
    kinds: ['fetch'],
    why: 'The typed client itself: the fetch under openapi-fetch.',
  },
  'features/sessions/events/sse.ts': {
    kinds: ['fetch', 'api URL'],
    why: 'The event stream (SSE): read frame by frame as it arrives, aborted and resumed from a cursor. EventSource cannot send X-Project, and the typed client answers with the whole body.',
  },
  'features/sessions/terminal/socket.ts': {
    kinds: ['api URL'],
    why: "The terminal's WebSocket URL: a browser puts no headers on a WebSocket, so the URL carries the project; the typed client does not speak WebSocket.",
  },
  'features/sessions/terminal/PtyTerminal.tsx': {
    kinds: ['WebSocket'],
    why: 'The terminal is a WebSocket (GET /api/sessions/{id}/terminal, upgraded).',
  },
};

// This file lives in src/api/.
const SRC = join(__dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    if (!/\.(ts|tsx)$/.test(name) || /\.test\.tsx?$/.test(name) || name.endsWith('.d.ts')) return [];
    return [path];
  });
}

/** Comments out, and the path strings of typed calls (`api.GET('/api/...'`) out. */
function code(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:'"`\w\\])\/\/.*$/gm, '$1')
    .replace(/\bapi\s*\.\s*(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s*\(\s*(['"`])\/api\/[^'"`]*\1/g, 'api.CALL(PATH');
}

/** Each call around the typed client in `text`: its kind and line. */
function adHocCalls(text: string): { kind: Kind; line: number }[] {
  const stripped = code(text);
  const found: { kind: Kind; line: number }[] = [];
  for (const [kind, re] of RULES) {
    for (const m of stripped.matchAll(re)) {
      found.push({ kind, line: stripped.slice(0, m.index).split('\n').length });
    }
  }
  return found;
}

describe('no page calls the API outside the typed client', () => {
  const files = sources(SRC).map((path) => relative(SRC, path).split(sep).join('/'));

  it('finds the sources it checks', () => {
    expect(files).toContain('features/usage/usageApi.ts');
    expect(files.length).toBeGreaterThan(50);
  });

  it('every call is typed, or allowed with its reason', () => {
    const offences = files.flatMap((file) => {
      const allowed = ALLOWED[file]?.kinds ?? [];
      return adHocCalls(readFileSync(join(SRC, file), 'utf8'))
        .filter((c) => !allowed.includes(c.kind))
        .map((c) => `${file}:${c.line}: ${c.kind} (use api.GET/POST/… from api/client.ts, or allow it in no-adhoc-api.test.ts with the reason)`);
    });
    expect(offences).toEqual([]);
  });

  it('every allowance is still needed', () => {
    const unused = Object.entries(ALLOWED).flatMap(([file, { kinds }]) => {
      const seen = files.includes(file) ? adHocCalls(readFileSync(join(SRC, file), 'utf8')).map((c) => c.kind) : [];
      return kinds.filter((k) => !seen.includes(k)).map((k) => `${file}: ${k}`);
    });
    expect(unused).toEqual([]);
  });

  it('catches what the usage page once did, and lets typed calls and prose be', () => {
    const old = "const q = new URLSearchParams({ from });\nconst r = await apiFetch(`/api/usage?${q}`);\nawait fetch('/api/x');";
    expect(adHocCalls(old)).toEqual([
      { kind: 'fetch', line: 3 },
      { kind: 'api URL', line: 2 },
      { kind: 'api URL', line: 3 },
    ]);
    expect(adHocCalls("unwrap(api.GET('/api/usage', { params }));\n// GET /api/usage with fetch('/api/usage')\nq.refetch();\nconst u = 'http://x/y';\ncreateClient({ fetch: f });")).toEqual([]);
    expect(adHocCalls('new XMLHttpRequest(); new Request(url); new EventSource(u); window.fetch(u); const f = fetch.bind(globalThis)').map((c) => c.kind)).toEqual([
      'fetch',
      'fetch',
      'Request',
      'XMLHttpRequest',
      'EventSource',
    ]);
  });
});
