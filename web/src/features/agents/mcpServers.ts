// An agent's MCP servers as the MCP servers tab holds them: one row per server, its conversion
// to and from openapi.json's McpServer, the command's words as one line of shell-like text,
// and the checks of domain/src/mcp.rs the form can make before the server does. Errors are
// keyed as the server's 422 names them (`mcp_servers.0.url`), finer where the form can be
// (`mcp_servers.0.headers.1.name`, the server says `mcp_servers.0.headers`).
import type { Schemas } from '../../api/client';
import { ENV_RE } from '../../lib/rules';
import { isMcpServerName, mcpToolName } from '../../lib/mcp';

export type McpServer = Schemas['McpServer'];
export type McpServerStatus = Schemas['McpServerStatus'];
export type McpKind = 'remote' | 'sandbox';

export const MAX_SERVERS = 16;
export const MAX_HEADERS = 32;
export const MAX_TIMEOUT_SECONDS = 600;
export const DEFAULT_TIMEOUT_SECONDS = 60;
export const DEFAULT_FORMAT = '{value}';

/** A header: plain text, or a project secret's value put in `format`. Both kinds' fields are
 * kept while the kind is switched; only the chosen one is sent. */
export type HeaderRow = { name: string; kind: 'text' | 'secret'; value: string; secret: string; format: string };
export type EnvRow = { key: string; value: string };

/** One server. Both kinds' fields are kept while the kind is switched; only the chosen kind's are sent. */
export type McpServerRow = {
  name: string;
  kind: McpKind;
  url: string;
  headers: HeaderRow[];
  /** The command's words as one line, quoted as a shell would (`splitCommand`). */
  command: string;
  env: EnvRow[];
  /** Every tool offered (`allowed_tools: null`), else only `allowedTools`. */
  allTools: boolean;
  allowedTools: string[];
  required: boolean;
  /** Seconds, as typed; '' for the default (60). */
  timeout: string;
};

export function emptyServerRow(): McpServerRow {
  return { name: '', kind: 'remote', url: '', headers: [], command: '', env: [], allTools: true, allowedTools: [], required: false, timeout: '' };
}

export function emptyHeaderRow(): HeaderRow {
  return { name: '', kind: 'text', value: '', secret: '', format: DEFAULT_FORMAT };
}

/**
 * The words of a command typed on one line: split at unquoted whitespace; '…' keeps its text
 * as is, "…" and a bare backslash escape the next character. Null when a quote is not closed.
 */
export function splitCommand(text: string): string[] | null {
  const words: string[] = [];
  let word: string | null = null;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && i + 1 < text.length && (text[i + 1] === '"' || text[i + 1] === '\\')) word += text[++i];
      else word += c;
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === '\\' && i + 1 < text.length) {
      word = (word ?? '') + text[++i];
    } else word = (word ?? '') + c;
  }
  if (quote) return null;
  if (word !== null) words.push(word);
  return words;
}

/** Words as one line that `splitCommand` reads back to the same words. */
export function joinCommand(words: readonly string[]): string {
  return words.map((w) => (w !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export function serverRowOf(s: McpServer): McpServerRow {
  return {
    name: s.name,
    kind: s.command != null ? 'sandbox' : 'remote',
    url: s.url ?? '',
    headers: Object.entries(s.headers ?? {}).map(([name, h]) =>
      typeof h === 'string' ? { ...emptyHeaderRow(), name, value: h } : { ...emptyHeaderRow(), name, kind: 'secret', secret: h.secret, format: h.format ?? DEFAULT_FORMAT },
    ),
    command: joinCommand(s.command ?? []),
    env: Object.entries(s.env ?? {}).map(([key, value]) => ({ key, value })),
    allTools: s.allowed_tools == null,
    allowedTools: [...(s.allowed_tools ?? [])],
    required: !!s.required,
    timeout: s.timeout_seconds == null ? '' : String(s.timeout_seconds),
  };
}

/** The server as the API takes it; call only on rows `mcpServerErrors` passes. */
export function serverBody(r: McpServerRow): McpServer {
  const common = {
    name: r.name.trim(),
    allowed_tools: r.allTools ? null : r.allowedTools,
    required: r.required,
    timeout_seconds: r.timeout.trim() === '' ? null : Number(r.timeout),
  };
  if (r.kind === 'sandbox') return { ...common, command: splitCommand(r.command) ?? [], env: Object.fromEntries(r.env.map((e) => [e.key, e.value])) };
  return {
    ...common,
    url: r.url.trim(),
    headers: Object.fromEntries(r.headers.map((h) => [h.name.trim(), h.kind === 'text' ? h.value : { secret: h.secret, format: h.format }])),
  };
}

const HEADER_NAME_RE = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,256}$/;
/** Headers the transport sets itself (RESERVED_HEADERS of domain/src/mcp.rs). */
const RESERVED_HEADERS = ['host', 'content-length', 'content-type', 'accept', 'connection', 'transfer-encoding', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'];

/** Every error of the rows at once, keyed as the server's 422 (finer for headers and env). */
export function mcpServerErrors(rows: McpServerRow[]): Record<string, string> {
  const e: Record<string, string> = {};
  if (rows.length > MAX_SERVERS) e.mcp_servers = `An agent has at most ${MAX_SERVERS} MCP servers.`;
  const names = new Set<string>();
  rows.forEach((r, i) => {
    const k = (f: string) => `mcp_servers.${i}.${f}`;
    const name = r.name.trim();
    if (!isMcpServerName(name)) e[k('name')] = '1 to 24 letters, digits, _ or -, without __, not ending with _.';
    else if (names.has(name.toLowerCase())) e[k('name')] = 'Another server has this name.';
    names.add(name.toLowerCase());
    if (r.kind === 'remote') {
      const url = r.url.trim();
      if (!/^https?:\/\/\S+$/.test(url)) e[k('url')] = 'An http:// or https:// address (the server’s endpoint, e.g. https://example.com/mcp).';
      else if (url.length > 2048) e[k('url')] = 'At most 2048 characters.';
      if (r.headers.length > MAX_HEADERS) e[k('headers')] = `At most ${MAX_HEADERS} headers.`;
      const headerNames = new Set<string>();
      r.headers.forEach((h, j) => {
        const hk = (f: string) => k(`headers.${j}.${f}`);
        const hn = h.name.trim();
        if (!HEADER_NAME_RE.test(hn)) e[hk('name')] = 'A header’s name: letters, digits and - (no spaces).';
        else if (RESERVED_HEADERS.includes(hn.toLowerCase())) e[hk('name')] = 'The transport sets this header itself.';
        else if (headerNames.has(hn.toLowerCase())) e[hk('name')] = 'Another header has this name.';
        headerNames.add(hn.toLowerCase());
        if (h.kind === 'secret') {
          if (!ENV_RE.test(h.secret)) e[hk('secret')] = 'Choose a secret of the project.';
          if (!h.format.includes('{value}')) e[hk('format')] = 'Must contain {value}, where the secret goes.';
        } else if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(h.value)) e[hk('value')] = 'No control characters.';
      });
    } else {
      const words = splitCommand(r.command);
      if (words === null) e[k('command')] = 'A quote is not closed.';
      else if (words.length === 0 || words[0].trim() === '') e[k('command')] = 'The program, then its arguments (npx -y @modelcontextprotocol/server-everything).';
      else if (words.length > 64) e[k('command')] = 'At most 64 words.';
      const keys = new Set<string>();
      r.env.forEach((v, j) => {
        if (!ENV_RE.test(v.key)) e[k(`env.${j}.key`)] = 'Letters, digits and _, not starting with a digit.';
        else if (keys.has(v.key)) e[k(`env.${j}.key`)] = 'Duplicate variable.';
        keys.add(v.key);
      });
    }
    if (!r.allTools) {
      const bad = r.allowedTools.find((t) => !/^[A-Za-z0-9_-]+$/.test(t) || mcpToolName(name, t).length > 64);
      if (bad !== undefined) e[k('allowed_tools')] = `“${bad}”: the model takes ${mcpToolName(name || '<name>', bad)} only as 1 to 64 letters, digits, _ or -.`;
    }
    if (r.timeout.trim() !== '') {
      const n = Number(r.timeout);
      if (!Number.isInteger(n) || n < 1 || n > MAX_TIMEOUT_SECONDS) e[k('timeout_seconds')] = `Whole seconds, 1 to ${MAX_TIMEOUT_SECONDS} (empty: ${DEFAULT_TIMEOUT_SECONDS}).`;
    }
  });
  return e;
}

/** The messages at `key` and under it (`mcp_servers.0.command` takes `mcp_servers.0.command.3`'s), joined. */
export function errorsAt(errors: Record<string, string>, key: string): string | undefined {
  const found = Object.entries(errors)
    .filter(([k]) => k === key || k.startsWith(`${key}.`))
    .map(([, m]) => m);
  return found.length ? found.join(' ') : undefined;
}

/** The errors no field of a row shows: the list's, a whole row's, or a field the form has no input for. */
export function errorsElsewhere(errors: Record<string, string>, rows: number): [string, string][] {
  const FIELDS = ['name', 'url', 'headers', 'command', 'env', 'allowed_tools', 'timeout_seconds', 'required'];
  return Object.entries(errors).filter(([k]) => {
    const m = /^mcp_servers\.(\d+)\.([a-z_]+)/.exec(k);
    return !m || Number(m[1]) >= rows || !FIELDS.includes(m[2]);
  });
}

/** The status the server found for the server of this name (a saved one), if listed. */
export function statusOf(statuses: McpServerStatus[] | undefined, name: string): McpServerStatus | undefined {
  return statuses?.find((s) => s.name === name);
}
