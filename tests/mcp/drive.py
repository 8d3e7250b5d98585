"""Drives a whole session through the control plane's /mcp with the Python `mcp` package's
client (nothing of ours on this side), and prints what it saw as one JSON object. Run by
crates/server/tests/api/mcp_server.rs:

    python drive.py URL TOKEN AGENT
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def text(result):
    return result.content[0].text if result.content else ""


async def main(url, token, agent):
    out = {"progress": []}

    async def on_progress(progress, total, message):
        out["progress"].append(message)

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            agents = await client.call_tool("list_agents", {})
            out["agents"] = [a["slug"] for a in json.loads(text(agents))]
            created = await client.call_tool("create_session", {"agent_id": agent})
            sid = created.structured_content["id"]
            reply = await client.call_tool(
                "send_message", {"session_id": sid, "prompt": "hello"}, progress_callback=on_progress
            )
            out["reply"] = text(reply)
            out["end"] = reply.structured_content
            bad = await client.call_tool("create_session", {"agent_id": "no-such-agent"})
            out["bad"] = {"is_error": bad.is_error, "text": text(bad), "structured": bad.structured_content}
            events = json.loads(text(await client.call_tool("read_events", {"session_id": sid})))
            if isinstance(events, dict):
                events = events.get("events", events.get("data", []))
            out["event_types"] = [e["type"] for e in events]
            stopped = await client.call_tool("stop_session", {"session_id": sid})
            out["stopped"] = not stopped.is_error
    print(json.dumps(out))


asyncio.run(main(*sys.argv[1:4]))
