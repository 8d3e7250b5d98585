// The names MCP tools go by, as the server gives them to the model (domain/src/mcp.rs):
// `mcp__<server>__<tool>`, and `mcp__<server>` for every tool of a server in permissions.
// A server's name never holds `__` nor ends with `_`, so the first `__` after the prefix ends it.

export const MCP_PREFIX = 'mcp__';
/** A server's name: 1 to 24 ASCII letters, digits, `_` or `-`, without `__`, not ending with `_`. */
export const MCP_SERVER_NAME_RE = /^[A-Za-z0-9_-]{1,24}$/;

export function isMcpServerName(name: string): boolean {
  return MCP_SERVER_NAME_RE.test(name) && !name.includes('__') && !name.endsWith('_');
}

/** The permission key of every tool of a server. */
export const mcpServerKey = (server: string) => `${MCP_PREFIX}${server}`;

/** The name the model calls a server's tool by. */
export const mcpToolName = (server: string, tool: string) => `${MCP_PREFIX}${server}__${tool}`;

/** The server and tool a key names (`tool` null for a server's key), or null for a key that is not an MCP one. */
export function parseMcpKey(key: string): { server: string; tool: string | null } | null {
  if (!key.startsWith(MCP_PREFIX)) return null;
  const rest = key.slice(MCP_PREFIX.length);
  const at = rest.indexOf('__');
  const server = at < 0 ? rest : rest.slice(0, at);
  const tool = at < 0 ? null : rest.slice(at + 2);
  if (!isMcpServerName(server) || tool === '') return null;
  return { server, tool };
}

/** The tools of `server` that these permission keys name, in their order, each once. */
export function mcpToolsNamed(server: string, keys: Iterable<string>): string[] {
  const out: string[] = [];
  for (const key of keys) {
    const k = parseMcpKey(key);
    if (k?.server === server && k.tool && !out.includes(k.tool)) out.push(k.tool);
  }
  return out;
}

/** What keeps `key` from naming a tool of one of `servers` in a permission; null when nothing. */
export function mcpKeyProblem(key: string, servers: readonly string[]): string | null {
  const k = parseMcpKey(key);
  if (!k) return 'mcp__<server>__<tool>: the name the model calls the tool by.';
  if (!servers.includes(k.server)) return `The agent has no MCP server ${k.server} (it has ${servers.join(', ')}).`;
  if (k.tool === null) return 'That is the server’s key, listed above: name one of its tools after another __.';
  if (!/^[A-Za-z0-9_-]+$/.test(k.tool) || key.length > 64) return 'A tool’s name: letters, digits, _ or -, the whole key at most 64.';
  return null;
}
