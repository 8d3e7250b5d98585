import { describe, expect, it } from 'vitest';
import type { Agent } from '../../api/client';
import type { NetworkPolicy } from '../../lib/network';
import { agentBody, agentPatchBody, agentSnippets, CAPABILITIES, CAPABILITY_HELP, changedFields, conflictRows, emptyAgentForm, shownValue, formFromAgent, rebaseForm, toolsOfAgent, toolsOfForm, validateAgentForm, withListedMcpTools } from './model';

const valid = () => ({ ...emptyAgentForm(), slug: 'analyst', name: 'Analyst' });

describe('validateAgentForm', () => {
  it('accepts the minimal agent', () => {
    expect(validateAgentForm(valid())).toEqual({});
  });
  it('offers the python capability, each capability with its line of help, and sends it', () => {
    expect(CAPABILITIES).toContain('python');
    for (const c of CAPABILITIES) expect(CAPABILITY_HELP[c]).toBeTruthy();
    expect(agentBody({ ...valid(), defaultCapabilities: false, capabilities: ['shell', 'python'] }).capabilities).toEqual(['shell', 'python']);
    // The server refuses a client tool of that name beside the capability, and takes it without.
    const tool = { name: 'python', description: '', deferrable: false, timeout_seconds: '', parameters: '{}' };
    expect(validateAgentForm({ ...valid(), defaultCapabilities: false, capabilities: ['python'], client_tools: [tool] })['client_tools.0.name']).toMatch(/python capability/);
    expect(validateAgentForm({ ...valid(), client_tools: [tool] })).toEqual({});
  });
  it('checks the slug like the server', () => {
    for (const slug of ['', 'Analyst', '-a', 'a_b', 'a'.repeat(64)]) expect(validateAgentForm({ ...valid(), slug }).slug).toBeTruthy();
    for (const slug of ['a', '0-a', 'a'.repeat(63)]) expect(validateAgentForm({ ...valid(), slug }).slug).toBeUndefined();
  });
  it('checks names, ports, ttl and variables', () => {
    const e = validateAgentForm({ ...valid(), name: '  ', exposed_ports: '80, 70000, x', idle_ttl_seconds: '-1', env: [{ key: '1A', value: '' }] });
    expect(Object.keys(e).sort()).toEqual(['env.0.key', 'exposed_ports', 'idle_ttl_seconds', 'name']);
  });
  it('checks the subagent step limit like the server (1 to 100, empty: the default) and sends it', () => {
    for (const n of ['0', '101', '2.5', 'x']) expect(validateAgentForm({ ...valid(), subagent_max_steps: n }).subagent_max_steps).toMatch(/1 to 100/);
    for (const n of ['', '1', '100']) expect(validateAgentForm({ ...valid(), subagent_max_steps: n }).subagent_max_steps).toBeUndefined();
    expect(agentBody({ ...valid(), subagent_max_steps: '25' }).subagent_max_steps).toBe(25);
    expect(agentBody(valid()).subagent_max_steps).toBeNull();
    expect(formFromAgent({ ...({} as Agent), manifest: { entries: {}, environment: {} }, subagent_max_steps: 7 } as Agent).subagent_max_steps).toBe('7');
  });
  it('sends the default session budget (none when every limit is empty), reads it back and checks it', () => {
    expect(agentBody(valid()).budget).toBeNull();
    const v = { ...valid(), budget: { max_cost_usd: '0.35', max_total_tokens: '', max_turns: '50', max_sandbox_seconds: '' } };
    expect(validateAgentForm(v)).toEqual({});
    expect(agentBody(v).budget).toEqual({ max_cost_usd: 0.35, max_turns: 50 });
    const a = { ...({} as Agent), manifest: { entries: {}, environment: {} }, budget: { max_total_tokens: 20000 } } as Agent;
    expect(formFromAgent(a).budget).toEqual({ max_cost_usd: '', max_total_tokens: '20000', max_turns: '', max_sandbox_seconds: '' });
    expect(formFromAgent({ ...a, budget: null }).budget.max_total_tokens).toBe('');
    expect(Object.keys(validateAgentForm({ ...v, budget: { ...v.budget, max_turns: '1.5', max_cost_usd: '-2' } }))).toEqual(['budget.max_cost_usd', 'budget.max_turns']);
    // A budget changed meanwhile is one of the fields a stale save names.
    expect(changedFields(a, { ...a, budget: { max_total_tokens: 30000 } })).toEqual(['budget']);
  });
  it('sends the network policy as the server takes it, and reads it back', () => {
    expect(agentBody(valid()).network).toEqual({ egress: 'open', allow: [], presets: [] });
    const network: NetworkPolicy = { egress: 'allowlist', allow: ['pypi.org', ' ', 'github.com:443'], presets: ['npm'] };
    expect(agentBody({ ...valid(), network }).network).toEqual({ egress: 'allowlist', allow: ['pypi.org', 'github.com:443'], presets: ['npm'] });
    // Entries kept while another egress is chosen are not sent: the server refuses them there.
    expect(agentBody({ ...valid(), network: { ...network, egress: 'none' } }).network).toEqual({ egress: 'none', allow: [], presets: [] });
    const stored = { ...({} as Agent), manifest: { entries: {}, environment: {} }, network: { egress: 'allowlist', allow: ['pypi.org'], presets: ['github'] } } as Agent;
    expect(formFromAgent(stored).network).toEqual({ egress: 'allowlist', allow: ['pypi.org'], presets: ['github'] });
    expect(formFromAgent({ ...({} as Agent), manifest: { entries: {}, environment: {} } } as Agent).network).toEqual({ egress: 'open', allow: [], presets: [] });
    // The snippets name a policy only when it is not the default.
    expect(agentSnippets(agentBody(valid()), 'http://x', null).curl).not.toContain('network');
    expect(agentSnippets(agentBody({ ...valid(), network }), 'http://x', null).curl).toContain('"network":{"egress":"allowlist"');
  });
  it('checks client tools: names, sandbox clashes, duplicates, timeouts and schemas', () => {
    const tool = (name: string, extra = {}) => ({ name, description: '', deferrable: false, timeout_seconds: '', parameters: '{}', ...extra });
    const e = validateAgentForm({ ...valid(), client_tools: [tool('shell'), tool('ask'), tool('ask'), tool('bad name'), tool('t', { deferrable: true, timeout_seconds: '5' }), tool('p', { parameters: '[]' })] });
    expect(e['client_tools.0.name']).toMatch(/sandbox/);
    expect(e['client_tools.2.name']).toMatch(/Duplicate/);
    expect(e['client_tools.3.name']).toBeTruthy();
    expect(e['client_tools.4.timeout_seconds']).toMatch(/deferrable/);
    expect(e['client_tools.5.parameters']).toMatch(/object/);
  });
  it('checks manifest entries and subagents', () => {
    // The JSON view, while shown, is what counts.
    expect(validateAgentForm({ ...valid(), entriesJson: '{"../x":{"kind":"dir"}}' }).entries).toMatch(/\.\./);
    expect(validateAgentForm({ ...valid(), entriesJson: '{"a":{"kind":"file"}}' }).entries).toMatch(/content/);
    expect(validateAgentForm({ ...valid(), entriesJson: '{"a":{"kind":"local_dir","src":"rel"}}' }).entries).toMatch(/absolute/);
    expect(validateAgentForm({ ...valid(), entriesJson: '{' }).entries).toMatch(/JSON/);
    // The rows: each field's error on its row.
    const rows = validateAgentForm({ ...valid(), entries: [{ path: '../x', spec: { kind: 'dir' } }, { path: 'a', spec: { kind: 'git_repo', repo: '' } }, { path: 'a', spec: { kind: 'local_dir', src: 'rel' } }] });
    expect(rows['entries.0.path']).toMatch(/\.\./);
    expect(rows['entries.1.repo']).toMatch(/repository/);
    expect(rows['entries.2.path']).toMatch(/Another entry/);
    expect(rows['entries.2.src']).toMatch(/absolute/);
    const sub = (agent: string, mode: 'tool' | 'handoff' = 'tool', tool_name = '') => ({ agent, mode, tool_name, description: '' });
    expect(validateAgentForm({ ...valid(), subagents: [sub('analyst')] }, { selfSlug: 'analyst' })['subagents.0.agent']).toMatch(/own/);
    expect(validateAgentForm({ ...valid(), subagents: [sub('')] })['subagents.0.agent']).toMatch(/Choose/);
    expect(validateAgentForm({ ...valid(), subagents: [sub('other', 'tool', 'bad name')] })['subagents.0.tool_name']).toMatch(/Letters/);
    const twice = validateAgentForm({ ...valid(), subagents: [sub('other'), sub('third', 'tool', 'other')] });
    expect(twice['subagents.1.tool_name']).toMatch(/already/);
    expect(validateAgentForm({ ...valid(), subagents: [sub('other'), sub('other', 'handoff')] })['subagents.1.tool_name']).toBeUndefined();
  });
});

describe('agentBody and back', () => {
  it('round-trips an agent through the form', () => {
    const agent = {
      id: 'A', slug: 'a', name: 'A', description: 'd', instructions: 'i', transport: 'proxy', model: 'm', reasoning_effort: null, image: null, capabilities: null,
      manifest: { entries: { 'out': { kind: 'dir' } }, environment: { X: '1' } }, exposed_ports: [8000], client_tools: [{ name: 'ask', description: '', deferrable: true, parameters: { type: 'object' }, timeout_seconds: null }],
      secret_bindings: [{ secret: 'S', env: 'TOKEN' }], subagents: [], skills_source: null, workspace_source: null, idle_ttl_seconds: 0, environment_id: null, version: 3, created_at: '', updated_at: '',
    } as unknown as Agent;
    const body = agentBody(formFromAgent(agent));
    expect(body).toMatchObject({ slug: 'a', model: 'm', capabilities: null, exposed_ports: [8000], idle_ttl_seconds: 0, manifest: agent.manifest, secret_bindings: agent.secret_bindings });
    expect(body.client_tools?.[0]).toMatchObject({ name: 'ask', deferrable: true, timeout_seconds: null });
    expect(changedFields(agent, { ...agent, instructions: 'new', version: 4 })).toEqual(['instructions']);
  });
  it('writes the Python and curl equivalents', () => {
    const { python, curl } = agentSnippets(agentBody(valid()), 'http://h', 'default');
    expect(python).toContain('client.agents.create(');
    expect(python).toContain('slug="analyst"');
    expect(curl).toContain('X-Project: default');
    expect(curl).toContain('"slug":"analyst"');
  });
});

describe('conflictRows', () => {
  it('says the values in conflict: as opened, as saved meanwhile, and as in the form', () => {
    const base = { id: 'A', slug: 'a', name: 'A', description: 'old', instructions: 'Be brief.', transport: 'proxy', model: 'm1', capabilities: null, manifest: { entries: {}, environment: {} }, exposed_ports: [], client_tools: [], secret_bindings: [], subagents: [], skills_source: null, workspace_source: null, idle_ttl_seconds: null, environment_id: null, version: 3 } as unknown as Agent;
    const current = { ...base, instructions: 'Changed by a script.', model: 'm2', exposed_ports: [8000], version: 4 } as Agent;
    const mine = { ...formFromAgent(base), instructions: 'Mine.' };
    expect(conflictRows(base, current, mine)).toEqual([
      { field: 'instructions', opened: '"Be brief."', theirs: '"Changed by a script."', yours: '"Mine."' },
      { field: 'model', opened: '"m1"', theirs: '"m2"', yours: '"m1"' },
      { field: 'exposed_ports', opened: 'none', theirs: '[8000]', yours: 'none' },
    ]);
    // A form that does not parse yet still shows the others' values.
    expect(conflictRows(base, current, { ...mine, entriesJson: '{' })[0]).toEqual({ field: 'instructions', opened: '"Be brief."', theirs: '"Changed by a script."', yours: 'not valid yet' });
    expect(shownValue('x'.repeat(500)).length).toBe(160);
  });
});

describe('rebaseForm', () => {
  it('keeps my edits and takes theirs everywhere else', () => {
    const base = { ...valid(), description: 'old', instructions: 'old' };
    const mine = { ...base, description: 'mine' };
    const theirs = { ...base, instructions: 'theirs', env: [{ key: 'A', value: '1' }] };
    expect(rebaseForm(base, mine, theirs)).toEqual({ ...base, description: 'mine', instructions: 'theirs', env: [{ key: 'A', value: '1' }] });
  });
});

describe('permissions in the form', () => {
  const stored = {
    id: 'A', slug: 'a', name: 'A', description: '', instructions: '', transport: 'proxy', model: 'server-default', capabilities: null,
    manifest: { entries: {}, environment: {} }, exposed_ports: [], client_tools: [{ name: 'ask_user', description: '', deferrable: true, parameters: {} }], secret_bindings: [],
    subagents: [{ agent: 'closer', mode: 'handoff' }], skills_source: null, workspace_source: null, subagent_max_steps: 10, version: 2,
    permissions: { shell: { mode: 'ask', allow_prefixes: ['ls'] }, closer: { mode: 'deny' } },
  } as unknown as Agent;

  it('derives the keys from the form and from a stored agent alike', () => {
    const form = formFromAgent(stored);
    expect(toolsOfForm(form)).toEqual(toolsOfAgent(stored));
    expect(toolsOfForm({ ...form, defaultCapabilities: false, capabilities: ['python'], skills_source: '{"kind":"bundle","bundle":"b"}', subagents: [{ agent: '', mode: 'tool', tool_name: '', description: '' }], client_tools: [] })).toEqual({ capabilities: ['python'], skills: true, subagents: [], clientTools: [], mcp: [] });
  });

  it('reads them back, sends them as they were, and drops keys the agent lost', () => {
    const form = formFromAgent(stored);
    expect(form.permissions).toEqual({ shell: { mode: 'ask', allow_prefixes: ['ls'] }, closer: { mode: 'deny', allow_prefixes: [] } });
    expect(agentBody(form).permissions).toEqual(stored.permissions);
    expect(agentBody({ ...form, subagents: [] }).permissions).toEqual({ shell: { mode: 'ask', allow_prefixes: ['ls'] } });
    expect(agentBody(valid()).permissions).toEqual({});
    expect(formFromAgent({ ...stored, permissions: undefined } as unknown as Agent).permissions).toEqual({});
  });

  it('checks them before sending, under the keys the server would name', () => {
    const form = formFromAgent(stored);
    const e = validateAgentForm({ ...form, permissions: { ...form.permissions, closer: { mode: 'ask', allow_prefixes: [] }, shell: { mode: 'ask', allow_prefixes: [''] } } });
    expect(Object.keys(e).sort()).toEqual(['permissions.closer', 'permissions.shell.allow_prefixes.0']);
  });

  it('names them among what changed meanwhile, and leaves them out of the snippets when empty', () => {
    expect(changedFields(stored, { ...stored, permissions: {} } as Agent)).toEqual(['permissions']);
    expect(agentSnippets(agentBody(valid()), 'http://x', null).curl).not.toContain('permissions');
    expect(agentSnippets(agentBody(formFromAgent(stored)), 'http://x', null).curl).toContain('"permissions":{"shell":{"mode":"ask","allow_prefixes":["ls"]},"closer":{"mode":"deny"}}');
  });
});

describe('agentPatchBody', () => {
  const stored = { ...({} as Agent), slug: 'a', name: 'A', description: '', instructions: '', transport: 'proxy', model: 'server-default', manifest: { entries: {}, environment: {} }, subagent_max_steps: 10, version: 3 } as Agent;

  it('leaves out the resolved defaults the form shows (model, subagent step limit) unless changed', () => {
    const loaded = formFromAgent(stored);
    const body = agentPatchBody({ ...loaded, description: 'new' }, loaded) as Record<string, unknown>;
    expect(body).not.toHaveProperty('subagent_max_steps');
    expect(body).not.toHaveProperty('model');
    expect(body.description).toBe('new');
    expect(agentPatchBody({ ...loaded, subagent_max_steps: '25' }, loaded).subagent_max_steps).toBe(25);
    // Emptied: back to the server's default, which is a change.
    expect(agentPatchBody({ ...loaded, subagent_max_steps: '' }, loaded).subagent_max_steps).toBeNull();
    expect(agentPatchBody({ ...loaded, model: 'other' }, loaded).model).toBe('other');
    expect(agentPatchBody({ ...loaded, model: '' }, loaded).model).toBeNull();
  });
});

describe('MCP servers in the permissions', () => {
  const stored = {
    id: 'A', slug: 'a', name: 'A', description: '', instructions: '', transport: 'proxy', model: 'm', capabilities: [],
    manifest: { entries: {}, environment: {} }, exposed_ports: [], client_tools: [], secret_bindings: [], subagents: [], skills_source: null, workspace_source: null, subagent_max_steps: 10, version: 2,
    mcp_servers: [{ name: 'gh', url: 'https://example.com/mcp', required: false }, { name: 'db', command: ['db-mcp'], required: true }],
    permissions: { mcp__gh__create_issue: { mode: 'ask' }, mcp__db: { mode: 'deny' } },
  } as unknown as Agent;

  it('knows each server, and the tools its permissions name, from the form and from the agent alike', () => {
    const form = formFromAgent(stored);
    expect(form.mcpServers).toEqual(['gh', 'db']);
    expect(toolsOfForm(form).mcp).toEqual([{ server: 'gh', tools: ['create_issue'] }, { server: 'db', tools: [] }]);
    expect(toolsOfForm(form)).toEqual(toolsOfAgent(stored));
    // The form sends the permissions back, never the servers (their tab edits them).
    const body = agentBody(form) as Record<string, unknown>;
    expect(body.permissions).toEqual(stored.permissions);
    expect('mcp_servers' in body).toBe(false);
    // A typed tool key is sent; one of a server the agent lost is not.
    const typed = { ...form, permissions: { ...form.permissions, mcp__gh__search: { mode: 'deny' as const, allow_prefixes: [] }, mcp__old__x: { mode: 'deny' as const, allow_prefixes: [] } } };
    expect(Object.keys(agentBody(typed).permissions ?? {})).toEqual(['mcp__gh__create_issue', 'mcp__db', 'mcp__gh__search']);
  });

  it('adds the tools a server listed after those already known, once each', () => {
    const tools = withListedMcpTools(toolsOfAgent(stored), [{ name: 'gh', tools: [{ name: 'search' }, { name: 'create_issue' }] }, { name: 'db', tools: null }]);
    expect(tools.mcp).toEqual([{ server: 'gh', tools: ['create_issue', 'search'] }, { server: 'db', tools: [] }]);
    expect(withListedMcpTools(toolsOfAgent(stored), undefined)).toEqual(toolsOfAgent(stored));
  });
});
