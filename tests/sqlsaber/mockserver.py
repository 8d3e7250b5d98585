"""A scripted stand-in for the server, for the backend's unit tests: an `httpx.MockTransport`
whose routes a test sets, and the requests it received.

A route is `(method, path)` to a handler, or to a list of handlers answering one request each
(the last one repeats). A handler is an `httpx.Response`, an exception to raise (a transport
failure), or a callable taking the request. Unrouted requests are a 599 naming them, so a test
sees what it forgot.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import sandbox_agents

Handler = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]

SESSION_ID = "11111111-2222-3333-4444-555555555555"


def session_json(status: str = "running", **extra: Any) -> dict[str, Any]:
    return {"id": SESSION_ID, "agent_id": "agent-1", "status": status, **extra}


#: The session settings the server echoes on the session (additions to the 0.7 contract).
SESSION_SETTINGS = ("idle_ttl_seconds", "max_lifetime_seconds", "resources")


def created(request: httpx.Request) -> httpx.Response:
    """A 202 with the new session, echoing its settings as a server that knows them does."""
    body = json.loads(request.content)
    echoed = {field: body.get(field) for field in SESSION_SETTINGS}
    return ok(session_json("provisioning", metadata=body.get("metadata", {}), **echoed), 202)


def ok(body: Any = None, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body if body is not None else {})


def refused(status: int, detail: str, **extra: Any) -> httpx.Response:
    return httpx.Response(status, json={"detail": detail, **extra})


class MockServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Handler]] = {}
        self.requests: list[httpx.Request] = []
        self.route("GET", f"/api/sessions/{SESSION_ID}", ok(session_json()))
        self.route("POST", "/api/sessions", created)

    def route(self, method: str, path: str, *handlers: Handler) -> None:
        self.routes[(method, path)] = list(handlers)

    def client(self) -> sandbox_agents.AsyncClient:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self._handle))
        return sandbox_agents.AsyncClient(base_url="http://server.test", http_client=http, max_retries=0)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handlers = self.routes.get((request.method, request.url.path))
        if not handlers:
            return httpx.Response(599, json={"detail": f"unrouted {request.method} {request.url.path}"})
        handler = handlers.pop(0) if len(handlers) > 1 else handlers[0]
        if isinstance(handler, Exception):
            raise handler
        if isinstance(handler, httpx.Response):
            # A fresh response each time: one is bound to the request it answered.
            return httpx.Response(handler.status_code, headers=handler.headers, content=handler.content)
        return handler(request)

    def sent(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    def body(self, method: str, path: str, index: int = -1) -> Any:
        return json.loads(self.sent(method, path)[index].content)
