import { describe, expect, it } from 'vitest';
import { isMcpServerName, mcpKeyProblem, mcpToolName, mcpToolsNamed, parseMcpKey } from './mcp';

describe('MCP names', () => {
  it('reads a key back into its server and tool, the server ending at the first __', () => {
    expect(parseMcpKey('mcp__github')).toEqual({ server: 'github', tool: null });
    expect(parseMcpKey('mcp__github__create_issue')).toEqual({ server: 'github', tool: 'create_issue' });
    expect(parseMcpKey('mcp__gh__a__b')).toEqual({ server: 'gh', tool: 'a__b' });
    expect(parseMcpKey(mcpToolName('calc', 'add'))).toEqual({ server: 'calc', tool: 'add' });
    for (const k of ['shell', 'mcp__', 'mcp__gh__', 'mcp__bad name', 'MCP__gh']) expect(parseMcpKey(k)).toBeNull();
  });

  it('takes server names as the server does: 1 to 24 of [A-Za-z0-9_-], without __, not ending with _', () => {
    expect(['gh', 'a-b_c', 'x'.repeat(24)].every(isMcpServerName)).toBe(true);
    expect(['', 'a__b', 'gh_', 'x'.repeat(25), 'a b', 'é'].some(isMcpServerName)).toBe(false);
  });

  it('finds the tools permission keys name for a server, once each', () => {
    expect(mcpToolsNamed('gh', ['shell', 'mcp__gh', 'mcp__gh__a', 'mcp__other__b', 'mcp__gh__c', 'mcp__gh__a'])).toEqual(['a', 'c']);
  });

  it('says what keeps a typed key from naming a tool of the agent’s servers', () => {
    expect(mcpKeyProblem('mcp__gh__create_issue', ['gh'])).toBeNull();
    expect(mcpKeyProblem('create_issue', ['gh'])).toMatch(/mcp__<server>__<tool>/);
    expect(mcpKeyProblem('mcp__other__x', ['gh', 'db'])).toBe('The agent has no MCP server other (it has gh, db).');
    expect(mcpKeyProblem('mcp__gh', ['gh'])).toMatch(/server’s key/);
    expect(mcpKeyProblem(`mcp__gh__${'x'.repeat(60)}`, ['gh'])).toMatch(/at most 64/);
    expect(mcpKeyProblem('mcp__gh__a.b', ['gh'])).toMatch(/letters, digits/);
  });
});
