// An agent's permissions (openapi.json's `Permission`, keyed by tool, group or subagent): which
// keys an agent has (as the server derives them from its capabilities, skills source,
// subagents and client tools, so the form offers exactly the keys it accepts), the form's rows
// and the body sent, the rules the server checks, and the summary an agent's page shows.
import type { Schemas } from '../api/client';
import { mcpServerKey, mcpToolName, parseMcpKey } from './mcp';

export type PermissionMode = Schemas['PermissionMode'];
export type Permission = Schemas['Permission'];
export type Permissions = Record<string, Permission>;

export const PERMISSION_MODES: readonly PermissionMode[] = ['allow', 'ask', 'deny'];

/** Most permissions an agent has, most prefixes `shell` has, and a prefix's most characters. */
export const MAX_PERMISSIONS = 200;
export const MAX_PREFIXES = 100;
export const MAX_PREFIX_CHARS = 200;

/** The tools of each group (a tool's own permission wins over its group's). */
export const GROUPS: Record<string, readonly string[]> = {
  filesystem: ['read_file', 'write_file', 'edit_file', 'list_files'],
  skills: ['load_skill'],
};

/** The group a tool's permission is also found under, if any: an MCP tool's is its server's
 * key (`mcp__github__create_issue` falls back to `mcp__github`, as the server resolves it). */
export function groupOf(tool: string): string | null {
  const fixed = Object.entries(GROUPS).find(([, tools]) => tools.includes(tool))?.[0];
  if (fixed) return fixed;
  const mcp = parseMcpKey(tool);
  return mcp?.tool ? mcpServerKey(mcp.server) : null;
}

/** What an agent has that a permission can name. */
export type AgentTools = {
  /** Its capabilities; null: the default set (shell and filesystem among them). */
  capabilities: readonly string[] | null;
  /** Whether it has a skills source (then `load_skill`, and the `skills` group). */
  skills: boolean;
  /** Its subagents (slug and mode), in order. */
  subagents: readonly { agent: string; mode?: string | null }[];
  /** Its client tools' names. */
  clientTools: readonly string[];
  /** Its MCP servers, each with the tools known of it (listed by the server, or named by a
   * permission already); their tools are offered only when a run lists them, so any may be unknown. */
  mcp?: readonly { server: string; tools: readonly string[] }[];
};

/** One thing a permission can name: a sandbox tool, a group of them, a subagent or a client tool. */
export type PermissionTarget = {
  key: string;
  kind: 'tool' | 'group' | 'subagent' | 'client' | 'mcp' | 'mcp_tool';
  /** What it is, for people. */
  description: string;
  /** The group whose permission applies when it has none of its own. */
  group: string | null;
  /** A handoff: it cannot wait for a person (allow or deny only). */
  handoff: boolean;
};

const TOOL_HELP: Record<string, string> = {
  shell: 'Commands in the sandbox.',
  filesystem: 'The four file tools, each unless it has a setting of its own.',
  read_file: 'Reads a file of the workspace.',
  write_file: 'Writes a file.',
  edit_file: 'Edits a file in place.',
  list_files: 'Lists a directory.',
  python: 'Cells in the session’s IPython kernel.',
  skills: 'Loading the skills source’s skills.',
  load_skill: 'Loads one skill.',
};

/**
 * Every key a permission may name for an agent with these tools, in the order the form shows
 * them: its sandbox tools (a group before its tools), its subagents, its client tools. As the
 * server derives them: no capabilities set means shell and filesystem; python only when named;
 * `load_skill` (and `skills`) with a skills source. A name is listed once (the first wins).
 */
export function permissionTargets(t: AgentTools): PermissionTarget[] {
  const has = (c: string) => t.capabilities === null || t.capabilities.includes(c);
  const out: PermissionTarget[] = [];
  const seen = new Set<string>();
  const add = (key: string, kind: PermissionTarget['kind'], description: string, extra: Partial<PermissionTarget> = {}) => {
    if (!key || seen.has(key)) return;
    seen.add(key);
    out.push({ key, kind, description, group: null, handoff: false, ...extra });
  };
  if (has('shell')) add('shell', 'tool', TOOL_HELP.shell);
  if (has('filesystem')) {
    add('filesystem', 'group', TOOL_HELP.filesystem);
    for (const tool of GROUPS.filesystem) add(tool, 'tool', TOOL_HELP[tool], { group: 'filesystem' });
  }
  if (t.capabilities?.includes('python')) add('python', 'tool', TOOL_HELP.python);
  if (t.skills) {
    add('skills', 'group', TOOL_HELP.skills);
    add('load_skill', 'tool', TOOL_HELP.load_skill, { group: 'skills' });
  }
  for (const s of t.subagents) {
    const handoff = s.mode === 'handoff';
    add(s.agent, 'subagent', handoff ? 'Subagent (handoff): it cannot wait for approval, so allow or deny it.' : 'Subagent (called as a tool).', { handoff });
  }
  for (const name of t.clientTools) add(name, 'client', 'Client tool: once approved, the call goes to the caller to answer.');
  for (const { server, tools } of t.mcp ?? []) {
    const key = mcpServerKey(server);
    add(key, 'mcp', `Every tool of the MCP server ${server}, each unless it has a setting of its own.`);
    for (const tool of tools) add(mcpToolName(server, tool), 'mcp_tool', `The tool ${tool} of the MCP server ${server}.`, { group: key });
  }
  return out;
}

/** A permission as the form holds it: its mode, and the prefixes kept whatever the mode (sent
 * only for `shell` under `ask`). */
export type PermissionRow = { mode: PermissionMode; allow_prefixes: string[] };
export type PermissionRows = Record<string, PermissionRow>;

export function permissionRowsOf(perms: Permissions | null | undefined): PermissionRows {
  const out: PermissionRows = {};
  for (const [key, p] of Object.entries(perms ?? {})) out[key] = { mode: p.mode, allow_prefixes: [...(p.allow_prefixes ?? [])] };
  return out;
}

/** Whether the prefixes of `key`'s row are sent (and checked): `shell` under `ask`. */
export function takesPrefixes(key: string, row: PermissionRow | undefined): boolean {
  return key === 'shell' && row?.mode === 'ask';
}

/** The mode a key's control shows: its own, else (for a tool of a group) null for "as its
 * group", else allow. */
export function shownMode(rows: PermissionRows, target: Pick<PermissionTarget, 'key' | 'group'>): PermissionMode | null {
  return rows[target.key]?.mode ?? (target.group ? null : 'allow');
}

/** The mode that applies to a key: its own, else its group's, else allow. */
export function effectiveMode(rows: PermissionRows, key: string): PermissionMode {
  const group = groupOf(key);
  return rows[key]?.mode ?? (group ? rows[group]?.mode : undefined) ?? 'allow';
}

/**
 * The rows with `key` set to `mode`; null (a tool of a group going back to its group's), or
 * `allow` on a key no group overrides, removes its entry (allow is the default). A key's
 * prefixes stay with its row while it is there.
 */
export function withMode(rows: PermissionRows, key: string, mode: PermissionMode | null): PermissionRows {
  const out = { ...rows };
  const grouped = groupOf(key) !== null;
  if (mode === null || (mode === 'allow' && !grouped && !(rows[key]?.allow_prefixes.length))) delete out[key];
  else out[key] = { mode, allow_prefixes: rows[key]?.allow_prefixes ?? [] };
  return out;
}

export function withPrefixes(rows: PermissionRows, key: string, prefixes: string[]): PermissionRows {
  const row = rows[key] ?? { mode: 'allow' as const, allow_prefixes: [] };
  return { ...rows, [key]: { ...row, allow_prefixes: prefixes } };
}

/** Entries for keys the agent no longer has (a capability or tool removed): kept in the form,
 * not sent. */
export function orphanKeys(rows: PermissionRows, targets: PermissionTarget[]): string[] {
  const keys = new Set(targets.map((t) => t.key));
  return Object.keys(rows).filter((k) => !keys.has(k));
}

/**
 * The `permissions` the server takes: the entries of keys the agent has, `allow_prefixes` on
 * `shell` under `ask` only (when there are any), an `allow` with nothing to override left out
 * unless the agent had it that way. `{}`: every tool allowed.
 */
export function permissionsBody(rows: PermissionRows, targets: PermissionTarget[]): Permissions {
  const keys = new Set(targets.map((t) => t.key));
  const out: Permissions = {};
  for (const [key, row] of Object.entries(rows)) {
    if (!keys.has(key)) continue;
    const p: Permission = { mode: row.mode };
    if (takesPrefixes(key, row) && row.allow_prefixes.length) p.allow_prefixes = [...row.allow_prefixes];
    out[key] = p;
  }
  return out;
}

/** The form's errors, keyed as the server's 422 names them (`permissions.<key>`,
 * `permissions.shell.allow_prefixes.<i>`). */
export function permissionErrors(rows: PermissionRows, targets: PermissionTarget[]): Record<string, string> {
  const e: Record<string, string> = {};
  const byKey = new Map(targets.map((t) => [t.key, t]));
  const sent = Object.keys(rows).filter((k) => byKey.has(k));
  if (sent.length > MAX_PERMISSIONS) e.permissions = `An agent has at most ${MAX_PERMISSIONS} permissions.`;
  for (const key of sent) {
    const row = rows[key];
    if (byKey.get(key)?.handoff && row.mode === 'ask') e[`permissions.${key}`] = 'A handoff cannot wait for approval: allow or deny it.';
    if (!takesPrefixes(key, row)) continue;
    if (row.allow_prefixes.length > MAX_PREFIXES) e[`permissions.${key}.allow_prefixes`] = `At most ${MAX_PREFIXES} prefixes.`;
    row.allow_prefixes.forEach((p, i) => {
      if (p.trim() === '') e[`permissions.${key}.allow_prefixes.${i}`] = 'Not blank: type a command’s start, or remove the row.';
      else if ([...p].length > MAX_PREFIX_CHARS) e[`permissions.${key}.allow_prefixes.${i}`] = `At most ${MAX_PREFIX_CHARS} characters.`;
    });
  }
  return e;
}

/** The permissions that are not allow (and an allow that overrides its group's), one line
 * each ("shell: ask (runs without asking: ls, git status)"),
 * in the order of `targets` when given (then any others). Empty: everything is allowed. */
export function permissionsSummary(perms: Permissions | null | undefined, targets: PermissionTarget[] = []): string[] {
  const all = perms ?? {};
  // An allow is said only where it overrides its group's ask or deny.
  const overrides = (key: string) => {
    const group = groupOf(key);
    return !!group && !!all[group] && all[group].mode !== 'allow';
  };
  const entries = Object.entries(all).filter(([key, p]) => p.mode !== 'allow' || overrides(key));
  const order = new Map(targets.map((t, i) => [t.key, i]));
  entries.sort(([a], [b]) => (order.get(a) ?? Infinity) - (order.get(b) ?? Infinity) || a.localeCompare(b));
  return entries.map(([key, p]) => {
    const prefixes = key === 'shell' && p.mode === 'ask' && p.allow_prefixes?.length ? ` (runs without asking: ${p.allow_prefixes.join(', ')})` : '';
    const group = GROUPS[key] ? ` (${GROUPS[key].join(', ')})` : '';
    const over = p.mode === 'allow' ? ` (over ${groupOf(key)}’s ${all[groupOf(key)!].mode})` : '';
    return `${key}${group}: ${p.mode}${prefixes}${over}`;
  });
}

/** The server's 422 on the permissions (`permissions…` keys of `fieldErrors`), each under its
 * key; what names no key of the form is under `permissions`. */
export function serverPermissionErrors(fieldErrors: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(fieldErrors).filter(([k]) => k === 'permissions' || k.startsWith('permissions.')));
}
