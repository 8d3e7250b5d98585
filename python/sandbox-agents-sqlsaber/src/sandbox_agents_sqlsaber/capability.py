"""The `sandbox-agents` capability: sqlsaber-sandbox's analysis tools, with every sandbox a
session of a Sandbox Agents server (the `sqlsaber.capabilities` and `sqlsaber.display_tools`
entry points).

It is sqlsaber-sandbox's own `Sandbox` capability (the `analyze_in_sandbox` subagent and its
`execute_python` kernel, `close_sandbox`, `publish_sandbox_artifacts`) given a backend factory
that makes a `SandboxAgentsBackend` per analysis session. sqlsaber-sandbox's `sandbox` plugin
selects its provider from a closed list, which is why this is a plugin of its own. The two
offer the same tool names, so only one may load: binding refuses while the other would
(`settings.sandbox_plugin_loads`), and says to run `saber plugins disable sandbox`.

Invariants: one client per backend, made when sqlsaber asks for the backend and closed once the
backend's session is deleted (a close that failed keeps it, so a retried close can still reach
the server); nothing is created before the first analysis.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sandbox_agents import AsyncClient
from sqlsaber.capabilities.plugins import PluginContext
from sqlsaber.tools.base import Tool
from sqlsaber_sandbox.capability import Sandbox
from sqlsaber_sandbox.capability import display_tools as _sandbox_display_tools
from sqlsaber_sandbox.config import DEFAULT_SANDBOX_CONFIG, SandboxConfig

from .backend import SandboxAgentsBackend
from .settings import PLUGIN_NAME

#: The session title the server shows for sessions opened from saber.
SESSION_TITLE = "sqlsaber"
#: Where `capability` finds the agent (and environment) when it is given none, as the CLI
#: settings do (their `env`); the connection itself falls back to the client's variables.
ENV_AGENT = "SQLSABER_SANDBOX_AGENTS_AGENT"
ENV_ENVIRONMENT = "SQLSABER_SANDBOX_AGENTS_ENVIRONMENT"


@dataclass(frozen=True)
class Connection:
    """Which server, as whom, and which agent's sessions. None values fall back to the
    published client's environment variables (`SANDBOX_AGENTS_BASE_URL`, `..._API_KEY`,
    `..._PROJECT`), then its defaults."""

    agent: str
    server_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    project: str | None = None
    environment: str | None = None


class ClientOwningBackend(SandboxAgentsBackend):
    """A `SandboxAgentsBackend` that owns its client: sqlsaber-sandbox closes the backends it
    is given, and nobody else holds the client to close it."""

    async def close(self) -> None:
        await super().close()
        # Reached only when the session is deleted (or never was): a failed delete raised above
        # and kept the client for the retry.
        await self._client.close()


def backend_factory(connection: Connection) -> Callable[[], SandboxAgentsBackend]:
    """Makes one backend, with a client of its own, per sqlsaber-sandbox session."""

    def make() -> SandboxAgentsBackend:
        client = AsyncClient(
            base_url=connection.server_url, api_key=connection.api_key, project=connection.project
        )
        return ClientOwningBackend(
            client, connection.agent, environment=connection.environment, title=SESSION_TITLE
        )

    return make


class SandboxAgentsCapability(Sandbox):
    """sqlsaber-sandbox's capability over Sandbox Agents sessions."""

    id = PLUGIN_NAME
    description = "Delegate analysis to a persistent Python sandbox in a Sandbox Agents session."


def capability(
    context: PluginContext,
    *,
    connection: Connection | None = None,
    config: SandboxConfig = DEFAULT_SANDBOX_CONFIG,
    model_name: str | None = None,
    model_api_key: str | None = None,
) -> SandboxAgentsCapability:
    """The capability, built lazily: no session exists before the first analysis.

    Without `connection` (the SDK loading the entry point by itself), the agent comes from
    `SQLSABER_SANDBOX_AGENTS_AGENT`, the environment from `SQLSABER_SANDBOX_AGENTS_ENVIRONMENT`
    and the server from the client's variables. `model_name`/`model_api_key` choose the
    analyst's model, as with sqlsaber-sandbox (default: the session's)."""
    if connection is None:
        agent = os.environ.get(ENV_AGENT, "").strip()
        if not agent:
            raise ValueError(
                f"The sandbox-agents capability needs an agent: set {ENV_AGENT}, pass "
                "connection=Connection(agent=...), or run: saber plugins setup sandbox-agents"
            )
        connection = Connection(agent=agent, environment=os.environ.get(ENV_ENVIRONMENT) or None)
    return SandboxAgentsCapability(
        context,
        config=config,
        backend_factory=backend_factory(connection),
        model_name=model_name,
        api_key=model_api_key,
    )


def display_tools() -> Mapping[str, Tool]:
    """How the CLI renders the tools (sqlsaber-sandbox's renderers: the tools are its own)."""
    return _sandbox_display_tools()
