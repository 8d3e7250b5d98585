// The agent form's values, their conversion to and from the API's shapes, and validation with
// the rules of openapi.json's AgentCreate (patterns, lengths, ranges), so the form says what
// is wrong before the server does. The server's 422 is still shown as it says it.
import type { Agent, AgentCreate, ClientTool } from '../../api/client';
import { budgetBody, budgetValuesOf, emptyBudget, validateBudget, type BudgetValues } from '../../lib/budget';
import { defaultPolicy, policyBody, policyOf, samePolicy, type NetworkPolicy } from '../../lib/network';
import { ENV_RE, SANDBOX_TOOLS, SLUG_RE, TOOL_NAME_RE, validateEntryPath } from '../../lib/rules';
import { permissionErrors, permissionRowsOf, permissionsBody, permissionTargets, type AgentTools, type PermissionRows, type Permissions } from '../../lib/permissions';
import { mcpToolsNamed } from '../../lib/mcp';
import { bindingBody, bindingErrors, bindingRowOf, type BindingRow } from '../../lib/secretBindings';
import { ENTRY_FIELDS, SKILLS_FIELDS, entriesObject, entryRowErrors, entryRowsOf, isObject, parseEntries, specProblems, type EntryRow } from './structured';

export const CAPABILITIES = ['shell', 'filesystem', 'compaction', 'memory', 'skills', 'python'] as const;
/** One line on what each capability gives the agent, for the form's picker. */
export const CAPABILITY_HELP: Record<(typeof CAPABILITIES)[number], string> = {
  shell: 'the shell tool: commands in the sandbox',
  filesystem: 'read_file, write_file, edit_file and list_files',
  compaction: 'kept in definitions; not run yet',
  memory: 'the agent’s memory (its Memory tab) under memories/, merged back when a session stops',
  skills: 'the skills source’s skills announced to the model (load_skill for lazy sources)',
  python: 'a python tool: cells in a persistent IPython kernel, kept in the session’s Notebook tab',
};
export const TRANSPORTS = ['proxy', 'litellm', 'openai'] as const;
export const EFFORTS = ['none', 'low', 'medium', 'high', 'xhigh', 'max'] as const;

export type ToolRow = {
  name: string;
  description: string;
  deferrable: boolean;
  timeout_seconds: string;
  parameters: string; // JSON text
};

export type SubagentRow = {
  agent: string;
  mode: 'tool' | 'handoff';
  tool_name: string; // '' = the default name
  description: string; // '' = the subagent's own
};

export type AgentFormValues = {
  slug: string;
  name: string;
  description: string;
  instructions: string;
  transport: string;
  model: string;
  reasoning_effort: string;
  image: string;
  defaultCapabilities: boolean;
  capabilities: string[];
  exposed_ports: string;
  idle_ttl_seconds: string;
  subagent_max_steps: string; // '' for the default (10)
  environment_id: string;
  runtime_class: string; // '' for the environment's, else the server's default
  env: { key: string; value: string }[];
  entries: EntryRow[]; // the manifest's entries, one row each
  entriesJson: string | null; // the advanced view's text while it is shown (then it is what counts)
  client_tools: ToolRow[];
  secret_bindings: BindingRow[];
  subagents: SubagentRow[];
  skills_source: string; // JSON object or ''
  workspace_source: string; // JSON object or ''
  /** The egress policy; its entries are checked by the server (the editor shows its rules as hints). */
  network: NetworkPolicy;
  /** The default budget of its sessions (copied when one is created without its own); all empty: none. */
  budget: BudgetValues;
  /** Allow, ask or deny per tool, group or subagent (no entry: allow, or its group's). */
  permissions: PermissionRows;
  /** The names of its MCP servers, for the permissions that name them: read only here (the
   * agent's MCP servers tab edits them), and never sent by this form. */
  mcpServers: string[];
};

export function emptyAgentForm(): AgentFormValues {
  return {
    slug: '',
    name: '',
    description: '',
    instructions: '',
    transport: 'proxy',
    model: '',
    reasoning_effort: '',
    image: '',
    defaultCapabilities: true,
    capabilities: ['shell', 'filesystem'],
    exposed_ports: '',
    idle_ttl_seconds: '',
    subagent_max_steps: '',
    environment_id: '',
    runtime_class: '',
    env: [],
    entries: [],
    entriesJson: null,
    client_tools: [],
    secret_bindings: [],
    subagents: [],
    skills_source: '',
    workspace_source: '',
    network: defaultPolicy(),
    budget: emptyBudget(),
    permissions: {},
    mcpServers: [],
  };
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

export function formFromAgent(a: Agent): AgentFormValues {
  return {
    slug: a.slug,
    name: a.name,
    description: a.description,
    instructions: a.instructions,
    transport: (a.transport as string) ?? 'proxy',
    model: a.model ?? '',
    reasoning_effort: (a.reasoning_effort as string | null) ?? '',
    image: a.image ?? '',
    defaultCapabilities: a.capabilities == null,
    capabilities: (a.capabilities as string[] | null) ?? ['shell', 'filesystem'],
    exposed_ports: (a.exposed_ports ?? []).join(', '),
    idle_ttl_seconds: a.idle_ttl_seconds == null ? '' : String(a.idle_ttl_seconds),
    subagent_max_steps: a.subagent_max_steps == null ? '' : String(a.subagent_max_steps),
    environment_id: a.environment_id ?? '',
    runtime_class: a.runtime_class ?? '',
    env: Object.entries(a.manifest?.environment ?? {}).map(([key, value]) => ({ key, value: String(value) })),
    entries: entryRowsOf((a.manifest?.entries ?? {}) as Record<string, unknown>),
    entriesJson: null,
    client_tools: (a.client_tools ?? []).map((t) => ({
      name: t.name,
      description: t.description ?? '',
      deferrable: !!t.deferrable,
      timeout_seconds: t.timeout_seconds == null ? '' : String(t.timeout_seconds),
      parameters: pretty(t.parameters ?? {}),
    })),
    secret_bindings: (a.secret_bindings ?? []).map(bindingRowOf),
    subagents: (a.subagents ?? []).map((x) => ({
      agent: x.agent,
      mode: x.mode === 'handoff' ? 'handoff' : 'tool',
      tool_name: x.tool_name ?? '',
      description: x.description ?? '',
    })),
    skills_source: a.skills_source ? pretty(a.skills_source) : '',
    workspace_source: a.workspace_source ? pretty(a.workspace_source) : '',
    network: policyOf(a.network),
    budget: budgetValuesOf(a.budget),
    permissions: permissionRowsOf(a.permissions as Permissions | undefined),
    mcpServers: (a.mcp_servers ?? []).map((m) => m.name),
  };
}

export type Errors = Record<string, string>;

/** What the agent in the form has that a permission can name (as the server derives it). */
export function toolsOfForm(
  v: Pick<AgentFormValues, 'defaultCapabilities' | 'capabilities' | 'skills_source' | 'subagents' | 'client_tools'> & Partial<Pick<AgentFormValues, 'mcpServers' | 'permissions'>>,
): AgentTools {
  return {
    capabilities: v.defaultCapabilities ? null : v.capabilities,
    skills: v.skills_source.trim() !== '',
    subagents: v.subagents.filter((x) => x.agent !== '').map((x) => ({ agent: x.agent, mode: x.mode })),
    clientTools: v.client_tools.map((t) => t.name).filter((n) => n !== ''),
    mcp: mcpOf(v.mcpServers ?? [], Object.keys(v.permissions ?? {})),
  };
}

/** Each MCP server with the tools its permission keys name (the server lists the rest). */
function mcpOf(servers: readonly string[], keys: string[]): NonNullable<AgentTools['mcp']> {
  return servers.map((server) => ({ server, tools: mcpToolsNamed(server, keys) }));
}

/** `tools` with the tools each MCP server listed (`GET …/mcp-servers`) added after those known. */
export function withListedMcpTools(tools: AgentTools, listed: readonly { name: string; tools?: { name: string }[] | null }[] | undefined): AgentTools {
  if (!listed?.length) return tools;
  return {
    ...tools,
    mcp: (tools.mcp ?? []).map(({ server, tools: known }) => {
      const more = listed.find((s) => s.name === server)?.tools?.map((t) => t.name) ?? [];
      return { server, tools: [...known, ...more.filter((t) => !known.includes(t))] };
    }),
  };
}

/** What a stored agent has that a permission can name. */
export function toolsOfAgent(a: Agent): AgentTools {
  return {
    capabilities: (a.capabilities as string[] | null | undefined) ?? null,
    skills: a.skills_source != null,
    subagents: (a.subagents ?? []).map((x) => ({ agent: x.agent, mode: x.mode ?? 'tool' })),
    clientTools: (a.client_tools ?? []).map((t) => t.name),
    mcp: mcpOf((a.mcp_servers ?? []).map((m) => m.name), Object.keys(a.permissions ?? {})),
  };
}

const blank = (s: string) => s.trim() === '';

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: `not valid JSON: ${(e as Error).message}` };
  }
}

/** The manifest's entries as the form holds them: the rows, or the advanced view's JSON
 * while it is shown. */
export function entriesOf(v: Pick<AgentFormValues, 'entries' | 'entriesJson'>): { ok: true; value: Record<string, unknown> } | { ok: false; error: string } {
  if (v.entriesJson === null) return entriesObject(v.entries);
  const parsed = parseEntries(v.entriesJson);
  return parsed.ok ? entriesObject(parsed.value) : parsed;
}

/** Every field error at once, keyed by field (`client_tools.0.name` for nested rows). */
export function validateAgentForm(v: AgentFormValues, opts: { selfSlug?: string } = {}): Errors {
  const e: Errors = {};
  if (!SLUG_RE.test(v.slug)) e.slug = 'Lowercase letters, digits and -, starting with a letter or digit; at most 63 characters.';
  if (blank(v.name)) e.name = 'Required.';
  else if (v.name.length > 200) e.name = 'At most 200 characters.';
  if (v.description.length > 4000) e.description = 'At most 4000 characters.';
  if (!TRANSPORTS.includes(v.transport as (typeof TRANSPORTS)[number])) e.transport = 'proxy, litellm or openai.';
  if (v.model !== '' && blank(v.model)) e.model = 'Leave empty for the default, or name a model.';
  if (v.image !== '' && blank(v.image)) e.image = 'Leave empty for the default image.';
  if (v.environment_id !== '' && blank(v.environment_id)) e.environment_id = 'Leave empty for the default.';
  if (v.idle_ttl_seconds.trim() !== '') {
    const n = Number(v.idle_ttl_seconds);
    if (!Number.isInteger(n) || n < 0) e.idle_ttl_seconds = 'A whole number of seconds, 0 or more (0: never released).';
  }
  if (v.subagent_max_steps.trim() !== '') {
    const n = Number(v.subagent_max_steps);
    if (!Number.isInteger(n) || n < 1 || n > 100) e.subagent_max_steps = 'A whole number of steps, 1 to 100 (empty: 10).';
  }
  if (v.exposed_ports.trim() !== '') {
    const bad = v.exposed_ports
      .split(/[\s,]+/)
      .filter(Boolean)
      .filter((p) => !/^\d+$/.test(p) || Number(p) < 1 || Number(p) > 65535);
    if (bad.length) e.exposed_ports = `Ports are 1 to 65535: ${bad.join(', ')}.`;
  }
  const envKeys = new Set<string>();
  v.env.forEach((row, i) => {
    if (!ENV_RE.test(row.key)) e[`env.${i}.key`] = 'Letters, digits and _, not starting with a digit.';
    else if (envKeys.has(row.key)) e[`env.${i}.key`] = 'Duplicate variable.';
    envKeys.add(row.key);
  });
  if (v.entriesJson === null) Object.assign(e, entryRowErrors(v.entries));
  else {
    const entries = parseEntries(v.entriesJson);
    if (!entries.ok) e.entries = entries.error;
    else {
      for (const { path, spec } of entries.value) {
        const pe = validateEntryPath(path);
        const problem = pe ?? specProblems(spec, ENTRY_FIELDS)[0]?.[1];
        if (problem) {
          e.entries = `"${path}": ${problem}`;
          break;
        }
      }
    }
  }
  const names = new Set<string>();
  v.client_tools.forEach((t, i) => {
    if (!TOOL_NAME_RE.test(t.name)) e[`client_tools.${i}.name`] = '1 to 64 letters, digits, _ or -.';
    else if (SANDBOX_TOOLS.includes(t.name)) e[`client_tools.${i}.name`] = 'That is a sandbox tool’s name.';
    else if (t.name === 'python' && !v.defaultCapabilities && v.capabilities.includes('python')) e[`client_tools.${i}.name`] = 'That is the python capability’s tool.';
    else if (names.has(t.name)) e[`client_tools.${i}.name`] = 'Duplicate tool name.';
    names.add(t.name);
    if (t.timeout_seconds.trim() !== '') {
      const n = Number(t.timeout_seconds);
      if (t.deferrable) e[`client_tools.${i}.timeout_seconds`] = 'A deferrable tool takes no timeout.';
      else if (!(n > 0 && n <= 3600)) e[`client_tools.${i}.timeout_seconds`] = 'More than 0 and at most 3600 seconds.';
    }
    const p = parseJson(t.parameters || '{}');
    if (!p.ok) e[`client_tools.${i}.parameters`] = p.error;
    else if (!isObject(p.value)) e[`client_tools.${i}.parameters`] = 'The JSON Schema must be an object.';
  });
  Object.assign(e, bindingErrors(v.secret_bindings));
  const named = new Set<string>();
  v.subagents.forEach((x, i) => {
    if (!SLUG_RE.test(x.agent)) e[`subagents.${i}.agent`] = 'Choose another agent of the project.';
    else if (opts.selfSlug && x.agent === opts.selfSlug) e[`subagents.${i}.agent`] = 'An agent cannot be its own subagent.';
    const name = x.tool_name.trim() || (x.mode === 'handoff' ? `transfer_to_${x.agent}` : x.agent);
    if (x.tool_name.trim() && !TOOL_NAME_RE.test(x.tool_name.trim())) e[`subagents.${i}.tool_name`] = 'Letters, digits, _ and -, at most 64.';
    else if (x.agent && named.has(name)) e[`subagents.${i}.tool_name`] = `Another subagent is already called ${name}.`;
    named.add(name);
  });
  Object.assign(e, validateBudget(v.budget));
  Object.assign(e, permissionErrors(v.permissions, permissionTargets(toolsOfForm(v))));
  for (const field of ['skills_source', 'workspace_source'] as const) {
    if (v[field].trim() === '') continue;
    const p = parseJson(v[field]);
    if (!p.ok) e[field] = p.error;
    else if (!isObject(p.value)) e[field] = 'An object, or empty for none.';
    else if (field === 'skills_source') {
      const problem = specProblems(p.value, SKILLS_FIELDS)[0];
      if (problem) e[field] = problem[1];
    }
  }
  return e;
}

const orNull = (s: string) => (s.trim() === '' ? null : s.trim());

/** The body for POST (and, with `version`, PATCH): every field, lists replacing. */
export function agentBody(v: AgentFormValues): AgentCreate {
  const tools: ClientTool[] = v.client_tools.map((t) => ({
    name: t.name,
    description: t.description,
    deferrable: t.deferrable,
    parameters: JSON.parse(t.parameters || '{}'),
    timeout_seconds: t.deferrable || t.timeout_seconds.trim() === '' ? null : Number(t.timeout_seconds),
  }));
  return {
    slug: v.slug,
    name: v.name,
    description: v.description,
    instructions: v.instructions,
    transport: v.transport as AgentCreate['transport'],
    model: orNull(v.model),
    reasoning_effort: (orNull(v.reasoning_effort) as AgentCreate['reasoning_effort']) ?? null,
    image: orNull(v.image),
    capabilities: v.defaultCapabilities ? null : (v.capabilities as AgentCreate['capabilities']),
    manifest: {
      entries: (() => {
        const entries = entriesOf(v);
        if (!entries.ok) throw new Error(entries.error);
        return entries.value;
      })() as NonNullable<AgentCreate['manifest']>['entries'],
      environment: Object.fromEntries(v.env.map((r) => [r.key, r.value])),
    },
    exposed_ports: v.exposed_ports.split(/[\s,]+/).filter(Boolean).map(Number),
    client_tools: tools,
    secret_bindings: v.secret_bindings.map(bindingBody),
    subagents: v.subagents.map((x) => ({
      agent: x.agent,
      mode: x.mode,
      tool_name: orNull(x.tool_name),
      description: x.description.trim(),
    })),
    skills_source: v.skills_source.trim() ? JSON.parse(v.skills_source) : null,
    workspace_source: v.workspace_source.trim() ? JSON.parse(v.workspace_source) : null,
    idle_ttl_seconds: v.idle_ttl_seconds.trim() === '' ? null : Number(v.idle_ttl_seconds),
    subagent_max_steps: v.subagent_max_steps.trim() === '' ? null : Number(v.subagent_max_steps),
    environment_id: orNull(v.environment_id),
    runtime_class: orNull(v.runtime_class),
    network: policyBody(v.network),
    budget: budgetBody(v.budget),
    permissions: permissionsBody(v.permissions, permissionTargets(toolsOfForm(v))),
  } as AgentCreate;
}

/**
 * Fields the server answers resolved rather than as stored: `model` (the server's default when
 * the agent sets none) and `subagent_max_steps` (10 when unset). The form shows the resolved
 * value, so sending it back unchanged would store it, a change in the agent's history.
 */
export const RESOLVED_FIELDS = ['model', 'subagent_max_steps'] as const;

/** The body for PATCH: `agentBody`, without the resolved fields the form did not change from
 * `loaded` (the form of the version the edit is made on), so they stay as stored. */
export function agentPatchBody(v: AgentFormValues, loaded: AgentFormValues): AgentCreate {
  const body = agentBody(v) as Record<string, unknown>;
  for (const k of RESOLVED_FIELDS) if (v[k].trim() === loaded[k].trim()) delete body[k];
  return body as AgentCreate;
}

/** Fields whose values differ between two agents (what changed under a stale edit). */
export function changedFields(a: Agent, b: Agent): string[] {
  const keys = ['name', 'description', 'instructions', 'transport', 'model', 'reasoning_effort', 'image', 'capabilities', 'manifest', 'exposed_ports', 'client_tools', 'secret_bindings', 'subagents', 'skills_source', 'workspace_source', 'idle_ttl_seconds', 'environment_id', 'subagent_max_steps', 'network', 'runtime_class', 'budget', 'permissions'] as const;
  return keys.filter((k) => JSON.stringify((a as Record<string, unknown>)[k] ?? null) !== JSON.stringify((b as Record<string, unknown>)[k] ?? null));
}

/** A value as one line for a person: strings quoted, none said, long ones cut. */
export function shownValue(v: unknown, max = 160): string {
  if (v === null || v === undefined || (Array.isArray(v) && v.length === 0)) return 'none';
  const text = typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** One field a stale save meets: as it was when the form was opened, as someone saved it
 * meanwhile, and as this form has it. */
export type ConflictRow = { field: string; opened: string; theirs: string; yours: string };

export function conflictRows(base: Agent, current: Agent, mine: AgentFormValues): ConflictRow[] {
  let body: Record<string, unknown> | null;
  try {
    body = agentBody(mine) as Record<string, unknown>;
  } catch {
    body = null; // the form does not parse yet: its side is said as such
  }
  const of = (a: Agent, k: string) => (a as Record<string, unknown>)[k];
  return changedFields(base, current).map((k) => ({
    field: k,
    opened: shownValue(of(base, k)),
    theirs: shownValue(of(current, k)),
    yours: body ? shownValue(body[k]) : 'not valid yet',
  }));
}

/** "Use from code": the Python client call and the curl that create this agent. */
export function agentSnippets(body: AgentCreate, baseUrl: string, project: string | null) {
  const compact: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(body)) {
    if (val === null || val === '' || (Array.isArray(val) && val.length === 0)) continue;
    if (k === 'network' && samePolicy(val as NetworkPolicy, defaultPolicy())) continue;
    if (k === 'permissions' && isObject(val) && Object.keys(val).length === 0) continue;
    if (k === 'manifest' && isObject(val) && Object.keys((val as { entries: object }).entries).length === 0 && Object.keys((val as { environment: object }).environment).length === 0) continue;
    compact[k] = val;
  }
  const py = (v: unknown, indent = 4): string =>
    JSON.stringify(v, null, indent)
      .replace(/\btrue\b/g, 'True')
      .replace(/\bfalse\b/g, 'False')
      .replace(/\bnull\b/g, 'None');
  const args = Object.entries(compact)
    .map(([k, val]) => `    ${k}=${py(val).split('\n').join('\n    ')},`)
    .join('\n');
  const python = `from sandbox_agents import Client

client = Client(base_url=${JSON.stringify(baseUrl)}${project ? `, project=${JSON.stringify(project)}` : ''})
agent = client.agents.create(
${args}
)
session = client.sessions.create_and_wait(agent.slug)
result = client.sessions.run(session.id, "Hello!")
print(result.text)`;
  const curl = `curl -X POST ${baseUrl}/api/agents \\
  -H "Authorization: Bearer $SANDBOX_AGENTS_API_KEY" \\${project ? `\n  -H "X-Project: ${project}" \\` : ''}
  -H "Content-Type: application/json" \\
  -d '${JSON.stringify(compact).replace(/'/g, "'\\''")}'`;
  return { python, curl };
}

/**
 * Re-applies my edits on top of a newer version: every form field I changed (against the
 * version I started from) takes my value, every other field takes theirs.
 */
export function rebaseForm(base: AgentFormValues, mine: AgentFormValues, theirs: AgentFormValues): AgentFormValues {
  const out = { ...theirs } as Record<string, unknown>;
  for (const k of Object.keys(mine) as (keyof AgentFormValues)[]) {
    if (JSON.stringify(mine[k]) !== JSON.stringify(base[k])) out[k] = mine[k];
  }
  return out as AgentFormValues;
}
