"""The `sandbox-agents` plugin's CLI settings (the `sqlsaber.plugin_settings` entry point).

sqlsaber's CLI reads this declaration to run `saber plugins setup sandbox-agents`, to show the
settings (`saber plugins show sandbox-agents`) and, at the start of every `saber` session, to
resolve them (option > environment > saved > default) and `bind` them into the capability
factory. sqlsaber keeps the non-secret values in its `plugin_config.json` and the API key in
the OS credential store (keyring, service `sqlsaber-plugins`, name `sandbox-agents.api_key`),
never in the file.

Invariants: declaring is side-effect free (no network, no prompts, no capability built);
`validate` refuses everything the backend would refuse later (`check_config`), so a bad value
is reported by `setup`, not in the middle of an analysis; the environment variables of the
connection are the published client's own (`SANDBOX_AGENTS_BASE_URL`,
`SANDBOX_AGENTS_API_KEY`, `SANDBOX_AGENTS_PROJECT`), so one exported set serves both.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from sqlsaber.plugin_settings import PluginSettings, Setting, SettingsValues, SettingValue
from sqlsaber_sandbox.config import DEFAULT_SANDBOX_CONFIG, SandboxConfig

from .backend import check_config

if TYPE_CHECKING:
    from sqlsaber.capabilities.plugins import PluginContext

    from .capability import SandboxAgentsCapability

#: The plugin's name: its entry points' and its `saber plugins` commands'.
PLUGIN_NAME = "sandbox-agents"
#: sqlsaber-sandbox's own plugin, whose tools have the same names.
SANDBOX_PLUGIN = "sandbox"
#: The `SandboxConfig.provider` the settings produce (the backend accepts it, or None).
PROVIDER = "sandbox-agents"
#: Where the published client looks when no URL is given.
DEFAULT_SERVER_URL = "http://localhost:8000"
#: Hosts whose server is this machine: no notice that data leaves it.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _resolved(values: SettingsValues, name: str, default: SettingValue) -> SettingValue:
    return values[name] if name in values else default


def sandbox_config(values: SettingsValues) -> SandboxConfig:
    """The `SandboxConfig` the settings describe; ValueError for one the server cannot honour."""
    defaults = DEFAULT_SANDBOX_CONFIG
    config = SandboxConfig(
        provider=PROVIDER,
        cpu_cores=cast(float | None, values.get("cpu_cores")),
        memory_mb=cast(int | None, values.get("memory_mb")),
        open_seconds=cast(int, _resolved(values, "open_seconds", defaults.open_seconds)),
        transport_seconds=cast(int, _resolved(values, "transport_seconds", defaults.transport_seconds)),
        cell_seconds=cast(float | None, _resolved(values, "cell_seconds", defaults.cell_seconds)),
        idle_seconds=cast(float | None, values.get("idle_seconds")),
        max_lifetime_seconds=cast(int | None, values.get("max_lifetime_seconds")),
    )
    check_config(config)
    return config


def server_url(values: SettingsValues) -> str:
    """The server's base URL; ValueError unless it is an http(s) URL with a host."""
    url = cast(str, values.get("server_url") or DEFAULT_SERVER_URL).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"server_url must be an http(s) URL such as {DEFAULT_SERVER_URL}, not {url!r}")
    return url


def _validate(values: SettingsValues) -> None:
    server_url(values)
    sandbox_config(values)


def sandbox_plugin_loads() -> bool:
    """Whether sqlsaber-sandbox's own `sandbox` plugin will be loaded too, as sqlsaber's CLI
    decides it (installed, enabled, its settings complete). Its tools have the same names as
    ours, and pydantic-ai refuses two tools of one name with a traceback in the middle of
    the first question."""
    from sqlsaber.config.plugins import (
        PluginConfigStore,
        installed_plugins,
        load_plugin_settings,
        resolve_settings,
    )

    if SANDBOX_PLUGIN not in installed_plugins():
        return False
    saved = PluginConfigStore().get(SANDBOX_PLUGIN)
    if not saved.enabled:
        return False
    declaration = load_plugin_settings(SANDBOX_PLUGIN)
    if declaration is None:
        return True
    try:
        resolve_settings(SANDBOX_PLUGIN, declaration, saved.settings, load_secrets=False)
    except ValueError:
        return False  # skipped with a warning, or refused on its own
    return True


def _bind(values: SettingsValues, secrets: Mapping[str, str]) -> Callable[[PluginContext], SandboxAgentsCapability]:
    from .capability import Connection, capability

    if sandbox_plugin_loads():
        raise ValueError(
            f"sqlsaber-sandbox's '{SANDBOX_PLUGIN}' plugin is enabled too, and it offers the same "
            f"tools (analyze_in_sandbox): keep one. Run: saber plugins disable {SANDBOX_PLUGIN} "
            f"(or saber plugins disable {PLUGIN_NAME})"
        )
    config = sandbox_config(values)
    connection = Connection(
        server_url=server_url(values),
        api_key=secrets.get("api_key"),
        project=cast(str | None, values.get("project")),
        agent=cast(str, values["agent"]),
        environment=cast(str | None, values.get("environment")),
    )

    def create_capability(context: PluginContext) -> SandboxAgentsCapability:
        return capability(context, connection=connection, config=config)

    return create_capability


def _notice(values: SettingsValues) -> str | None:
    try:
        host = urlsplit(server_url(values)).hostname
    except ValueError:
        return None
    if host in LOOPBACK_HOSTS:
        return None
    return (
        f"Selected query results and files are uploaded to the Sandbox Agents server at {host}, "
        "and the analysis runs there."
    )


settings = PluginSettings(
    fields=(
        Setting(
            name="server_url",
            label="Sandbox Agents server URL",
            default=DEFAULT_SERVER_URL,
            env="SANDBOX_AGENTS_BASE_URL",
            required=True,
            help="The server's base URL, e.g. http://localhost:8000.",
        ),
        Setting(
            name="api_key",
            label="API key",
            kind="secret",
            env="SANDBOX_AGENTS_API_KEY",
            credential="sandbox-agents.api_key",
            help="An API key (ak_...) of the server, kept in the OS credential store; "
            "leave blank for a server in open mode.",
        ),
        Setting(
            name="agent",
            label="Agent (slug or id)",
            env="SQLSABER_SANDBOX_AGENTS_AGENT",
            required=True,
            help="The agent whose sessions hold the kernels; one with the python capability "
            "and no environment boots in the server's built-in analysis environment.",
        ),
        Setting(
            name="environment",
            label="Environment (id or name)",
            env="SQLSABER_SANDBOX_AGENTS_ENVIRONMENT",
            help="Blank uses the agent's environment, else the server's default.",
        ),
        Setting(
            name="idle_seconds",
            label="Idle timeout (seconds)",
            kind="number",
            env="SQLSABER_SANDBOX_AGENTS_IDLE_SECONDS",
            help="The session's idle_ttl_seconds (rounded up); blank uses the agent's or the server's.",
        ),
        Setting(
            name="max_lifetime_seconds",
            label="Maximum lifetime (seconds)",
            kind="integer",
            env="SQLSABER_SANDBOX_AGENTS_MAX_LIFETIME_SECONDS",
            help="The session's max_lifetime_seconds; blank uses the server's.",
        ),
        Setting(
            name="project",
            label="Project (id or slug)",
            env="SANDBOX_AGENTS_PROJECT",
            advanced=True,
            help="Sent as X-Project; blank uses the key's project or the server's only one.",
        ),
        Setting(
            name="cpu_cores",
            label="CPU cores",
            kind="number",
            advanced=True,
            help="The session's resources.cpus; blank uses the server's default.",
        ),
        Setting(
            name="memory_mb",
            label="Memory (MiB)",
            kind="integer",
            advanced=True,
            help="The session's resources.memory_mb; blank uses the server's default.",
        ),
        Setting(
            name="open_seconds",
            label="Open timeout (seconds)",
            kind="integer",
            default=DEFAULT_SANDBOX_CONFIG.open_seconds,
            advanced=True,
            help="How long a session may take to be running (an environment's first build can be longer).",
        ),
        Setting(
            name="transport_seconds",
            label="Transport timeout (seconds)",
            kind="integer",
            default=DEFAULT_SANDBOX_CONFIG.transport_seconds,
            advanced=True,
        ),
        Setting(
            name="cell_seconds",
            label="Cell timeout (seconds)",
            kind="number",
            default=DEFAULT_SANDBOX_CONFIG.cell_seconds,
            advanced=True,
            help="Use null to disable the per-cell timeout.",
        ),
    ),
    validate=_validate,
    bind=_bind,
    notice=_notice,
)
