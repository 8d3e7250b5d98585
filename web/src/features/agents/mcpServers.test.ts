import { describe, expect, it } from 'vitest';
import { emptyHeaderRow, emptyServerRow, errorsAt, errorsElsewhere, joinCommand, mcpServerErrors, serverBody, serverRowOf, splitCommand, type McpServer, type McpServerRow } from './mcpServers';

const remote = (patch: Partial<McpServerRow> = {}): McpServerRow => ({ ...emptyServerRow(), name: 'gh', url: 'https://example.com/mcp', ...patch });
const local = (patch: Partial<McpServerRow> = {}): McpServerRow => ({ ...emptyServerRow(), name: 'fs', kind: 'sandbox', command: 'npx -y server', ...patch });

describe('a command on one line', () => {
  it('splits at unquoted spaces, with quotes and escapes as a shell reads them', () => {
    expect(splitCommand('  npx  -y @modelcontextprotocol/server-everything ')).toEqual(['npx', '-y', '@modelcontextprotocol/server-everything']);
    expect(splitCommand(`python -c 'print("a b")' "x \\"y\\"" a\\ b ''`)).toEqual(['python', '-c', 'print("a b")', 'x "y"', 'a b', '']);
    expect(splitCommand('')).toEqual([]);
    expect(splitCommand("echo 'open")).toBeNull();
    expect(splitCommand('echo "open')).toBeNull();
  });

  it('joins words so they split back the same', () => {
    for (const words of [['npx', '-y', 'pkg@1.2'], ['sh', '-c', "echo 'hi' && ls"], ['a b', '', 'x"y', "it's"]]) expect(splitCommand(joinCommand(words))).toEqual(words);
    expect(joinCommand(['python', '-m', 'server'])).toBe('python -m server');
  });
});

describe('rows and the API’s shape', () => {
  it('reads a remote and a local server back as they were sent', () => {
    const servers: McpServer[] = [
      { name: 'gh', url: 'https://example.com/mcp', headers: { 'X-Team': 'core', Authorization: { secret: 'GH_TOKEN', format: 'Bearer {value}' } }, allowed_tools: ['search'], required: true, timeout_seconds: 30 },
      { name: 'fs', command: ['python', '-c', 'run("a b")'], env: { MODE: 'ro' }, allowed_tools: null, required: false, timeout_seconds: null },
    ];
    const rows = servers.map(serverRowOf);
    expect(rows[0]).toMatchObject({ kind: 'remote', allTools: false, allowedTools: ['search'], timeout: '30' });
    expect(rows[0].headers.map((h) => [h.name, h.kind])).toEqual([['X-Team', 'text'], ['Authorization', 'secret']]);
    expect(rows[1]).toMatchObject({ kind: 'sandbox', allTools: true, timeout: '', env: [{ key: 'MODE', value: 'ro' }] });
    expect(rows.map(serverBody)).toEqual(servers);
  });

  it('sends only the chosen kind’s fields, and a secret header’s format', () => {
    const both = remote({ command: 'kept while switching', env: [{ key: 'A', value: '1' }], headers: [{ ...emptyHeaderRow(), name: 'Authorization', kind: 'secret', secret: 'TOKEN', value: 'old text' }] });
    expect(serverBody(both)).toEqual({ name: 'gh', url: 'https://example.com/mcp', headers: { Authorization: { secret: 'TOKEN', format: '{value}' } }, allowed_tools: null, required: false, timeout_seconds: null });
    expect(serverBody({ ...both, kind: 'sandbox', command: 'run it' })).toEqual({ name: 'gh', command: ['run', 'it'], env: { A: '1' }, allowed_tools: null, required: false, timeout_seconds: null });
  });
});

describe('the form’s checks, keyed as the server’s 422', () => {
  it('passes good servers', () => {
    expect(mcpServerErrors([remote(), local({ timeout: '600', allTools: false, allowedTools: ['read_file'] })])).toEqual({});
  });

  it('names each bad field', () => {
    const e = mcpServerErrors([
      remote({ name: 'a__b', url: 'ftp://x', timeout: '0', allTools: false, allowedTools: ['bad name'] }),
      remote({ name: 'A__', headers: [{ ...emptyHeaderRow(), name: 'Content-Type', value: 'x' }, { ...emptyHeaderRow(), name: 'X', kind: 'secret', secret: '', format: 'Bearer' }] }),
      local({ name: 'GH', command: "run 'open" }),
      local({ name: 'gh2', command: '', env: [{ key: '1X', value: '' }, { key: 'A', value: '' }, { key: 'A', value: '' }] }),
    ]);
    expect(Object.keys(e).sort()).toEqual(
      [
        'mcp_servers.0.name',
        'mcp_servers.0.url',
        'mcp_servers.0.timeout_seconds',
        'mcp_servers.0.allowed_tools',
        'mcp_servers.1.name',
        'mcp_servers.1.headers.0.name',
        'mcp_servers.1.headers.1.secret',
        'mcp_servers.1.headers.1.format',
        'mcp_servers.2.command',
        'mcp_servers.3.command',
        'mcp_servers.3.env.0.key',
        'mcp_servers.3.env.2.key',
      ].sort(),
    );
    expect(e['mcp_servers.2.command']).toBe('A quote is not closed.');
    // Names are unique whatever their case, as the server compares them.
    expect(mcpServerErrors([remote({ name: 'gh' }), remote({ name: 'GH' })])).toEqual({ 'mcp_servers.1.name': 'Another server has this name.' });
    expect(mcpServerErrors(Array.from({ length: 17 }, (_, i) => remote({ name: `s${i}` }))).mcp_servers).toMatch(/at most 16/);
  });

  it('puts a message under its field, and the rest where the list shows them', () => {
    const errors = { 'mcp_servers.0.command.3': 'too long', 'mcp_servers.0.command': 'bad', 'mcp_servers.0': 'url or command', 'mcp_servers.5.url': 'gone row', mcp_servers: 'too many', 'mcp_servers.1.url': 'private' };
    expect(errorsAt(errors, 'mcp_servers.0.command')).toBe('too long bad');
    expect(errorsAt(errors, 'mcp_servers.0.url')).toBeUndefined();
    expect(errorsElsewhere(errors, 2)).toEqual([
      ['mcp_servers.0', 'url or command'],
      ['mcp_servers.5.url', 'gone row'],
      ['mcp_servers', 'too many'],
    ]);
  });
});
