"""Running the real `sandbox-agents` binary for the contract tests.

A `ServerProcess` is one data directory and the server processes started on it, one at a
time: `start()` picks a free port, launches `sandbox-agents serve` and polls
`GET /api/health` until it answers; `stop()` sends SIGTERM and waits for a clean exit;
`kill()` is the crash. Every start appends to the same log file (`<data-dir>.log`), which the
conftest attaches to the report of a failing test.

The embedded PostgreSQL cluster lives under `<data-dir>/postgres` and is detached from the
server (it survives a SIGKILL of the server by design). `postgres_pids()` finds its processes
by their working directory, and `stop_postgres()` is the last-resort cleanup that makes sure
no cluster outlives the test run.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

import kube

REPO_ROOT = Path(__file__).resolve().parents[2]

#: How long a start may take: the first one runs initdb.
START_DEADLINE = 60.0
#: How long a SIGTERM may take to end the process.
STOP_DEADLINE = 30.0
#: Poll interval while waiting for a condition (never a fixed wait for the condition itself).
POLL = 0.05

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)

# Environment the server must not inherit: it would point it at another database or config.
_SERVER_ENV_DROP = (
    "DATABASE_URL",
    "SANDBOX_AGENTS_BIND",
    "SANDBOX_AGENTS_DATA_DIR",
    "SANDBOX_AGENTS_DEFAULT_MODEL",
    "SANDBOX_AGENTS_DB_MAX_CONNECTIONS",
    "SANDBOX_AGENTS_LOG_FORMAT",
    # The sandbox settings: the tests expect the defaults (Docker, the default image, previews
    # on a listener of their own, a preview key of the data directory's own).
    "SANDBOX_AGENTS_BACKEND",
    "SANDBOX_AGENTS_KUBERNETES_KUBECONFIG",
    "SANDBOX_AGENTS_KUBERNETES_NAMESPACE",
    "SANDBOX_AGENTS_KUBERNETES_IMAGE",
    "SANDBOX_AGENTS_KUBERNETES_SANDBOXD_IMAGE",
    "SANDBOX_AGENTS_KUBERNETES_RUNTIME_CLASS",
    "SANDBOX_AGENTS_KUBERNETES_NODE_SELECTOR",
    "SANDBOX_AGENTS_KUBERNETES_IMAGE_PULL_SECRET",
    "SANDBOX_AGENTS_KUBERNETES_DAEMON_ROUTE",
    "KUBECONFIG",
    "SANDBOX_AGENTS_IMAGE",
    "SANDBOX_AGENTS_SANDBOX_CPUS",
    "SANDBOX_AGENTS_SANDBOX_MEMORY_MB",
    "SANDBOX_AGENTS_SANDBOX_PIDS",
    "SANDBOX_AGENTS_IDLE_TTL_SECONDS",
    "SANDBOX_AGENTS_LOCAL_DIR_ROOTS",
    "SANDBOX_AGENTS_GIT_KNOWN_HOSTS",
    "SANDBOX_AGENTS_PUBLIC_URL",
    "SANDBOX_AGENTS_PREVIEW_KEY",
    "SANDBOX_AGENTS_PREVIEW_BIND",
    "SANDBOX_AGENTS_PREVIEW_PUBLIC_URL",
    "SANDBOX_AGENTS_PREVIEW_DOMAIN",
    "SANDBOX_AGENTS_ALLOWED_HOSTS",
    # Models: the tests point the server at their own fake model (see `fakemodel.py`).
    "LITELLM_PROXY_API_BASE",
    "LITELLM_PROXY_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
)


def server_binary() -> Path:
    return Path(os.environ.get("SANDBOX_AGENTS_BIN") or REPO_ROOT / "target" / "debug" / "sandbox-agents")


def short_tmpdir(prefix: str = "sa-") -> str:
    """A data directory with a short path: the cluster's unix socket path must fit 107 bytes."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll_until(predicate, timeout: float, poll: float = POLL):
    """Polls `predicate` until it returns something truthy and returns that; `None` once
    `timeout` seconds pass first (for callers with a fallback, such as a SIGKILL)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def wait_until(predicate, timeout: float, what: str, poll: float = POLL, last=None):
    """Polls `predicate` until it returns something truthy and returns that, or fails after
    `timeout` seconds naming `what`, and what `last()` says was seen instead when given. The
    one way the suite waits for a condition it cannot be told of."""
    value = poll_until(predicate, timeout, poll)
    if value:
        return value
    seen = f"; last: {last()}" if last is not None else ""
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{seen}")


class ServerProcess:
    """One data directory, and the server currently running on it (if any)."""

    #: Every instance created in this test run, so a failing test can show their logs.
    instances: list["ServerProcess"] = []

    def __init__(self, data_dir: str | Path, *, name: str = "server", env: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.name = name
        #: Extra environment for the server (over the test run's own, less _SERVER_ENV_DROP).
        self.env = dict(env or {})
        self.log_path = Path(str(self.data_dir) + ".log")
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.starts = 0
        #: Deployment ids seen at start (see `_remember_deployment`).
        self.deployments: set[str] = set()
        #: With SA_CONTRACT_BACKEND=kubernetes, the namespace of this data directory's
        #: sandboxes, made at the first start and kept across restarts (see `kube.py`).
        self.namespace: kube.Namespace | None = None
        ServerProcess.instances.append(self)

    # -- addresses --

    @property
    def base_url(self) -> str:
        assert self.port is not None, "the server was never started"
        return f"http://127.0.0.1:{self.port}"

    @property
    def pg_dir(self) -> Path:
        return self.data_dir / "postgres"

    @property
    def pgdata(self) -> Path:
        return self.pg_dir / "data"

    # -- lifecycle --

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = START_DEADLINE) -> "ServerProcess":
        assert not self.running, "a server is already running on this data directory"
        binary = server_binary()
        if not binary.exists():
            raise RuntimeError(
                f"server binary {binary} does not exist: build it with "
                "`cargo build -p sandbox-agents-server` or set SANDBOX_AGENTS_BIN"
            )
        env = {k: v for k, v in os.environ.items() if k not in _SERVER_ENV_DROP}
        env.setdefault("RUST_LOG", "info")
        env.setdefault("NO_COLOR", "1")
        env.update(self.env)
        backend_args: list[str] = []
        if kube.ENABLED:
            if self.namespace is None:
                self.namespace = kube.Namespace()
            backend_args = self.namespace.server_args()
        # A port picked by the OS can be taken by someone else before the server binds it:
        # the server then exits at once saying so, and we try another.
        for _attempt in range(3):
            self.port = free_port()
            self.starts += 1
            with open(self.log_path, "ab") as log:
                log.write(
                    f"\n===== [{self.name}] start #{self.starts} on port {self.port}, "
                    f"data dir {self.data_dir} =====\n".encode()
                )
                log.flush()
                self.proc = subprocess.Popen(
                    # Previews get a port of the OS's choosing: the default (the API port + 1)
                    # may be another test server's.
                    [
                        str(binary), "serve", "--bind", f"127.0.0.1:{self.port}",
                        "--preview-bind", "127.0.0.1:0", "--data-dir", str(self.data_dir),
                        *backend_args,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=env,
                )
            if self._wait_healthy(timeout):
                self._remember_deployment()
                return self
            if "cannot listen" not in self.log_tail(20):
                break
        raise AssertionError(
            f"{self.name} exited with code {self.proc.returncode} before answering /api/health\n"
            f"--- server log ---\n{self.log_tail(80)}"
        )

    def _wait_healthy(self, timeout: float) -> bool:
        """True once /api/health answers 200; False if the process exited first."""
        url = f"{self.base_url}/api/health"

        def probe() -> str | None:
            if self.proc.poll() is not None:
                return "exited"
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return "healthy"
            except httpx.HTTPError:
                pass
            return None

        outcome = poll_until(probe, timeout)
        if outcome is not None:
            return outcome == "healthy"
        self.kill()
        raise AssertionError(
            f"{self.name} did not answer /api/health within {timeout:g}s\n"
            f"--- server log ---\n{self.log_tail(80)}"
        )

    def terminate(self) -> None:
        """Sends SIGTERM without waiting."""
        assert self.running, "the server is not running"
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = STOP_DEADLINE) -> int:
        """Waits for the process to exit; kills it and fails if it does not within `timeout`."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{self.name} did not exit within {timeout:g}s of SIGTERM\n"
                f"--- server log ---\n{self.log_tail(80)}"
            ) from None

    def stop(self, timeout: float = STOP_DEADLINE) -> int:
        """SIGTERM, then the exit code (the server stops its embedded cluster on the way out)."""
        self.terminate()
        return self.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: the server has no chance to stop its embedded cluster."""
        if self.running:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    # -- logs --

    def log_text(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return strip_ansi(text)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # -- cleanup --

    def _remember_deployment(self) -> None:
        """Notes the deployment id (the label on every container the server makes): the warm
        pool keeps started sandboxes across the server's own shutdown, on purpose, so
        `cleanup` removes them once the data directory, and with it the deployment, is gone."""
        import seed  # noqa: PLC0415 - seed is a sibling helper; imported where it is needed

        try:
            deployment = seed.psql(self.data_dir, "select id from deployment;").strip()
        except Exception:  # noqa: BLE001 - best effort: cleanup then removes nothing extra
            return
        if deployment:
            self.deployments.add(deployment)

    def remove_containers(self) -> None:
        """Removes every container of the deployments this data directory has had (on
        Kubernetes, their pods go with the namespace)."""
        for deployment in sorted(self.deployments):
            ids = subprocess.run(
                ["docker", "ps", "-aq", "--filter", f"label=io.sandbox-agents.deployment={deployment}"],
                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            ).stdout.split()
            if ids:
                subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)

    def cleanup(self, *, remove: bool = True) -> list[str]:
        """Kills a server still running, makes sure no cluster of this data directory is left
        running, removes its deployment's containers (the warm pool's, kept by a clean
        shutdown) and removes the directory. Returns what had to be forced (for the report)."""
        forced: list[str] = []
        if self.running:
            # The normal shutdown first: it also stops the embedded cluster.
            forced.append(f"{self.name} was still running: stopped with SIGTERM")
            try:
                self.stop()
            except AssertionError:
                forced.append(f"{self.name} ignored SIGTERM: killed")
                self.kill()
        if postgres_pids(self.data_dir):
            forced.append(f"a PostgreSQL of {self.data_dir} was still running: stopped with pg_ctl")
            stop_postgres(self.data_dir)
        if remove and not os.environ.get("SA_CONTRACT_KEEP_DATA"):
            self.remove_containers()
            if self.namespace is not None:
                self.namespace.remove()
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.log_path.unlink(missing_ok=True)
        return forced


# -- the embedded cluster's processes --


def postgres_pids(data_dir: str | Path) -> list[int]:
    """PIDs of postgres processes serving `<data_dir>/postgres/data` (the postmaster chdirs
    into its data directory, and its children inherit that)."""
    pgdata = Path(data_dir).resolve() / "postgres" / "data"
    try:
        target = pgdata.resolve(strict=True)
    except FileNotFoundError:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry}/exe")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if Path(exe).name.startswith("postgres") and Path(cwd) == target:
            pids.append(int(entry))
    return pids


def postmaster_pid(data_dir: str | Path) -> int | None:
    """The postmaster's PID from `postmaster.pid`, if that file exists."""
    try:
        first = (Path(data_dir) / "postgres" / "data" / "postmaster.pid").read_text().splitlines()[0]
    except (FileNotFoundError, IndexError):
        return None
    return int(first.strip()) if first.strip().isdigit() else None


def _pg_ctl(pgdata: Path) -> str:
    try:
        major = (pgdata / "PG_VERSION").read_text().strip()
        candidate = Path(f"/usr/lib/postgresql/{major}/bin/pg_ctl")
        if candidate.exists():
            return str(candidate)
    except FileNotFoundError:
        pass
    return shutil.which("pg_ctl") or "pg_ctl"


def stop_postgres(data_dir: str | Path, timeout: float = 60.0) -> None:
    """Stops a cluster left running: `pg_ctl stop -m fast` as the cluster's owner, then, if any of
    its processes is still there after `timeout`, SIGKILL."""
    pgdata = Path(data_dir).resolve() / "postgres" / "data"
    if not pgdata.exists():
        return
    owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
    cmd = [_pg_ctl(pgdata), "stop", "-D", str(pgdata), "-m", "fast", "-w", "-t", str(int(timeout))]
    if os.geteuid() == 0 and owner != "root":
        cmd = ["runuser", "-u", owner, "--", *cmd]
    subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout + 10)
    poll_until(lambda: not postgres_pids(data_dir), timeout)
    for pid in postgres_pids(data_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
