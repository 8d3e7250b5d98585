"""The `sandbox-agents` sqlsaber plugin without a server: its entry points as sqlsaber discovers
them, its settings resolved by sqlsaber's own code (saved, environment, secrets), what it
refuses, and the capability and backends its binding builds. The CLI end to end is
test_saber_cli.py."""
from __future__ import annotations

from importlib.metadata import entry_points
from types import SimpleNamespace

import httpx
import pytest
from sqlsaber.config.plugins import (
    PluginConfigStore,
    PluginSetupRequired,
    SavedPlugin,
    installed_plugins,
    load_plugin_settings,
    resolve_settings,
)
from sqlsaber.plugin_settings import PluginSettings
from sqlsaber_sandbox import SandboxConfig
from sqlsaber_sandbox.backends.base import SandboxError

from mockserver import SESSION_ID, MockServer, refused
from sandbox_agents_sqlsaber import SandboxAgentsBackend
from sandbox_agents_sqlsaber.capability import (
    ClientOwningBackend,
    Connection,
    SandboxAgentsCapability,
    backend_factory,
    capability,
)
from sandbox_agents_sqlsaber.settings import sandbox_config

NAME = "sandbox-agents"
SAVED = {"server_url": "http://sa.test:8000", "agent": "analyst"}
#: Every variable the settings read: a developer's shell must not leak into these tests.
ENV_NAMES = (
    "SANDBOX_AGENTS_BASE_URL",
    "SANDBOX_AGENTS_API_KEY",
    "SANDBOX_AGENTS_PROJECT",
    "SQLSABER_SANDBOX_AGENTS_AGENT",
    "SQLSABER_SANDBOX_AGENTS_ENVIRONMENT",
    "SQLSABER_SANDBOX_AGENTS_IDLE_SECONDS",
    "SQLSABER_SANDBOX_AGENTS_MAX_LIFETIME_SECONDS",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No variable of the developer's shell, and a sqlsaber configuration of the test's own
    (binding reads which plugins are enabled)."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture
def declaration() -> PluginSettings:
    found = load_plugin_settings(NAME)
    assert found is not None
    return found


def resolve(declaration, saved, **kw):
    """sqlsaber's resolution, without the credential store (secrets from the environment)."""
    return resolve_settings(NAME, declaration, saved, load_secrets=False, **kw)


def context() -> SimpleNamespace:
    """What the capability reads of sqlsaber's PluginContext when it is built."""
    return SimpleNamespace(workspace_input_resolver=None)


def test_sqlsaber_discovers_the_plugin_in_its_three_entry_point_groups():
    assert NAME in installed_plugins()
    for group, target in (
        ("sqlsaber.capabilities", "sandbox_agents_sqlsaber.capability:capability"),
        ("sqlsaber.plugin_settings", "sandbox_agents_sqlsaber.settings:settings"),
        ("sqlsaber.display_tools", "sandbox_agents_sqlsaber.capability:display_tools"),
    ):
        (ep,) = [ep for ep in entry_points(group=group) if ep.name == NAME]
        assert ep.value == target
    (display,) = [ep for ep in entry_points(group="sqlsaber.display_tools") if ep.name == NAME]
    assert set(display.load()()) == {"analyze_in_sandbox"}


def test_the_agent_is_required_and_the_server_url_defaults_to_the_clients(declaration):
    with pytest.raises(PluginSetupRequired, match="saber plugins setup sandbox-agents"):
        resolve(declaration, {})
    values = resolve(declaration, {"agent": "analyst"}).values
    assert values["server_url"] == "http://localhost:8000"
    assert values["environment"] is None and values["idle_seconds"] is None


def test_saved_settings_resolve_into_the_session_limits(declaration):
    resolved = resolve(declaration, {**SAVED, "environment": "analysis", "idle_seconds": 299.5, "max_lifetime_seconds": 900})
    assert resolved.values["idle_seconds"] == 299.5
    assert resolved.sources["agent"] == "saved"
    config = sandbox_config(resolved.values)
    assert (config.provider, config.idle_seconds, config.max_lifetime_seconds) == ("sandbox-agents", 299.5, 900)


def test_environment_variables_override_saved_settings(declaration, monkeypatch):
    monkeypatch.setenv("SANDBOX_AGENTS_BASE_URL", "https://other.test")
    monkeypatch.setenv("SANDBOX_AGENTS_API_KEY", "ak_from_env")
    monkeypatch.setenv("SQLSABER_SANDBOX_AGENTS_AGENT", "ci-analyst")
    monkeypatch.setenv("SQLSABER_SANDBOX_AGENTS_ENVIRONMENT", "env_1")
    monkeypatch.setenv("SQLSABER_SANDBOX_AGENTS_IDLE_SECONDS", "60")
    monkeypatch.setenv("SQLSABER_SANDBOX_AGENTS_MAX_LIFETIME_SECONDS", "600")
    resolved = resolve(declaration, SAVED)
    assert resolved.values["server_url"] == "https://other.test"
    assert resolved.sources["server_url"] == "environment (SANDBOX_AGENTS_BASE_URL)"
    assert (resolved.values["agent"], resolved.values["environment"]) == ("ci-analyst", "env_1")
    assert (resolved.values["idle_seconds"], resolved.values["max_lifetime_seconds"]) == (60.0, 600)
    assert resolved.secrets == {"api_key": "ak_from_env"}


def test_the_api_key_is_a_secret_that_never_goes_to_the_settings_file(declaration):
    setting = declaration.field("api_key")
    assert (setting.kind, setting.credential, setting.env) == ("secret", "sandbox-agents.api_key", "SANDBOX_AGENTS_API_KEY")
    with pytest.raises(ValueError, match="is a secret"):
        resolve(declaration, {**SAVED, "api_key": "ak_in_the_file"})


@pytest.mark.parametrize(
    "change, said",
    [
        ({"server_url": "ftp://sa.test"}, "server_url must be an http"),
        ({"server_url": "http://"}, "server_url must be an http"),
        ({"memory_mb": -1}, "memory_mb must be a positive integer"),
        ({"idle_seconds": 0}, "idle_seconds must be a finite positive number"),
        ({"max_lifetime_seconds": 0}, "max_lifetime_seconds must be a positive integer"),
    ],
)
def test_validation_refuses_what_the_server_or_the_backend_would(declaration, change, said):
    with pytest.raises(ValueError, match=said):
        resolve(declaration, {**SAVED, **change})


def test_a_remote_server_gets_a_notice_and_a_local_one_none(declaration):
    assert declaration.notice(resolve(declaration, SAVED).values) is not None
    local = {**SAVED, "server_url": "http://127.0.0.1:8000"}
    assert declaration.notice(resolve(declaration, local).values) is None


def test_binding_builds_the_capability_over_backends_of_the_configured_server(declaration):
    values = resolve(declaration, {**SAVED, "environment": "analysis", "project": "team"}).values
    factory = declaration.bind(values, {"api_key": "ak_saved"})
    made = factory(context())
    assert isinstance(made, SandboxAgentsCapability)
    assert made.id == "sandbox-agents"
    assert set(made.get_toolset().tools) == {"analyze_in_sandbox", "close_sandbox", "publish_sandbox_artifacts"}
    assert made.tool.config.provider == "sandbox-agents"
    backend = made.tool._backend_factory()
    assert isinstance(backend, ClientOwningBackend)
    assert (backend._agent, backend._environment, backend._title) == ("analyst", "analysis", "sqlsaber")
    config = backend._client._transport._config
    assert (config.base_url, config.api_key, config.project) == ("http://sa.test:8000", "ak_saved", "team")
    assert backend is not made.tool._backend_factory(), "one backend (and client) per analysis session"


def test_the_sdk_entry_point_takes_the_agent_from_the_environment(monkeypatch):
    with pytest.raises(ValueError, match="SQLSABER_SANDBOX_AGENTS_AGENT"):
        capability(context())
    monkeypatch.setenv("SQLSABER_SANDBOX_AGENTS_AGENT", "analyst")
    monkeypatch.setenv("SANDBOX_AGENTS_BASE_URL", "http://env.test:9000")
    backend = capability(context()).tool._backend_factory()
    assert backend._agent == "analyst"
    assert backend._client._transport._config.base_url == "http://env.test:9000"


class Spy:
    """Counts the closes of a client."""

    def __init__(self, client) -> None:
        self.closed = 0
        original = client.close

        async def close() -> None:
            self.closed += 1
            await original()

        client.close = close


@pytest.mark.anyio
async def test_a_backend_closes_its_own_client_once_its_session_is_deleted():
    server = MockServer()
    server.route("DELETE", f"/api/sessions/{SESSION_ID}", refused(500, "docker is unreachable"), httpx.Response(204))
    client = server.client()
    spy = Spy(client)
    backend = ClientOwningBackend(client, "analyst")
    await backend.open(SandboxConfig())
    with pytest.raises(SandboxError):
        await backend.close()
    assert spy.closed == 0, "a failed delete keeps the client for the retry"
    await backend.close()
    assert spy.closed == 1 and backend.session_id is None


@pytest.mark.anyio
async def test_a_backend_never_opened_closes_its_client():
    client = MockServer().client()
    spy = Spy(client)
    await ClientOwningBackend(client, "analyst").close()
    assert spy.closed == 1


def test_the_factory_makes_client_owning_backends():
    backend = backend_factory(Connection(agent="a", server_url="http://x.test"))()
    assert isinstance(backend, SandboxAgentsBackend) and isinstance(backend, ClientOwningBackend)


def test_binding_refuses_while_sqlsaber_sandboxs_own_plugin_would_load_too(declaration, tmp_path):
    """Its tools have our tools' names: pydantic-ai would fail the first question with a
    traceback. Unconfigured (sqlsaber skips it) or disabled, it is no obstacle."""
    values = resolve(declaration, SAVED).values
    store = PluginConfigStore()
    assert store.path.is_relative_to(tmp_path)
    declaration.bind(values, {})
    store.save("sandbox", SavedPlugin(True, {"provider": "docker"}))
    with pytest.raises(ValueError, match="saber plugins disable sandbox"):
        declaration.bind(values, {})
    store.save("sandbox", SavedPlugin(False, {"provider": "docker"}))
    declaration.bind(values, {})
