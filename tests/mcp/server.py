"""An MCP server for the tests, made with the Python `mcp` package, nothing of ours inside:
the current SDK (2.x, `MCPServer`) speaks the 2026-07-28 revision (`server/discover`,
stateless requests) beside the earlier ones; the 1.x SDK (`FastMCP`) speaks only the earlier
ones, with the `initialize` handshake and `Mcp-Session-Id`, as most deployed servers do.
Started by crates/testkit/src/mcp.rs from target/mcp-venv (2.x) or target/mcp-legacy-venv
(1.x), both installed by scripts/test from tests/mcp/requirements*.txt.

    python server.py --port 8123 [--token SECRET]
    python server.py --stdio

With --token, every request must carry `Authorization: Bearer SECRET` (401 otherwise), and
the tool `authorization` answers the header the last request carried: a server that echoes
its credentials, as the control plane's masking must expect. With
--stdio it speaks over its stdin and stdout instead, as a server an agent runs in its sandbox
does (crates/server/tests/api/mcp_stdio.rs installs the SDK there with an environment's pip
packages and uploads this file).
"""

import argparse
import asyncio
import os

try:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # the 1.x SDK
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
parser.add_argument("--token")
parser.add_argument("--stdio", action="store_true")
args = parser.parse_args()

server = Server("testkit-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Always fails, saying `message` (a tool error: the SDK passes its text on)."""
    raise ToolError(message)


@server.tool()
async def sleep(seconds: float) -> str:
    """Waits `seconds`, then says so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def environment(name: str) -> str:
    """Where the server runs: its working directory and the value of the variable `name`."""
    return f"cwd={os.getcwd()} {name}={os.environ.get(name, '')}"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool named `name` (answering its own name) and says the tool list changed: to
    the client of the session (1.x), to `subscriptions/listen` subscribers (2.x)."""
    server.add_tool(lambda: name, name=name, description="Added at run time; answers its name.")
    if hasattr(ctx, "notify_tools_changed"):
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


#: The Authorization header of the last request (with --token).
last_authorization = ""


def authorization() -> str:
    """Echoes the Authorization header the server was sent."""
    return f"sent: {last_authorization}"


def guarded(app, token):
    """The app, refusing requests without the bearer token."""
    expected = f"Bearer {token}".encode()

    async def wrapped(scope, receive, send):
        global last_authorization
        if scope["type"] == "http":
            last_authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return wrapped


if args.stdio:
    server.run("stdio")
else:
    import uvicorn

    if args.token:
        server.add_tool(authorization, name="authorization")
    app = server.streamable_http_app()
    if args.token:
        app = guarded(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
