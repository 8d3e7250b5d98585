"""`SandboxAgentsBackend`: sqlsaber-sandbox's persistent Python kernel in a Sandbox Agents session.

sqlsaber-sandbox drives a sandbox through six coroutines (its `SandboxBackend` protocol): it
opens one environment, runs shell commands in it, moves files in and out, starts one
long-lived controller process (which runs the Jupyter kernel) and closes it all. Here the
environment is one session of a Sandbox Agents server, reached with the published client:

| protocol            | server                                                        |
| ------------------- | ------------------------------------------------------------- |
| `open`              | `POST /api/sessions`, then wait until it is `running`         |
| `execute`           | `POST /api/sessions/{id}/exec` (`sh -c`, killed at `timeout`) |
| `upload`/`download` | `PUT`/`GET /api/sessions/{id}/sandbox-files?path=`            |
| `start_controller`  | `POST /api/sessions/{id}/processes` (the daemon drains it)    |
| `close`             | `DELETE` the controller process, then `DELETE` the session    |

Errors, as sqlsaber-sandbox reads them: `SessionLost` when the session is gone or no longer
running (its kernel with it), the builtin `TimeoutError` when a command outlived its timeout
(the server killed only that command; the sandbox and the kernel live on), `SandboxError` for
every other failure of the server or of the way to it, `ValueError` for a `SandboxConfig` this
server cannot honour. Nothing from httpx or sandbox_agents escapes: sqlsaber-sandbox does not
wrap what `upload` and `download` raise.
"""
from __future__ import annotations

import asyncio
import json
import math
import shlex
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from sandbox_agents import AsyncClient, errors
from sandbox_agents._transport import Call
from sqlsaber_sandbox.backends.base import CommandResult, SandboxError, SessionLost
from sqlsaber_sandbox.config import DEFAULT_SANDBOX_IMAGE, SandboxConfig

from ._commands import may_repeat

T = TypeVar("T")

#: The longest the server lets one command run, and the shortest timeout it accepts (> 0).
MAX_COMMAND_SECONDS = 600.0
MIN_COMMAND_SECONDS = 0.001
#: The exit code of a command the server killed at its timeout.
TIMED_OUT_EXIT_CODE = 124
#: `SandboxConfig.provider` values this backend accepts besides None.
PROVIDER_NAMES = frozenset({"sandbox-agents"})
#: The session's metadata key holding this backend's token: it finds a session whose
#: creation was answered but whose answer was lost, and tells an operator who made it.
METADATA_KEY = "sqlsaber_sandbox_backend"
#: Session fields sent only when the `SandboxConfig` sets them, and the fields they come from.
SESSION_SETTINGS = {
    "idle_ttl_seconds": "idle_seconds",
    "max_lifetime_seconds": "max_lifetime_seconds",
    "resources": "cpu_cores/memory_mb",
}
#: How much of an exited controller's stderr an error quotes.
STDERR_TAIL_CHARS = 2000


def _json(response: httpx.Response) -> Any:
    return response.json()


def _nothing(_response: httpx.Response) -> None:
    return None


def check_config(config: SandboxConfig) -> None:
    """Raises ValueError for a `SandboxConfig` this server cannot honour, before anything is
    created: a foreign provider, a GPU, or an image of its own."""
    if config.provider is not None and config.provider not in PROVIDER_NAMES:
        raise ValueError(
            f"SandboxConfig.provider is {config.provider!r}, but this is the Sandbox Agents "
            "backend: leave provider unset (or set it to 'sandbox-agents')."
        )
    if config.gpu is not None:
        raise ValueError(
            f"SandboxConfig.gpu is {config.gpu!r}, but this server's sandboxes have no GPUs: "
            "leave gpu unset, or use a provider that offers GPUs."
        )
    if config.image is not None and config.image != DEFAULT_SANDBOX_IMAGE:
        raise ValueError(
            f"SandboxConfig.image is {config.image!r}, but with SandboxAgentsBackend the image "
            "comes from the agent (its image or environment) or from the backend's "
            "environment= argument: leave image unset and pass an environment whose image "
            "has what you need."
        )


def session_settings(config: SandboxConfig) -> dict[str, Any]:
    """The session fields a `SandboxConfig` asks for, only those it sets: a server that does
    not know them is then never sent them."""
    settings: dict[str, Any] = {}
    if config.idle_seconds is not None:
        settings["idle_ttl_seconds"] = max(1, math.ceil(config.idle_seconds))
    if config.max_lifetime_seconds is not None:
        settings["max_lifetime_seconds"] = config.max_lifetime_seconds
    resources: dict[str, Any] = {}
    if config.cpu_cores is not None:
        resources["cpus"] = config.cpu_cores
    if config.memory_mb is not None:
        resources["memory_mb"] = config.memory_mb
    if resources:
        settings["resources"] = resources
    return settings


class SandboxAgentsBackend:
    """One Sandbox Agents session holding one sqlsaber-sandbox kernel.

    Invariants:

    * At most one session per backend, ever: a second `open` is a `SandboxError`, even after
      `close` (sqlsaber-sandbox makes one backend per `SandboxSession` and closes it itself).
    * `session_id` is set as soon as the server has answered the create, before the sandbox
      is up, so `close` deletes a session whatever went wrong after that.
    * `close` is idempotent and retryable: the ids are forgotten only once the session's
      delete succeeded (or it was already gone).
    * Only transport failures are retried (a request that got no answer), never an answer,
      and never a command that is unsafe to repeat (`export`) or a request that starts
      something (creating the session, starting the controller).
    * The client is the caller's: it is never closed here.
    """

    def __init__(
        self,
        client: AsyncClient,
        agent: str,
        *,
        environment: str | None = None,
        title: str = "sqlsaber-sandbox",
        transport_retries: int = 3,
        retry_backoff_seconds: float = 0.25,
    ) -> None:
        """`agent`: the slug or id of the agent whose session this opens. `environment`: an
        environment id or name for the session (default: the agent's, else the server's).
        `transport_retries`: how many more times a request that got no answer is sent again
        when that is safe, waiting `retry_backoff_seconds`, doubled each time."""
        if not isinstance(agent, str) or not agent.strip():
            raise ValueError("agent must be the slug or id of an agent of the server")
        if environment is not None and not environment.strip():
            raise ValueError("environment must be an environment id or name, or None")
        if transport_retries < 0:
            raise ValueError("transport_retries must be 0 or more")
        self._client = client
        self._agent = agent
        self._environment = environment
        self._title = title
        self._retries = transport_retries
        self._backoff = retry_backoff_seconds
        self._opened = False
        self._session_id: str | None = None
        self._controller_id: str | None = None
        self._transfer_seconds = float(SandboxConfig().open_seconds)
        self._close_lock = asyncio.Lock()

    @property
    def session_id(self) -> str | None:
        """The session this backend owns, once created and until closed."""
        return self._session_id

    @property
    def controller_id(self) -> str | None:
        """The controller's process id in the session (`proc_...`), once started."""
        return self._controller_id

    # -- the protocol ------------------------------------------------------------------

    async def open(self, config: SandboxConfig) -> None:
        """Creates the session and waits (at most `config.open_seconds`) until it runs."""
        if self._opened:
            raise SandboxError(
                "This SandboxAgentsBackend has already opened a session: make one backend "
                "per SandboxSession."
            )
        check_config(config)
        self._opened = True
        self._transfer_seconds = float(config.open_seconds)
        token = uuid.uuid4().hex
        body: dict[str, Any] = {
            "agent_id": self._agent,
            "title": self._title,
            "environment_id": self._environment,
            "metadata": {METADATA_KEY: token},
            **session_settings(config),
        }
        session = await self._create(body, token)
        self._session_id = str(session["id"])
        # A server that predates a setting ignores it without a word; the session it answers
        # with then lacks the field. A limit silently not applied is worse than a refusal.
        ignored = [field for field in SESSION_SETTINGS if field in body and field not in session]
        if ignored:
            sources = ", ".join(f"SandboxConfig.{SESSION_SETTINGS[f]}" for f in ignored)
            raise ValueError(
                f"This server does not support the session's {', '.join(ignored)}, so {sources} "
                "cannot be honoured: leave them unset, or upgrade the server. (The session it "
                "created is deleted when the backend is closed.)"
            )
        await self._wait_running(config.open_seconds)

    async def execute(self, command: str, *, timeout: float) -> CommandResult:
        """Runs `sh -c command` in the session; a non-zero exit is returned, not raised."""
        sid = self._require_open()
        seconds = min(max(float(timeout), MIN_COMMAND_SECONDS), MAX_COMMAND_SECONDS)
        try:
            result = await self._retrying(
                lambda: self._client.sessions.exec(sid, command, timeout=seconds),
                repeatable=may_repeat(command),
            )
        except errors.APIConnectionError as exc:
            raise SandboxError(
                f"Running a command in session {sid} failed: the server could not be reached "
                f"({exc.message})."
            ) from exc
        except errors.APIStatusError as exc:
            if exc.status_code in (404, 409):
                # Gone, stopped, or its daemon died under the command: the kernel is lost.
                raise SessionLost(
                    f"Session {sid} can no longer run commands ({exc.status_code}: "
                    f"{exc.detail}); its Python state is lost, start a new analysis session."
                ) from exc
            raise SandboxError(
                f"Running a command in session {sid} failed ({exc.status_code}: {exc.detail})."
            ) from exc
        if result.exit_code == TIMED_OUT_EXIT_CODE:
            raise TimeoutError(
                f"The command did not finish within {seconds:g} s and was killed; the sandbox "
                "and its kernel keep running."
            )
        return CommandResult(result.stdout, result.stderr, result.exit_code)

    async def upload(self, data: bytes, path: str) -> None:
        """Writes `data` as the file at the absolute `path` (parents created), whole."""
        sid = self._require_open()
        try:
            await self._retrying(
                lambda: self._raw(
                    "PUT",
                    f"/api/sessions/{sid}/sandbox-files",
                    params={"path": path},
                    content=bytes(data),
                    headers={"Content-Type": "application/octet-stream"},
                ),
                repeatable=True,
            )
        except errors.APIError as exc:
            raise await self._failure(exc, f"Uploading {path}") from exc

    async def download(self, path: str) -> bytes:
        """The bytes of the file at the absolute `path`."""
        sid = self._require_open()
        try:
            response = await self._retrying(
                lambda: self._raw(
                    "GET",
                    f"/api/sessions/{sid}/sandbox-files",
                    params={"path": path},
                    headers={"Accept": "application/octet-stream"},
                ),
                repeatable=True,
            )
        except errors.APIError as exc:
            raise await self._failure(exc, f"Downloading {path}") from exc
        return response.content

    async def start_controller(self, argv: Sequence[str]) -> None:
        """Starts `argv` as the session's one background process; the server's daemon keeps
        and drains it (the last 64 KiB of each stream) until it is killed or the sandbox ends.
        Fails if it has already exited when first looked at."""
        if not argv:
            raise ValueError("Controller argv cannot be empty")
        sid = self._require_open()
        if self._controller_id is not None:
            raise SandboxError(
                f"The controller of session {sid} is already started ({self._controller_id})."
            )
        base = f"/api/sessions/{sid}/processes"
        try:
            # Not retried: a start whose answer was lost may have started a controller.
            process = await self._client._transport.send(
                Call("POST", base, _json, json={"command": shlex.join(argv)})
            )
        except errors.APIError as exc:
            raise await self._failure(exc, "Starting the sqlsaber controller") from exc
        self._controller_id = str(process["id"])
        try:
            state = await self._client._transport.send(
                Call("GET", f"{base}/{self._controller_id}", _json)
            )
        except errors.APIError as exc:
            raise await self._failure(exc, "Checking the sqlsaber controller") from exc
        if state.get("status") == "exited":
            stderr = (state.get("stderr") or "").strip()[-STDERR_TAIL_CHARS:]
            raise SandboxError(
                f"The sqlsaber controller exited at once (exit code {state.get('exit_code')}); "
                f"its stderr ends with:\n{stderr or '(nothing)'}"
            )

    async def close(self) -> None:
        """Kills the controller and deletes the session; a no-op once done or never opened.
        On a failure it raises `SandboxError` and keeps what is left to a later `close`."""
        async with self._close_lock:
            sid = self._session_id
            if sid is None:
                return
            if self._controller_id is not None:
                try:
                    await self._client._transport.send(
                        Call(
                            "DELETE",
                            f"/api/sessions/{sid}/processes/{self._controller_id}",
                            _nothing,
                            timeout=60.0,
                        )
                    )
                except errors.APIError:
                    # Already gone (404), or the sandbox is not running (409); otherwise the
                    # session's delete below ends it with the sandbox, and decides.
                    pass
            try:
                await self._client.sessions.delete(sid)
            except errors.NotFoundError:
                pass
            except errors.APIError as exc:
                raise SandboxError(
                    f"Deleting session {sid} failed ({_describe(exc)}); its sandbox may still "
                    "be running: call close() again to retry."
                ) from exc
            self._session_id = None
            self._controller_id = None

    # -- opening -----------------------------------------------------------------------

    async def _create(self, body: Mapping[str, Any], token: str) -> dict[str, Any]:
        """The created session, as the server answered it."""
        try:
            # Not retried: a create whose answer was lost may have created the session.
            session = await self._client._transport.send(
                Call("POST", "/api/sessions", _json, json=dict(body))
            )
        except errors.APIConnectionError as exc:
            found = await self._find_created(token)
            if found is not None:
                return found
            raise SandboxError(
                f"Creating a session of agent {self._agent!r} failed: the server could not be "
                f"reached ({exc.message}). If it was created anyway, its metadata has "
                f"{METADATA_KEY}={token}."
            ) from exc
        except errors.APIStatusError as exc:
            raise _refusal(exc, self._agent, body) from exc
        return dict(session)

    async def _find_created(self, token: str) -> dict[str, Any] | None:
        """The session a lost create made, from the agent's newest sessions, if any."""
        try:
            sessions = await self._client._transport.send(
                Call("GET", "/api/sessions", _json, params={"agent_id": self._agent, "limit": 20})
            )
        except errors.APIError:
            return None
        for session in sessions if isinstance(sessions, list) else []:
            if (session.get("metadata") or {}).get(METADATA_KEY) == token:
                return dict(session)
        return None

    async def _wait_running(self, open_seconds: float) -> None:
        sid = self._session_id
        assert sid is not None
        try:
            await self._client.sessions.wait_until_running(sid, timeout=open_seconds)
        except errors.RunFailedError as exc:
            raise SandboxError(f"The sandbox of session {sid} failed to start: {exc.detail}") from exc
        except errors.TimeoutExpiredError as exc:
            raise SandboxError(
                f"The sandbox of session {sid} was not running within {open_seconds:g} s "
                "(SandboxConfig.open_seconds); an environment whose image is still building "
                "can take longer the first time."
            ) from exc
        except errors.SandboxAgentsError as exc:
            raise SandboxError(
                f"Waiting for the sandbox of session {sid} failed ({_describe(exc)})."
            ) from exc

    # -- plumbing ----------------------------------------------------------------------

    def _require_open(self) -> str:
        if self._session_id is None:
            raise SessionLost("The sandbox is not open (never opened, or closed).")
        return self._session_id

    async def _retrying(self, attempt: Callable[[], Awaitable[T]], *, repeatable: bool) -> T:
        """`attempt()`, sent again after a transport failure while retries are left and
        `repeatable`; an answer, even an error, is never retried."""
        tries = 1 + (self._retries if repeatable else 0)
        for n in range(tries):
            try:
                return await attempt()
            except errors.APIConnectionError:
                if n + 1 >= tries:
                    raise
            await asyncio.sleep(self._backoff * 2**n)
        raise AssertionError("unreachable: the last try returns or raises")

    async def _raw(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        content: bytes | None = None,
    ) -> httpx.Response:
        """A request with a raw body or answer, which the client's `Call` cannot carry: sent
        on the client's own connection pool with its URL, credentials and project, and its
        errors mapped the way the client maps them."""
        transport = self._client._transport
        try:
            response = await transport._client.request(
                method,
                transport._url(path),
                params=dict(params),
                content=content,
                headers=transport._config.request_headers(dict(headers)),
                timeout=self._transfer_seconds,
            )
        except httpx.TimeoutException as exc:
            raise errors.APITimeoutError(request=getattr(exc, "request", None)) from exc
        except httpx.HTTPError as exc:
            raise errors.APIConnectionError(
                str(exc) or "could not reach the control-plane", request=getattr(exc, "request", None)
            ) from exc
        if response.status_code >= 400:
            raise errors.from_response(response)
        return response

    async def _failure(self, exc: errors.APIError, doing: str) -> SandboxError:
        """The error for a failed file or process request. A 404 or 409 can be about the file
        (missing, a directory) or about the session (gone, stopped): the session decides."""
        sid = self._session_id
        if not isinstance(exc, errors.APIStatusError):
            return SandboxError(f"{doing} failed: the server could not be reached ({exc.message}).")
        if exc.status_code in (404, 409):
            state = await self._session_state()
            if state is not None and state != "running":
                return SessionLost(
                    f"{doing} failed: session {sid} is {state} ({exc.status_code}: "
                    f"{exc.detail}); its Python state is lost, start a new analysis session."
                )
        return SandboxError(f"{doing} in session {sid} failed ({exc.status_code}: {exc.detail}).")

    async def _session_state(self) -> str | None:
        """`gone`, the session's status (`running`, `stopped, idle`, ...), or None when the
        server cannot tell us."""
        try:
            session = await self._client.sessions.get(self._require_open())
        except errors.NotFoundError:
            return "gone"
        except (errors.SandboxAgentsError, SandboxError):
            return None
        if session.status == "stopped" and session.stopped_reason:
            return f"stopped ({session.stopped_reason})"
        return session.status


def _describe(exc: BaseException) -> str:
    if isinstance(exc, errors.APIStatusError):
        return f"{exc.status_code}: {exc.detail}"
    if isinstance(exc, errors.APIError):
        return exc.message
    return str(exc) or type(exc).__name__


def _refusal(exc: errors.APIStatusError, agent: str, body: Mapping[str, Any]) -> Exception:
    """The error for a refused create: a ValueError when a 422 names a setting taken from the
    `SandboxConfig` (a server without it, or a value it does not accept), else a SandboxError."""
    if exc.status_code == 422:
        said = f"{exc.detail} {json.dumps(exc.body, default=str)}"
        named = [field for field in SESSION_SETTINGS if field in body and field in said]
        if named:
            sources = ", ".join(f"SandboxConfig.{SESSION_SETTINGS[f]}" for f in named)
            return ValueError(
                f"The server refused the session's {', '.join(named)} (from {sources}): "
                f"{exc.detail}. Change or leave unset those SandboxConfig fields."
            )
    return SandboxError(
        f"The server refused to create a session of agent {agent!r} "
        f"({exc.status_code}: {exc.detail})."
    )
