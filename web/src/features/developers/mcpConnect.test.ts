import { describe, expect, it } from 'vitest';
import { MCP_TOOLS, mcpSnippets, mcpUrl } from './mcpConnect';

describe('mcpSnippets', () => {
  const signedIn = mcpSnippets({ origin: 'https://agents.example.com', authRequired: true, project: 'team' });

  it('points every client at the origin’s /mcp', () => {
    expect(mcpUrl('http://h:8000/')).toBe('http://h:8000/mcp');
    expect(signedIn.url).toBe('https://agents.example.com/mcp');
    for (const s of [signedIn.claude, signedIn.cursor, signedIn.python]) expect(s).toContain('https://agents.example.com/mcp');
  });

  it('writes Claude Code’s command with the key and the project as headers', () => {
    expect(signedIn.claude).toBe(
      'claude mcp add --transport http sandbox-agents https://agents.example.com/mcp \\\n' +
        '  --header "Authorization: Bearer $SANDBOX_AGENTS_API_KEY" \\\n' +
        '  --header "X-Project: team"',
    );
  });

  it('writes Cursor’s mcp.json as JSON, the key read from the environment', () => {
    expect(JSON.parse(signedIn.cursor)).toEqual({
      mcpServers: {
        'sandbox-agents': {
          url: 'https://agents.example.com/mcp',
          headers: { Authorization: 'Bearer ${env:SANDBOX_AGENTS_API_KEY}', 'X-Project': 'team' },
        },
      },
    });
  });

  it('writes a Python script on the mcp SDK’s client that follows the turn’s progress', () => {
    const py = signedIn.python;
    expect(py).toContain('from mcp import Client');
    expect(py).toContain('from mcp.client.streamable_http import streamable_http_client');
    expect(py).toContain('httpx2.AsyncClient(headers=HEADERS');
    expect(py).toContain('streamable_http_client(URL, http_client=http)');
    expect(py).toContain(`"Authorization": f"Bearer {os.environ['SANDBOX_AGENTS_API_KEY']}"`);
    expect(py).toContain('"X-Project": "team"');
    const order = ['"list_agents"', '"create_session"', '"send_message"'].map((t) => py.indexOf(t));
    expect(order.every((i) => i > 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(py).toContain('progress_callback=on_progress');
  });

  it('sends no key in open mode, and no project when none is named', () => {
    const open = mcpSnippets({ origin: 'http://127.0.0.1:8000', authRequired: false, project: null });
    expect(open.claude).toBe('claude mcp add --transport http sandbox-agents http://127.0.0.1:8000/mcp');
    expect(JSON.parse(open.cursor)).toEqual({ mcpServers: { 'sandbox-agents': { url: 'http://127.0.0.1:8000/mcp' } } });
    expect(open.python).not.toContain('Authorization');
    expect(open.python).not.toContain('import asyncio, os');
    expect(open.python).toContain('HEADERS = {}');
  });
});

describe('MCP_TOOLS', () => {
  it('lists the nine tools /mcp serves, each once, with a line each', () => {
    expect(MCP_TOOLS.map((t) => t.name)).toEqual([
      'list_agents',
      'create_session',
      'send_message',
      'answer_tool_call',
      'answer_approval',
      'read_events',
      'list_files',
      'read_file',
      'stop_session',
    ]);
    for (const t of MCP_TOOLS) expect(t.what.length).toBeGreaterThan(0);
  });
});
