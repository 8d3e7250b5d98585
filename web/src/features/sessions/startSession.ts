// The "Start a session" dialog's values and the per-turn client tools of the composer: their
// validation with the rules of openapi.json (SessionCreate, SecretBinding, ManifestSpec,
// ClientTool), their conversion to the API's bodies, and a 422's field list mapped back onto
// the fields, so the dialog says what is wrong where it is wrong. The limits (idle TTL,
// lifetime, resources) are in limits.ts, the budget's fields in lib/budget.ts.
import { ApiError, fieldErrorList, type ClientTool, type Schemas } from '../../api/client';
import { budgetBody, emptyBudget, hasLimits, validateBudget, type BudgetValues } from '../../lib/budget';
import { ENV_RE, SANDBOX_TOOLS, TOOL_NAME_RE, validateEntryPath } from '../../lib/rules';
import { bindingBody, bindingErrors, serverBindingErrors, type BindingRow } from '../../lib/secretBindings';
import { versionChoiceBody } from '../../lib/agentVersions';
import { emptyLimits, LIMIT_FIELDS, limitsBody, validateLimits, type LimitValues } from './limits';

export type SessionCreate = Schemas['SessionCreate'];
export type Errors = Record<string, string>;

export type StartSessionValues = {
  agent: string;
  /** The agent's version it runs: `current` (pinned to it, the server's default), `latest`
   * (follows every edit), or an older version's number. */
  agentVersion: string;
  title: string;
  prompt: string;
  model: string;
  /** An environment's id; '' for the agent's (or the server's default). */
  environment: string;
  instructions: string;
  /** Off: the agent's instructions (null); on: the text, even empty. */
  overrideInstructions: boolean;
  manifest: string; // JSON text; '' for none
  secret_bindings: BindingRow[];
  metadata: { key: string; value: string }[];
  /** `agent`: the agent's budget, copied at create (null); `own`: the fields; `none`: no budget even if the agent has one (`{}`). */
  budgetMode: BudgetMode;
  budget: BudgetValues;
  /** The agent's MCP servers it uses: null for all of them (the server's default, so nothing
   * is sent), else the names kept (`[]`: none). */
  mcpServers: string[] | null;
} & LimitValues;

export type BudgetMode = 'agent' | 'own' | 'none';

export function emptyStartSession(agent = ''): StartSessionValues {
  return { agent, agentVersion: 'current', title: '', prompt: '', model: '', environment: '', instructions: '', overrideInstructions: false, manifest: '', secret_bindings: [], metadata: [], budgetMode: 'agent', budget: emptyBudget(), mcpServers: null, ...emptyLimits() };
}

const isBudgetKey = (k: string) => k === 'budget' || k.startsWith('budget.');
const isMcpKey = (k: string) => k === 'mcp_servers' || k.startsWith('mcp_servers.');

/**
 * The servers kept of the agent's `all`, as the dialog holds them: null when every one is kept,
 * so a session started so follows the agent's servers as the server's default does.
 */
export function narrowMcpServers(all: readonly string[], kept: readonly string[]): string[] | null {
  const chosen = all.filter((n) => kept.includes(n));
  return chosen.length === all.length ? null : chosen;
}

/** The error on the MCP servers' field: the list's, or a name's (`mcp_servers.1`), joined. */
export function mcpServersError(errors: Errors): string | undefined {
  const found = Object.entries(errors)
    .filter(([k]) => isMcpKey(k))
    .map(([, m]) => m);
  return found.length ? found.join(' ') : undefined;
}

/** A session's narrowing of its agent's MCP servers, in words; null when it uses all of them. */
export function sessionMcpServersText(names: readonly string[] | null | undefined): string | null {
  if (names == null) return null;
  return `MCP servers: ${names.length ? names.join(', ') : 'none'}`;
}

/** The dialog's folded sections ("advanced", "limits", "budget") holding a field with an error.
 * The MCP servers' field is not folded away. */
export function sectionsWithErrors(errors: Errors): string[] {
  const keys = Object.keys(errors).filter((k) => !['agent_id', 'agent_version', 'title', 'prompt'].includes(k) && !isMcpKey(k));
  const limits = keys.filter((k) => LIMIT_FIELDS.includes(k));
  const budget = keys.filter(isBudgetKey);
  return [...(keys.length > limits.length + budget.length ? ['advanced'] : []), ...(limits.length ? ['limits'] : []), ...(budget.length ? ['budget'] : [])];
}

export const MAX_SECRET_BINDINGS = 32;
const ENTRY_KINDS = ['file', 'dir', 'git_repo', 'local_dir', 's3_mount'];
const NEEDS: Record<string, string> = { file: 'content', git_repo: 'repo', local_dir: 'src', s3_mount: 'bucket' };
const blank = (s: string) => s.trim() === '';

function isObject(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

function parse(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: `Not valid JSON: ${(e as Error).message}` };
  }
}

/** A ManifestSpec override (`{"entries": {...}, "environment": {...}}`): the first problem, or null. */
export function validateManifest(text: string): string | null {
  if (blank(text)) return null;
  const p = parse(text);
  if (!p.ok) return p.error;
  if (!isObject(p.value)) return 'A manifest is an object: {"entries": {…}, "environment": {…}}.';
  const extra = Object.keys(p.value).filter((k) => k !== 'entries' && k !== 'environment');
  if (extra.length) return `Unknown field ${extra.map((k) => `"${k}"`).join(', ')}: a manifest has "entries" and "environment".`;
  const { entries, environment } = p.value;
  if (entries !== undefined) {
    if (!isObject(entries)) return '"entries" is an object of workspace path → entry.';
    for (const [path, spec] of Object.entries(entries)) {
      const pe = validateEntryPath(path);
      if (pe) return `"${path}": ${pe}`;
      if (!isObject(spec) || !ENTRY_KINDS.includes(String(spec.kind))) return `"${path}": kind must be one of ${ENTRY_KINDS.join(', ')}.`;
      const key = NEEDS[String(spec.kind)];
      if (key && typeof spec[key] !== 'string') return `"${path}": a ${spec.kind} entry needs "${key}".`;
      if (spec.kind === 'local_dir' && !String(spec.src).startsWith('/')) return `"${path}": src must be an absolute path.`;
    }
  }
  if (environment !== undefined) {
    if (!isObject(environment)) return '"environment" is an object of variable → string.';
    for (const [k, v] of Object.entries(environment)) {
      if (!ENV_RE.test(k)) return `"${k}": letters, digits and _, not starting with a digit.`;
      if (typeof v !== 'string') return `"${k}": values are strings.`;
    }
  }
  return null;
}

/** A metadata value as typed: JSON when it reads as JSON (42, true, {"a":1}, "quoted"), else the text. */
export function metadataValue(text: string): unknown {
  const t = text.trim();
  if (t === '') return '';
  const p = parse(t);
  return p.ok ? p.value : text;
}

/** Every field error at once, keyed by field (`secret_bindings.0.env` for rows). */
export function validateStartSession(v: StartSessionValues): Errors {
  const e: Errors = validateLimits(v);
  if (v.budgetMode === 'own') {
    Object.assign(e, validateBudget(v.budget));
    if (!hasLimits(v.budget)) e.budget = 'Set at least one limit, or choose the agent’s budget or none.';
  }
  if (blank(v.agent)) e.agent_id = 'Pick an agent.';
  if (v.model !== '' && blank(v.model)) e.model = 'Leave empty for the agent’s model, or name one.';
  const m = validateManifest(v.manifest);
  if (m) e.manifest = m;
  if (v.secret_bindings.length > MAX_SECRET_BINDINGS) e.secret_bindings = `At most ${MAX_SECRET_BINDINGS} bindings.`;
  Object.assign(e, bindingErrors(v.secret_bindings));
  const keys = new Set<string>();
  v.metadata.forEach((r, i) => {
    if (blank(r.key)) e[`metadata.${i}.key`] = 'Name the key.';
    else if (keys.has(r.key)) e[`metadata.${i}.key`] = 'Duplicate key.';
    keys.add(r.key);
  });
  return e;
}

/** The body of POST /api/sessions: null (the agent's) wherever the dialog was left alone. */
export function startSessionBody(v: StartSessionValues): SessionCreate {
  const pin = versionChoiceBody(v.agentVersion);
  return {
    agent_id: v.agent.trim(),
    // Left out for the current version: the server pins the session to it.
    ...(pin !== undefined ? { agent_version: pin } : {}),
    title: v.title,
    model: blank(v.model) ? null : v.model.trim(),
    instructions: v.overrideInstructions ? v.instructions : null,
    manifest: blank(v.manifest) ? null : (JSON.parse(v.manifest) as SessionCreate['manifest']),
    metadata: Object.fromEntries(v.metadata.map((r) => [r.key, metadataValue(r.value)])) as SessionCreate['metadata'],
    secret_bindings: v.secret_bindings.map(bindingBody),
    from_snapshot_id: null,
    environment_id: blank(v.environment) ? null : v.environment.trim(),
    prompt: v.prompt.trim() ? v.prompt : null,
    budget: v.budgetMode === 'none' ? {} : v.budgetMode === 'own' ? budgetBody(v.budget) : null,
    // Left out while every server is kept: the session then uses all of the agent's.
    ...(v.mcpServers !== null ? { mcp_servers: v.mcpServers } : {}),
    ...limitsBody(v),
  };
}

/** The binding row a sentence about a missing secret names ("…named 'X' … (bound to ENV …");
 * an inject binding has no variable, so a row of it is found by the secret alone. */
function bindingRow(msg: string, values?: StartSessionValues): number {
  const m = /secret(?: named)? '([^']*)'(?:.*\(bound to ([A-Za-z0-9_]+))?/.exec(msg);
  if (!m || !values) return -1;
  const named = (b: BindingRow) => b.secret.trim() === m[1];
  const i = values.secret_bindings.findIndex((b) => named(b) && b.kind !== 'inject' && b.env === m[2]);
  return i >= 0 ? i : values.secret_bindings.findIndex(named);
}

/**
 * A 422's field list as field errors: `["body","secret_bindings",0,"env"]` becomes
 * `secret_bindings.0.env`; a missing secret (`["body","secret_bindings"]`) lands on the row
 * that names it. Errors without a field (or another status) give {}.
 */
export function fieldErrorsOf(error: unknown, values?: StartSessionValues): Errors {
  if (!(error instanceof ApiError) || error.status !== 422) return {};
  const detail = (error.body as { detail?: unknown } | null)?.detail;
  if (typeof detail === 'string') {
    const i = bindingRow(detail, values);
    return i >= 0 ? { [`secret_bindings.${i}.secret`]: detail } : {};
  }
  const out: Errors = {};
  for (const field of fieldErrorList(error)) {
    const msg = field.msg;
    let key = field.key;
    if (key === 'secret_bindings') {
      const i = bindingRow(msg, values);
      if (i >= 0) key = `secret_bindings.${i}.secret`;
    }
    out[key] = out[key] ? `${out[key]} ${msg}` : msg;
  }
  // A binding's field as the dialog shows it (a placeholder's variable at the row's variable).
  const rows = serverBindingErrors(out);
  for (const k of Object.keys(out)) if (/^secret_bindings\.\d+/.test(k)) delete out[k];
  return { ...out, ...rows };
}

/**
 * The composer's "Client tools for this turn": a JSON array of ClientTool. Empty text is no
 * tools (null); otherwise the tools, or the first problem as the server would put it.
 */
export function parseTurnClientTools(text: string): { ok: true; tools: ClientTool[] | null } | { ok: false; error: string } {
  if (blank(text)) return { ok: true, tools: null };
  const p = parse(text);
  if (!p.ok) return p;
  if (!Array.isArray(p.value)) return { ok: false, error: 'A JSON array of tools: [{"name": "…", "description": "…", "parameters": {…}}].' };
  const names = new Set<string>();
  const tools: ClientTool[] = [];
  for (const [i, t] of p.value.entries()) {
    const at = `Tool ${i + 1}`;
    if (!isObject(t)) return { ok: false, error: `${at}: an object.` };
    const known = ['name', 'description', 'parameters', 'deferrable', 'timeout_seconds'];
    const extra = Object.keys(t).filter((k) => !known.includes(k));
    if (extra.length) return { ok: false, error: `${at}: unknown field ${extra.map((k) => `"${k}"`).join(', ')}.` };
    if (typeof t.name !== 'string' || !TOOL_NAME_RE.test(t.name)) return { ok: false, error: `${at}: "name" is 1 to 64 letters, digits, _ or -.` };
    if (SANDBOX_TOOLS.includes(t.name)) return { ok: false, error: `${at}: "${t.name}" is a sandbox tool’s name.` };
    if (names.has(t.name)) return { ok: false, error: `${at}: duplicate name "${t.name}".` };
    names.add(t.name);
    if (t.description !== undefined && typeof t.description !== 'string') return { ok: false, error: `${at}: "description" is a string.` };
    if (t.parameters !== undefined && !isObject(t.parameters)) return { ok: false, error: `${at}: "parameters" (a JSON Schema) must be an object.` };
    if (t.deferrable !== undefined && typeof t.deferrable !== 'boolean') return { ok: false, error: `${at}: "deferrable" is true or false.` };
    if (t.timeout_seconds !== undefined && t.timeout_seconds !== null) {
      if (t.deferrable === true) return { ok: false, error: `${at}: a deferrable tool takes no timeout_seconds.` };
      if (typeof t.timeout_seconds !== 'number' || !(t.timeout_seconds > 0 && t.timeout_seconds <= 3600)) return { ok: false, error: `${at}: "timeout_seconds" is more than 0 and at most 3600.` };
    }
    tools.push(t as ClientTool);
  }
  return { ok: true, tools };
}
