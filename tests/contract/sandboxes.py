"""Helpers for the tests that boot real Docker sandboxes.

* `containers(...)`: what the local dockerd holds for a session or a deployment, read with the
  docker CLI through the labels every sandbox carries (`io.sandbox-agents.session`,
  `io.sandbox-agents.deployment`; a pooled sandbox has `io.sandbox-agents.pool` instead of the
  session label, and the name `sa-<session>` once claimed): the tests check the server's
  claims against Docker itself.
* `Janitor`: the sessions a test created, deleted through the API when the test ends, whatever
  happened in it. A session whose delete succeeded but whose container is still there is a
  leak: the janitor removes the container (so the machine is not left with it) and fails the
  teardown, naming it.
* `wait_settled(...)`: polls `GET /api/sessions/{id}` until the session leaves `provisioning`.

With SA_CONTRACT_BACKEND=kubernetes (`kube.py`) a sandbox is a pod: the same helpers ask the
API server for the pods labelled with the session or the deployment (`sandbox-agents.io/...`)
and name them by pod name, which is the sandbox id the server reports.
"""
from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

import sandbox_agents
from sandbox_agents import NotFoundError
from sandbox_agents.models import Session, SessionDetail

import harness
import kube
import seed
from harness import wait_until

SESSION_LABEL = "io.sandbox-agents.session"
DEPLOYMENT_LABEL = "io.sandbox-agents.deployment"
POOL_LABEL = "io.sandbox-agents.pool"
#: The server's default warm pool (SANDBOX_AGENTS_WARM_POOL_SIZE).
DEFAULT_POOL_SIZE = 2
#: The most the default pool grows to under demand (SANDBOX_AGENTS_WARM_POOL_MAX): a run of
#: the suite boots sessions in bursts, so the pool may hold this many at shutdown.
DEFAULT_POOL_MAX = 8

#: The server's default image (built on this machine; see images/sandbox).
DEFAULT_IMAGE = "sandbox-agents-sandbox:1"
#: An image no machine has: its boot must fail.
MISSING_IMAGE = "sandbox-agents-no-such-image:0"

#: How long a boot may take here (a local image, no pull).
BOOT_DEADLINE = 90.0
POLL = 0.1


def docker(*args: str, timeout: float = 60.0) -> str:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def containers(label: str, value: str, *, running_only: bool = False) -> list[str]:
    """Ids of the containers (any state, unless `running_only`) carrying `label=value`."""
    args = ["ps", "-q", "--no-trunc", "--filter", f"label={label}={value}"]
    if not running_only:
        args.insert(1, "-a")
    return docker(*args).split()


def session_containers(session_id: str, *, running_only: bool = False) -> list[str]:
    """A session's containers: those labelled for it, and the one named `sa-<session>`. A
    sandbox the session took from the warm pool was created before the session existed, so it
    carries the pool's label instead of the session's; the server names it after the session
    when it claims it. On Kubernetes (no warm pool): the names of the pods labelled for it."""
    if kube.ENABLED:
        return sorted(
            p["metadata"]["name"]
            for p in kube.pods(f"{kube.LABEL_SESSION}={session_id}")
            if kube.running(p) or not running_only
        )
    labelled = containers(SESSION_LABEL, session_id, running_only=running_only)
    args = ["ps", "--no-trunc", "--filter", f"name=sa-{session_id}", "--format", "{{.ID}} {{.Names}}"]
    if not running_only:
        args.insert(1, "-a")
    named = [
        line.split()[0]
        for line in docker(*args).splitlines()
        if line.split()[1:] == [f"sa-{session_id}"]
    ]
    return sorted(set(labelled) | set(named))


def deployment_containers(deployment_id: str) -> list[str]:
    if kube.ENABLED:
        return sorted(p["metadata"]["name"] for p in kube.pods(f"{kube.LABEL_DEPLOYMENT}={deployment_id}"))
    return containers(DEPLOYMENT_LABEL, deployment_id)


def leftover_containers(deployment_id: str) -> list[str]:
    """A deployment's containers once every session is deleted, but for its warm pool:
    started sandboxes no session has claimed (label POOL_LABEL, still named `sa-pool-...`),
    which the server keeps on purpose, up to the most the pool grows to. More than that is a
    leak too."""
    if kube.ENABLED:
        pods = kube.pods(f"{kube.LABEL_DEPLOYMENT}={deployment_id}")
        pooled = [p for p in pods if kube.LABEL_POOL in p["metadata"].get("labels", {})]
        others = [p["metadata"]["name"] for p in pods if p not in pooled]
        return others if len(pooled) <= DEFAULT_POOL_MAX else others + [p["metadata"]["name"] for p in pooled]
    ids = deployment_containers(deployment_id)
    if not ids:
        return []
    lines = docker(
        "inspect", "--format", '{{.Id}} {{.Name}} {{index .Config.Labels "' + POOL_LABEL + '"}}', *ids
    ).splitlines()
    pooled = [l.split()[0] for l in lines if l.split()[1].startswith("/sa-pool-") and len(l.split()) > 2]
    others = [l.split()[0] for l in lines if l.split()[0] not in pooled]
    return others if len(pooled) <= DEFAULT_POOL_MAX else others + pooled


def describe(container_ids: Iterable[str]) -> str:
    """One line per container: id, name, state, labels; for failure messages."""
    ids = list(container_ids)
    if not ids:
        return "(none)"
    if kube.ENABLED:
        found = kube.find(ids)
        missing = sorted(set(ids) - {p["metadata"]["name"] for p in found})
        return "\n".join([kube.pod_line(p) for p in found] + [f"{name} (no such pod)" for name in missing])
    try:
        return docker(
            "inspect", "--format",
            "{{.Id}} {{.Name}} {{.State.Status}} {{json .Config.Labels}}",
            *ids,
        ).strip()
    except RuntimeError as exc:
        return f"{ids} ({exc})"


def force_remove(container_ids: Iterable[str]) -> None:
    ids = list(container_ids)
    if ids and kube.ENABLED:
        kube.delete(ids)
    elif ids:
        subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def configuration(container_id: str) -> str:
    """What the engine holds of a sandbox's configuration, as text: `docker inspect`, or on
    Kubernetes the pod object (its spec carries the environment it was created with)."""
    if kube.ENABLED:
        return "\n".join(json.dumps(p) for p in kube.find([container_id]))
    return docker("inspect", container_id)


def remove_deployment_images(deployment_id: str) -> None:
    """Removes the snapshot images a deployment made (they keep its label; snapshots outlive
    sessions, so the server itself never removes them)."""
    ids = docker("images", "-q", "--no-trunc", "--filter", f"label={DEPLOYMENT_LABEL}={deployment_id}").split()
    if ids:
        subprocess.run(["docker", "rmi", "-f", *set(ids)], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def deployment_id(data_dir: str | Path) -> str:
    """The deployment id the server wrote into its database (the containers' deployment label)."""
    value = seed.psql(data_dir, "select id from deployment;").strip()
    assert value and "\n" not in value, f"expected one deployment row, psql printed {value!r}"
    return value


def wait_settled(client: sandbox_agents.Client, session_id: str, timeout: float = BOOT_DEADLINE) -> SessionDetail:
    """Polls the detail until the session is no longer `provisioning`; returns it."""

    def settled() -> SessionDetail | None:
        detail = client.sessions.get(session_id)
        return detail if detail.status != "provisioning" else None

    return wait_until(settled, timeout, f"session {session_id} to leave provisioning", POLL)


def wait_no_containers(session_ids: Iterable[str], timeout: float, what: str) -> None:
    """Polls Docker until no container carries any of `session_ids`, or fails naming them."""
    ids = list(session_ids)
    left: dict[str, list] = {}

    def gone() -> bool:
        nonlocal left
        left = {sid: c for sid in ids if (c := session_containers(sid))}
        return not left

    wait_until(
        gone,
        timeout,
        f"{what}: no container of the sessions",
        POLL,
        last=lambda: f"containers of sessions {sorted(left)}:\n"
        + describe(c for cs in left.values() for c in cs),
    )


class Janitor:
    """Deletes every session handed to `track` when the test ends (see the module docstring).

    `base_url` is the server's address, or a callable giving it (a restarted server listens on
    a new port)."""

    def __init__(self, base_url: str | Callable[[], str]) -> None:
        self._base_url = base_url
        self.ids: list[str] = []
        self.agents: list[str] = []

    @property
    def base_url(self) -> str:
        return self._base_url() if callable(self._base_url) else self._base_url

    def track(self, session: Session | str) -> str:
        sid = session if isinstance(session, str) else session.id
        if sid not in self.ids:
            self.ids.append(sid)
        return sid

    def track_agent(self, agent) -> None:
        """Every session of this agent (an `Agent` or an id) is deleted at the end, including
        those a test created with `client.sessions.create_and_wait` directly."""
        agent_id = agent if isinstance(agent, str) else agent.id
        if agent_id not in self.agents:
            self.agents.append(agent_id)

    def create(self, client: sandbox_agents.Client, agent: str, **kwargs) -> Session:
        """`client.sessions.create`, tracked."""
        session = client.sessions.create(agent, **kwargs)
        self.track(session)
        return session

    def create_and_wait(self, client: sandbox_agents.Client, agent: str, **kwargs) -> Session:
        """`client.sessions.create_and_wait`, with the session tracked even when the boot fails."""
        session = self.create(client, agent, **kwargs)
        return client.sessions.wait_until_running(session.id, timeout=BOOT_DEADLINE)

    def cleanup(self, *, server_up: bool = True) -> None:
        """Deletes the sessions (when the server is up), then removes any container still
        carrying one of their ids; fails if a deleted session left one."""
        problems: list[str] = []
        leaked: list[str] = []
        client = sandbox_agents.Client(base_url=self.base_url, max_retries=0, timeout=130.0) if server_up else None
        try:
            if client is not None:
                for agent_id in self.agents:
                    try:
                        for s in client.sessions.iterate(agent_id=agent_id):
                            self.track(s)
                    except Exception as exc:  # noqa: BLE001 - reported below
                        problems.append(f"listing the sessions of agent {agent_id} failed: {exc!r}")
            for sid in self.ids:
                deleted = False
                if client is not None:
                    try:
                        client.sessions.delete(sid)
                        deleted = True
                    except NotFoundError:
                        deleted = True  # the test deleted it itself
                    except Exception as exc:  # noqa: BLE001 - reported below
                        problems.append(f"DELETE /api/sessions/{sid} failed: {exc!r}")
                left = session_containers(sid)
                if left:
                    if deleted:
                        leaked.append(f"session {sid} (deleted) still has: {describe(left)}")
                    force_remove(left)
        finally:
            if client is not None:
                client.close()
        if leaked:
            problems.append(
                "containers left behind by deleted sessions (removed by the janitor):\n" + "\n".join(leaked)
            )
        if problems:
            raise AssertionError("session cleanup: " + "\n".join(problems))


@contextlib.contextmanager
def own_server(name: str, env: dict[str, str]):
    """A server process of a test module's own, started with `env` (and no warm pool), that
    must exit 0 on SIGTERM; every sandbox of its deployment is removed however it ends."""
    process = harness.ServerProcess(
        harness.short_tmpdir(), name=name, env={"SANDBOX_AGENTS_WARM_POOL_SIZE": "0", **env}
    )
    deployment = None
    try:
        process.start()
        deployment = deployment_id(process.data_dir)
        yield process
        assert process.stop() == 0, process.log_tail(60)
    finally:
        if deployment:
            force_remove(deployment_containers(deployment))
        process.cleanup()
