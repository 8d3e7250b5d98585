import { describe, expect, it } from 'vitest';
import {
  effectiveMode,
  orphanKeys,
  permissionErrors,
  permissionRowsOf,
  permissionsBody,
  permissionsSummary,
  permissionTargets,
  serverPermissionErrors,
  shownMode,
  withMode,
  withPrefixes,
  type AgentTools,
} from './permissions';

const tools = (t: Partial<AgentTools> = {}): AgentTools => ({ capabilities: null, skills: false, subagents: [], clientTools: [], ...t });
const keysOf = (t: Partial<AgentTools>) => permissionTargets(tools(t)).map((x) => x.key);

describe('permissionTargets: the keys an agent has, as the server derives them', () => {
  it('gives the default capabilities shell and the filesystem group with its four tools', () => {
    expect(keysOf({})).toEqual(['shell', 'filesystem', 'read_file', 'write_file', 'edit_file', 'list_files']);
    const targets = permissionTargets(tools());
    expect(targets.find((t) => t.key === 'filesystem')).toMatchObject({ kind: 'group', group: null });
    expect(targets.find((t) => t.key === 'edit_file')).toMatchObject({ kind: 'tool', group: 'filesystem' });
  });

  it('follows the capabilities named: python only when named, no shell or files without them', () => {
    expect(keysOf({ capabilities: ['python', 'memory'] })).toEqual(['python']);
    expect(keysOf({ capabilities: ['shell', 'compaction'] })).toEqual(['shell']);
    expect(keysOf({ capabilities: [] })).toEqual([]);
  });

  it('adds the skills group and load_skill with a skills source, whatever the capabilities', () => {
    expect(keysOf({ capabilities: [], skills: true })).toEqual(['skills', 'load_skill']);
  });

  it('adds subagents (a handoff cannot ask) and client tools, each name once', () => {
    const targets = permissionTargets(tools({ capabilities: [], subagents: [{ agent: 'researcher', mode: 'tool' }, { agent: 'closer', mode: 'handoff' }, { agent: 'researcher', mode: 'handoff' }], clientTools: ['ask_user', 'closer', ''] }));
    expect(targets.map((t) => [t.key, t.kind, t.handoff])).toEqual([
      ['researcher', 'subagent', false],
      ['closer', 'subagent', true],
      ['ask_user', 'client', false],
    ]);
  });
});

describe('the form’s rows', () => {
  it('shows a tool of a group as its group’s until it has its own, and says what applies', () => {
    let rows = permissionRowsOf({ filesystem: { mode: 'ask' } });
    expect(shownMode(rows, { key: 'read_file', group: 'filesystem' })).toBeNull();
    expect(shownMode(rows, { key: 'shell', group: null })).toBe('allow');
    expect(effectiveMode(rows, 'read_file')).toBe('ask');
    rows = withMode(rows, 'read_file', 'allow');
    expect(rows.read_file).toEqual({ mode: 'allow', allow_prefixes: [] });
    expect(effectiveMode(rows, 'read_file')).toBe('allow');
    expect(effectiveMode(rows, 'write_file')).toBe('ask');
    rows = withMode(rows, 'read_file', null);
    expect(rows.read_file).toBeUndefined();
  });

  it('drops an allow that overrides nothing, and keeps shell’s prefixes across modes', () => {
    let rows = withMode({}, 'shell', 'ask');
    rows = withPrefixes(rows, 'shell', ['ls', 'git status']);
    rows = withMode(rows, 'shell', 'deny');
    expect(rows.shell).toEqual({ mode: 'deny', allow_prefixes: ['ls', 'git status'] });
    rows = withMode(rows, 'shell', 'ask');
    expect(rows.shell.allow_prefixes).toEqual(['ls', 'git status']);
    expect(withMode({ python: { mode: 'deny', allow_prefixes: [] } }, 'python', 'allow')).toEqual({});
  });
});

describe('permissionsBody', () => {
  const targets = permissionTargets(tools({ clientTools: ['ask_user'] }));

  it('sends each entry of a key the agent has; prefixes only on shell under ask', () => {
    const rows = permissionRowsOf({ shell: { mode: 'ask', allow_prefixes: ['ls'] }, filesystem: { mode: 'deny' }, read_file: { mode: 'allow' }, ask_user: { mode: 'ask' } });
    expect(permissionsBody(rows, targets)).toEqual({ shell: { mode: 'ask', allow_prefixes: ['ls'] }, filesystem: { mode: 'deny' }, read_file: { mode: 'allow' }, ask_user: { mode: 'ask' } });
    expect(permissionsBody({ shell: { mode: 'deny', allow_prefixes: ['ls'] } }, targets)).toEqual({ shell: { mode: 'deny' } });
    expect(permissionsBody({ shell: { mode: 'ask', allow_prefixes: [] } }, targets)).toEqual({ shell: { mode: 'ask' } });
  });

  it('leaves out keys the agent no longer has (the server refuses them), and sends {} for none', () => {
    const rows = permissionRowsOf({ python: { mode: 'deny' }, gone_tool: { mode: 'ask' } });
    expect(orphanKeys(rows, targets)).toEqual(['python', 'gone_tool']);
    expect(permissionsBody(rows, targets)).toEqual({});
    expect(permissionsBody({}, targets)).toEqual({});
  });
});

describe('permissionErrors', () => {
  it('checks the prefixes of shell under ask like the server, each at its row', () => {
    const targets = permissionTargets(tools());
    const e = permissionErrors({ shell: { mode: 'ask', allow_prefixes: ['ls', ' ', 'x'.repeat(201)] } }, targets);
    expect(Object.keys(e)).toEqual(['permissions.shell.allow_prefixes.1', 'permissions.shell.allow_prefixes.2']);
    expect(permissionErrors({ shell: { mode: 'ask', allow_prefixes: Array(101).fill('ls') } }, targets)['permissions.shell.allow_prefixes']).toMatch(/100/);
    // Prefixes that are not sent are not checked.
    expect(permissionErrors({ shell: { mode: 'deny', allow_prefixes: [' '] } }, targets)).toEqual({});
  });

  it('refuses ask on a handoff', () => {
    const targets = permissionTargets(tools({ subagents: [{ agent: 'closer', mode: 'handoff' }] }));
    expect(permissionErrors({ closer: { mode: 'ask', allow_prefixes: [] } }, targets)['permissions.closer']).toMatch(/handoff/);
    expect(permissionErrors({ closer: { mode: 'deny', allow_prefixes: [] } }, targets)).toEqual({});
  });

  it('picks the server’s 422 on the permissions out of a form’s field errors', () => {
    expect(serverPermissionErrors({ name: 'x', 'permissions.shell': 'a', 'permissions.shell.allow_prefixes': 'b', permissions: 'c' })).toEqual({ 'permissions.shell': 'a', 'permissions.shell.allow_prefixes': 'b', permissions: 'c' });
  });
});

describe('permissionsSummary', () => {
  it('says what is not allowed, in the form’s order, with shell’s prefixes and a group’s tools', () => {
    const targets = permissionTargets(tools({ clientTools: ['ask_user'] }));
    expect(permissionsSummary({ ask_user: { mode: 'deny' }, shell: { mode: 'ask', allow_prefixes: ['ls', 'git status'] }, filesystem: { mode: 'ask' }, read_file: { mode: 'allow' } }, targets)).toEqual([
      'shell: ask (runs without asking: ls, git status)',
      'filesystem (read_file, write_file, edit_file, list_files): ask',
      'read_file: allow (over filesystem’s ask)',
      'ask_user: deny',
    ]);
    expect(permissionsSummary({ shell: { mode: 'allow' } })).toEqual([]);
    expect(permissionsSummary(undefined)).toEqual([]);
  });
});

describe('MCP servers and their tools', () => {
  const mcp = [{ server: 'gh', tools: ['create_issue', 'search'] }, { server: 'db', tools: [] }];

  it('lists each server’s key, then its known tools under it, after the rest', () => {
    const targets = permissionTargets(tools({ capabilities: [], clientTools: ['ask_user'], mcp }));
    expect(targets.map((t) => [t.key, t.kind, t.group])).toEqual([
      ['ask_user', 'client', null],
      ['mcp__gh', 'mcp', null],
      ['mcp__gh__create_issue', 'mcp_tool', 'mcp__gh'],
      ['mcp__gh__search', 'mcp_tool', 'mcp__gh'],
      ['mcp__db', 'mcp', null],
    ]);
  });

  it('a tool follows its server’s setting unless it has its own, as the server resolves it', () => {
    const targets = permissionTargets(tools({ mcp }));
    let rows = withMode({}, 'mcp__gh', 'ask');
    expect(effectiveMode(rows, 'mcp__gh__search')).toBe('ask');
    expect(shownMode(rows, targets.find((t) => t.key === 'mcp__gh__search')!)).toBeNull();
    // An allow on a tool overrides its server's ask, so it is kept and sent.
    rows = withMode(rows, 'mcp__gh__search', 'allow');
    expect(effectiveMode(rows, 'mcp__gh__search')).toBe('allow');
    expect(permissionsBody(rows, targets)).toEqual({ mcp__gh: { mode: 'ask' }, mcp__gh__search: { mode: 'allow' } });
    expect(permissionsSummary(permissionsBody(rows, targets), targets)).toEqual(['mcp__gh: ask', 'mcp__gh__search: allow (over mcp__gh’s ask)']);
    // Back to its server's.
    expect(withMode(rows, 'mcp__gh__search', null)).toEqual({ mcp__gh: rows.mcp__gh });
  });
});
