import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/client';
import { emptyBindingRow, type BindingRow } from '../../lib/secretBindings';
import { emptyStartSession, fieldErrorsOf, mcpServersError, metadataValue, narrowMcpServers, parseTurnClientTools, sectionsWithErrors, sessionMcpServersText, startSessionBody, validateManifest, validateStartSession } from './startSession';

const valid = () => emptyStartSession('analyst');
const row = (secret: string, env: string): BindingRow => ({ ...emptyBindingRow(), secret, env });

describe('validateStartSession', () => {
  it('accepts the agent alone, and sends null for everything left alone', () => {
    expect(validateStartSession(valid())).toEqual({});
    expect(startSessionBody(valid())).toEqual({ agent_id: 'analyst', title: '', model: null, instructions: null, manifest: null, metadata: {}, secret_bindings: [], from_snapshot_id: null, environment_id: null, prompt: null, budget: null, idle_ttl_seconds: null, max_lifetime_seconds: null, resources: null });
    expect(startSessionBody({ ...valid(), environment: ' 01a2321d-484e-7689-af64-6c1f20a7dba8 ' }).environment_id).toBe('01a2321d-484e-7689-af64-6c1f20a7dba8');
  });
  it('pins the agent’s current version by leaving agent_version out, or sends latest or an older number', () => {
    expect('agent_version' in startSessionBody(valid())).toBe(false);
    expect(startSessionBody({ ...valid(), agentVersion: 'latest' }).agent_version).toBe('latest');
    expect(startSessionBody({ ...valid(), agentVersion: '2' }).agent_version).toBe(2);
    // A 422 naming it stays beside the field, outside the folded sections.
    expect(sectionsWithErrors({ agent_version: 'agent analyst has no version 9' })).toEqual([]);
  });
  it('needs an agent and a model that is not blank', () => {
    const e = validateStartSession({ ...valid(), agent: ' ', model: '   ' });
    expect(Object.keys(e).sort()).toEqual(['agent_id', 'model']);
  });
  it('checks secret bindings like SecretBinding: a secret, an env name, no duplicates, at most 32', () => {
    const e = validateStartSession({ ...valid(), secret_bindings: [row('', '1X'), row('TOKEN', 'API_TOKEN'), row('OTHER', 'API_TOKEN')] });
    expect(e['secret_bindings.0.secret']).toBeTruthy();
    expect(e['secret_bindings.0.env']).toMatch(/Letters/);
    expect(e['secret_bindings.1.env']).toBeUndefined();
    expect(e['secret_bindings.2.env']).toMatch(/Duplicate/);
    const many = Array.from({ length: 33 }, (_, i) => row('S', `V${i}`));
    expect(validateStartSession({ ...valid(), secret_bindings: many }).secret_bindings).toMatch(/32/);
  });
  it('checks metadata keys', () => {
    const e = validateStartSession({ ...valid(), metadata: [{ key: '', value: '1' }, { key: 'a', value: '' }, { key: 'a', value: '' }] });
    expect(Object.keys(e).sort()).toEqual(['metadata.0.key', 'metadata.2.key']);
  });
  it('builds the body with the overrides', () => {
    const body = startSessionBody({
      ...valid(),
      title: 'T',
      prompt: 'Hi',
      model: ' gpt-x ',
      overrideInstructions: true,
      instructions: '',
      manifest: '{"environment":{"MODE":"x"}}',
      secret_bindings: [row(' TOKEN ', 'API_TOKEN')],
      metadata: [{ key: 'n', value: '42' }, { key: 'j', value: '{"a":1}' }, { key: 's', value: 'plain text' }],
    });
    expect(body).toMatchObject({ title: 'T', prompt: 'Hi', model: 'gpt-x', instructions: '', manifest: { environment: { MODE: 'x' } }, secret_bindings: [{ secret: 'TOKEN', env: 'API_TOKEN' }], metadata: { n: 42, j: { a: 1 }, s: 'plain text' } });
  });
});

describe('a new session’s budget', () => {
  it('is the agent’s (null), none ({}) or its own limits, checked before sending', () => {
    expect(startSessionBody({ ...valid(), budgetMode: 'none' }).budget).toEqual({});
    const own = { ...valid(), budgetMode: 'own' as const, budget: { max_cost_usd: '0.35', max_total_tokens: '', max_turns: '40', max_sandbox_seconds: '' } };
    expect(validateStartSession(own)).toEqual({});
    expect(startSessionBody(own).budget).toEqual({ max_cost_usd: 0.35, max_turns: 40 });
    // Typed but then set back to the agent's: the fields are not sent.
    expect(startSessionBody({ ...own, budgetMode: 'agent' }).budget).toBeNull();
    const empty = validateStartSession({ ...valid(), budgetMode: 'own' });
    expect(empty.budget).toMatch(/at least one limit/);
    const bad = validateStartSession({ ...own, budget: { ...own.budget, max_turns: '2.5', max_cost_usd: '2000000' } });
    expect(Object.keys(bad).sort()).toEqual(['budget.max_cost_usd', 'budget.max_turns']);
    expect(sectionsWithErrors(bad)).toEqual(['budget']);
    expect(sectionsWithErrors({ ...bad, 'resources.cpus': 'x', model: 'y' })).toEqual(['advanced', 'limits', 'budget']);
  });
  it('puts a 422 on the limit it names', () => {
    const err = new ApiError(422, 'x', { detail: [{ loc: ['body', 'budget', 'max_cost_usd'], msg: 'max_cost_usd is a limit: a number, 0 or more' }] });
    expect(fieldErrorsOf(err)).toEqual({ 'budget.max_cost_usd': 'max_cost_usd is a limit: a number, 0 or more' });
  });
});

describe('a new session’s MCP servers', () => {
  it('are left out of the body while every one is kept, else sent as the names kept ([] for none)', () => {
    expect('mcp_servers' in startSessionBody(valid())).toBe(false);
    expect(startSessionBody({ ...valid(), mcpServers: ['local'] }).mcp_servers).toEqual(['local']);
    expect(startSessionBody({ ...valid(), mcpServers: [] }).mcp_servers).toEqual([]);
  });
  it('are narrowed to null when every one of the agent’s is kept, in the agent’s order otherwise', () => {
    const all = ['calc', 'local', 'docs'];
    expect(narrowMcpServers(all, ['docs', 'local', 'calc'])).toBeNull();
    expect(narrowMcpServers(all, ['docs', 'calc'])).toEqual(['calc', 'docs']);
    expect(narrowMcpServers(all, [])).toEqual([]);
    // A name the agent no longer has is dropped.
    expect(narrowMcpServers(all, ['gone', 'local'])).toEqual(['local']);
  });
  it('take a 422 on the list or on a name at their field, which no section folds away', () => {
    const e = fieldErrorsOf(new ApiError(422, 'x', { detail: [{ loc: ['body', 'mcp_servers', '1'], msg: "the agent has no MCP server named 'nope'" }] }));
    expect(e).toEqual({ 'mcp_servers.1': "the agent has no MCP server named 'nope'" });
    expect(mcpServersError(e)).toBe("the agent has no MCP server named 'nope'");
    expect(mcpServersError({ mcp_servers: 'a', 'mcp_servers.0': 'b', model: 'c' })).toBe('a b');
    expect(mcpServersError({ model: 'c' })).toBeUndefined();
    expect(sectionsWithErrors(e)).toEqual([]);
  });
  it('are shown on the session’s page only when narrowed', () => {
    expect(sessionMcpServersText(null)).toBeNull();
    expect(sessionMcpServersText(undefined)).toBeNull();
    expect(sessionMcpServersText([])).toBe('MCP servers: none');
    expect(sessionMcpServersText(['local', 'calc'])).toBe('MCP servers: local, calc');
  });
});

describe('validateManifest', () => {
  it('takes empty as none and checks the shape', () => {
    expect(validateManifest('')).toBeNull();
    expect(validateManifest('{"entries":{"a.md":{"kind":"file","content":"x"}},"environment":{"A":"1"}}')).toBeNull();
    expect(validateManifest('{')).toMatch(/JSON/);
    expect(validateManifest('[]')).toMatch(/object/);
    expect(validateManifest('{"files":{}}')).toMatch(/Unknown field "files"/);
    expect(validateManifest('{"entries":{"/etc":{"kind":"dir"}}}')).toMatch(/relative/);
    expect(validateManifest('{"entries":{"a":{"kind":"file"}}}')).toMatch(/content/);
    expect(validateManifest('{"entries":{"a":{"kind":"zip"}}}')).toMatch(/kind/);
    expect(validateManifest('{"environment":{"1A":"x"}}')).toMatch(/letters/i);
    expect(validateManifest('{"environment":{"A":1}}')).toMatch(/strings/);
  });
});

describe('metadataValue', () => {
  it('reads JSON when it is JSON, else keeps the text', () => {
    expect(metadataValue('true')).toBe(true);
    expect(metadataValue('"q"')).toBe('q');
    expect(metadataValue('hello world')).toBe('hello world');
    expect(metadataValue('')).toBe('');
  });
});

describe('fieldErrorsOf', () => {
  it('maps a 422 field list onto field keys', () => {
    const err = new ApiError(422, 'x', { detail: [{ loc: ['body', 'secret_bindings', 0, 'secret'], msg: 'no secret named NOPE' }, { loc: ['body', 'model'], msg: 'blank' }, { loc: ['body'], msg: 'whole body' }] });
    expect(fieldErrorsOf(err)).toEqual({ 'secret_bindings.0.secret': 'no secret named NOPE', model: 'blank' });
  });
  it('puts the server’s unknown-secret sentence on the row that names it', () => {
    const v = { ...valid(), secret_bindings: [row('OK', 'A'), row('NOPE', 'B')] };
    const detail = "secret 'NOPE' (bound to B) does not exist in this project";
    expect(fieldErrorsOf(new ApiError(422, detail, { detail }), v)).toEqual({ 'secret_bindings.1.secret': detail });
    const msg = "there is no secret named 'NOPE' in this project (bound to B by the session); create it first";
    expect(fieldErrorsOf(new ApiError(422, msg, { detail: [{ loc: ['body', 'secret_bindings'], msg }] }), v)).toEqual({ 'secret_bindings.1.secret': msg });
    expect(fieldErrorsOf(new ApiError(422, msg, { detail: [{ loc: ['body', 'secret_bindings'], msg }] }))).toEqual({ secret_bindings: msg });
  });
  it('gives nothing for other errors', () => {
    expect(fieldErrorsOf(new ApiError(409, 'archived', { detail: 'archived' }))).toEqual({});
    expect(fieldErrorsOf(new Error('x'))).toEqual({});
  });
});

describe('parseTurnClientTools', () => {
  it('takes empty as no tools and parses a valid list', () => {
    expect(parseTurnClientTools('  ')).toEqual({ ok: true, tools: null });
    const r = parseTurnClientTools('[{"name":"lookup","description":"d","parameters":{"type":"object"},"timeout_seconds":30},{"name":"ask","deferrable":true}]');
    expect(r.ok && r.tools?.map((t) => t.name)).toEqual(['lookup', 'ask']);
  });
  it('checks each tool like ClientTool', () => {
    const bad = (text: string) => {
      const r = parseTurnClientTools(text);
      return r.ok ? null : r.error;
    };
    expect(bad('{')).toMatch(/JSON/);
    expect(bad('{"name":"x"}')).toMatch(/array/);
    expect(bad('[{"name":"bad name"}]')).toMatch(/name/);
    expect(bad('[{"name":"shell"}]')).toMatch(/sandbox/);
    expect(bad('[{"name":"a"},{"name":"a"}]')).toMatch(/Tool 2: duplicate/);
    expect(bad('[{"name":"a","parameters":[]}]')).toMatch(/object/);
    expect(bad('[{"name":"a","deferrable":true,"timeout_seconds":5}]')).toMatch(/deferrable/);
    expect(bad('[{"name":"a","timeout_seconds":0}]')).toMatch(/3600/);
    expect(bad('[{"name":"a","timeout_seconds":3601}]')).toMatch(/3600/);
    expect(bad('[{"name":"a","nme":"x"}]')).toMatch(/unknown field "nme"/);
  });
});

describe('a session’s bindings the sandbox never holds', () => {
  it('are sent in their own shape, checked at their fields, and a 422 lands beside the field shown', () => {
    const inject = { ...row('GH', ''), kind: 'inject' as const, host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' };
    const placeholder = { ...row('GH', 'GITHUB_TOKEN'), kind: 'placeholder' as const, hosts: 'api.github.com' };
    const v = { ...valid(), secret_bindings: [inject, placeholder] };
    expect(validateStartSession(v)).toEqual({});
    expect(startSessionBody(v).secret_bindings).toEqual([
      { secret: 'GH', inject: { host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' } },
      { secret: 'GH', placeholder: { env: 'GITHUB_TOKEN', hosts: ['api.github.com'] } },
    ]);
    expect(validateStartSession({ ...v, secret_bindings: [{ ...inject, header: 'Bad Header' }] })['secret_bindings.0.inject.header']).toMatch(/header name/);
    const detail = [
      { loc: ['body', 'secret_bindings', 0, 'inject', 'header'], msg: 'hop-by-hop' },
      { loc: ['body', 'secret_bindings', 1, 'placeholder', 'env'], msg: 'bad variable' },
    ];
    expect(fieldErrorsOf(new ApiError(422, 'x', { detail }), v)).toEqual({ 'secret_bindings.0.inject.header': 'hop-by-hop', 'secret_bindings.1.env': 'bad variable' });
    // A missing secret of an inject binding (no variable) lands on the row that names it.
    const missing = "no secret named 'GH' in this project";
    expect(fieldErrorsOf(new ApiError(422, missing, { detail: missing }), { ...v, secret_bindings: [row('A', 'A'), inject] })).toEqual({ 'secret_bindings.1.secret': missing });
  });
});
