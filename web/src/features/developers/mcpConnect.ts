// How an MCP client connects to this deployment's `/mcp` (crates/api/src/mcp): the snippets
// the Developers page shows. `/mcp` takes the same headers as `/api` (the server runs each tool
// as the REST call it mirrors, with the caller's headers), so the key goes in Authorization
// only where the deployment asks for one, and the project in X-Project as the API reads it.
// Pure (no React), so the unit test reads the very text the page shows.

export type McpConnectOptions = {
  /** The deployment's origin, as the browser sees it (window.location.origin). */
  origin: string;
  /** False in open mode: no key exists, so none is sent. */
  authRequired: boolean;
  /** The project's slug, or null when the server needs none named. */
  project?: string | null;
};

export const MCP_SERVER_NAME = 'sandbox-agents';

/** The tools `/mcp` lists (crates/api/src/mcp/tools.rs), in its order, one line each. */
export const MCP_TOOLS: { name: string; what: string }[] = [
  { name: 'list_agents', what: 'the project’s agents' },
  { name: 'create_session', what: 'a session of an agent; waits until its sandbox runs unless wait: false' },
  { name: 'send_message', what: 'starts a turn and waits for its end (wait, timeout_seconds), sending each event as a progress notification' },
  { name: 'answer_tool_call', what: 'answers a client tool call the session waits on' },
  { name: 'answer_approval', what: 'allows or denies a call the agent’s permissions ask a person about' },
  { name: 'read_events', what: 'a page of the session’s event log after a cursor' },
  { name: 'list_files', what: 'the files of the session’s workspace' },
  { name: 'read_file', what: 'one file of the workspace' },
  { name: 'stop_session', what: 'stops the sandbox, archiving its workspace' },
];

export const mcpUrl = (origin: string) => `${origin.replace(/\/+$/, '')}/mcp`;

export function mcpSnippets(o: McpConnectOptions) {
  const url = mcpUrl(o.origin);
  const project = o.project || null;
  const q = (s: string) => JSON.stringify(s);

  // Claude Code: the shell expands $SANDBOX_AGENTS_API_KEY when the command runs.
  const claudeHeaders = [
    ...(o.authRequired ? ['Authorization: Bearer $SANDBOX_AGENTS_API_KEY'] : []),
    ...(project ? [`X-Project: ${project}`] : []),
  ];
  const claude = [`claude mcp add --transport http ${MCP_SERVER_NAME} ${url}`, ...claudeHeaders.map((h) => `--header "${h}"`)].join(' \\\n  ');

  // Cursor expands ${env:NAME} itself, so the key stays out of the file.
  const cursorHeaders: Record<string, string> = {
    ...(o.authRequired ? { Authorization: 'Bearer ${env:SANDBOX_AGENTS_API_KEY}' } : {}),
    ...(project ? { 'X-Project': project } : {}),
  };
  const server: Record<string, unknown> = { url, ...(Object.keys(cursorHeaders).length ? { headers: cursorHeaders } : {}) };
  const cursor = JSON.stringify({ mcpServers: { [MCP_SERVER_NAME]: server } }, null, 2);

  const pyHeaders = [
    ...(o.authRequired ? [`"Authorization": f"Bearer {os.environ['SANDBOX_AGENTS_API_KEY']}"`] : []),
    ...(project ? [`"X-Project": ${q(project)}`] : []),
  ];
  // `mcp` 2.x brings httpx2; the client's headers go with every request of the transport.
  // No timeout: send_message lasts as long as the turn (up to its timeout_seconds).
  const python = `import asyncio${o.authRequired ? ', os' : ''}

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = ${q(url)}
HEADERS = {${pyHeaders.join(', ')}}


async def on_progress(progress, total, message):
    print("event:", message)  # each event of the turn, as it happens


async def main():
    async with httpx2.AsyncClient(headers=HEADERS, timeout=None) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as client:
            print((await client.call_tool("list_agents", {})).content[0].text)
            # agent_id: an agent's slug or id, from list_agents
            created = await client.call_tool("create_session", {"agent_id": "analyst"})
            session_id = created.structured_content["id"]
            reply = await client.call_tool(
                "send_message",
                {"session_id": session_id, "prompt": "Write output/report.md with three findings."},
                progress_callback=on_progress,
            )
            print(reply.content[0].text)


asyncio.run(main())`;
  return { url, claude, cursor, python };
}
