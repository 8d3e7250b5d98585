"""No sandbox outlives its session: concurrent create/delete, a server killed mid-boot, and a
container removed behind the server's back while it was down (its session is then `stopped`
with reason `restart` and one `session.status_stopped` event, and can be started again).

Each test has its own data directory and server (never the shared `server`), so its
deployment id, and with it the `io.sandbox-agents.deployment` label of every container it
makes, is its own: "no container of this deployment is left" is then checked against Docker
directly. The fixture's finalizer removes whatever a failing test left (containers by the
deployment label, the server, its PostgreSQL).
"""
from __future__ import annotations

import threading
import uuid

import pytest
import sandbox_agents
from sandbox_agents import NotFoundError

import harness
import sandboxes
import seed
from sandboxes import Janitor

#: A SIGTERM must end the process within this.
SHUTDOWN_DEADLINE = 20.0
#: How long a session may take to settle after a restart (its boot is done again).
SETTLE_DEADLINE = 120.0


class Home:
    """One server on its own data directory, and what it put into Docker."""

    def __init__(self, name: str) -> None:
        self.process = harness.ServerProcess(harness.short_tmpdir(prefix="sa-leak-"), name=name)
        self.deployment: str | None = None
        self.janitor = Janitor(lambda: self.process.base_url)

    def start(self) -> None:
        self.process.start()
        deployment = sandboxes.deployment_id(self.process.data_dir)
        if self.deployment is None:
            self.deployment = deployment
        assert deployment == self.deployment, "the deployment id changed across a restart"

    def client(self) -> sandbox_agents.Client:
        return sandbox_agents.Client(base_url=self.process.base_url)

    def stop_cleanly(self) -> None:
        code = self.process.stop(timeout=SHUTDOWN_DEADLINE)
        assert code == 0, f"exit code {code} after SIGTERM\n{self.process.log_tail(60)}"
        harness.wait_until(
            lambda: not harness.postgres_pids(self.process.data_dir),
            timeout=10,
            what=f"the embedded PostgreSQL of {self.process.data_dir} to stop with the server",
        )

    def assert_no_containers(self) -> None:
        assert self.deployment, "the server was never started"
        left = sandboxes.leftover_containers(self.deployment)
        assert not left, (
            f"containers of deployment {self.deployment} remain after every session was deleted:\n"
            + sandboxes.describe(left)
        )


@pytest.fixture
def home(request):
    h = Home(name=f"leak server ({request.node.name})")
    try:
        yield h
    finally:
        try:
            if h.process.running:
                h.janitor.cleanup()
        finally:
            if h.deployment:
                sandboxes.force_remove(sandboxes.deployment_containers(h.deployment))
            h.process.cleanup()


def make_agent(client: sandbox_agents.Client, **kwargs):
    return client.agents.create(slug=f"leak-{uuid.uuid4().hex[:10]}", name="Leak check", **kwargs)


def run_threads(count: int, target) -> list:
    """Runs `target(i)` on `count` threads released together; returns results, raising the
    first exception any thread raised."""
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a worker thread did not finish within 240 s"
    if errors:
        raise errors[0]
    return results


def test_concurrent_create_and_delete_leaves_no_containers(home):
    home.start()
    with home.client() as c:
        agent = make_agent(c, manifest={"entries": {"a.txt": {"kind": "file", "content": "a"}}})

    def one(i: int) -> str:
        with sandbox_agents.Client(base_url=home.process.base_url) as c:
            session = c.sessions.create(agent.slug, title=f"churn {i}")
            home.janitor.track(session)
            if i % 2:
                # Half are deleted once up, half while their boot is still in flight.
                c.sessions.wait_until_running(session.id, timeout=sandboxes.BOOT_DEADLINE)
                assert c.sessions.exec(session.id, "cat a.txt").check().stdout == "a"
            c.sessions.delete(session.id)
            return session.id

    ids = run_threads(8, one)
    with home.client() as c:
        for sid in ids:
            with pytest.raises(NotFoundError):
                c.sessions.get(sid)
        assert [s.id for s in c.sessions.iterate(agent_id=agent.id)] == []
    # A boot that was in flight when its session was deleted may still be finishing: give it
    # a bounded moment, then nothing of any of them may exist.
    sandboxes.wait_no_containers(ids, timeout=30, what="after deleting every session")
    home.assert_no_containers()
    home.stop_cleanly()


def test_sessions_booting_when_the_server_is_killed_are_booted_again_and_deleted_cleanly(home):
    home.start()
    with home.client() as c:
        agent = make_agent(c, manifest={"entries": {"boot.md": {"kind": "file", "content": "booted\n"}}})
        ids = [home.janitor.track(c.sessions.create(agent.slug, title=f"interrupted {i}")) for i in range(4)]
    # Right after the 202s, as soon as Docker holds a container for one of them: the boots are
    # in flight, some with a container made (not yet recorded, or not yet started), some not.
    harness.wait_until(
        lambda: any(sandboxes.session_containers(sid) for sid in ids),
        timeout=sandboxes.BOOT_DEADLINE,
        what="a container for one of the sessions",
        poll=0.01,
    )
    home.process.kill()
    # The embedded PostgreSQL survives the kill: what the crash left behind.
    at_kill = dict(
        line.split("|", 1)
        for line in seed.psql(
            home.process.data_dir,
            "select id, status from sessions where id in (" + ", ".join(seed.lit(i) for i in ids) + ");",
        ).split()
    )
    assert "provisioning" in at_kill.values(), (
        f"every boot had finished before the kill, so this run tests nothing: {at_kill}"
    )

    home.start()
    with home.client() as c:
        settled = {sid: sandboxes.wait_settled(c, sid, timeout=SETTLE_DEADLINE) for sid in ids}
        states = {sid: (d.status, d.error) for sid, d in settled.items()}
        # The server boots again what the crash left provisioning; the image is there, so
        # every one of them comes up.
        assert all(d.status == "running" for d in settled.values()), states
        for sid in ids:
            assert c.sessions.exec(sid, "cat boot.md").check().stdout == "booted\n"
            running = sandboxes.session_containers(sid, running_only=True)
            assert len(running) == 1, f"session {sid}: {sandboxes.describe(sandboxes.session_containers(sid))}"
            kinds = [e.type for e in c.sessions.history(sid)]
            assert kinds.count("session.created") == 1, kinds
            assert "session.status_running" in kinds, kinds

        for sid in ids:
            c.sessions.delete(sid)
            left = sandboxes.session_containers(sid)
            assert not left, f"session {sid} was deleted but Docker still has: {sandboxes.describe(left)}"
            with pytest.raises(NotFoundError):
                c.sessions.get(sid)
    home.assert_no_containers()
    home.stop_cleanly()


def test_a_sandbox_removed_while_the_server_was_down_is_stopped_for_restart(home):
    home.start()
    with home.client() as c:
        agent = make_agent(c)
        lost = home.janitor.create_and_wait(c, agent.slug, title="lost")
        kept = home.janitor.create_and_wait(c, agent.slug, title="kept")
        c.sessions.exec(kept.id, "echo survived > mark.txt").check()
    home.stop_cleanly()

    # Behind the server's back: one sandbox disappears, the other stays.
    containers = sandboxes.session_containers(lost.id)
    assert containers, "the running session has no container to remove"
    sandboxes.force_remove(containers)
    assert not sandboxes.session_containers(lost.id)
    assert sandboxes.session_containers(kept.id, running_only=True), "a clean shutdown stopped a sandbox"

    home.start()
    with home.client() as c:
        detail = c.sessions.get(lost.id)
        assert detail.status == "stopped", (detail.status, detail.error)
        assert detail.stopped_reason == "restart"
        stops = [e for e in c.sessions.history(lost.id) if e.type == "session.status_stopped"]
        assert len(stops) == 1 and stops[0].payload.get("reason") == "restart", [e.payload for e in stops]
        with pytest.raises(sandbox_agents.ConflictError):
            c.sessions.exec(lost.id, "true")

        # The one whose container survived is adopted as it was.
        survivor = c.sessions.get(kept.id)
        assert survivor.status == "running"
        assert c.sessions.exec(kept.id, "cat mark.txt").check().stdout == "survived\n"

        # The lost session can be started again (its workspace is gone with its container,
        # but the session is usable).
        c.sessions.start(lost.id)
        assert c.sessions.wait_until_running(lost.id, timeout=sandboxes.BOOT_DEADLINE).status == "running"
        assert c.sessions.exec(lost.id, "true").ok

        for sid in (lost.id, kept.id):
            c.sessions.delete(sid)
            assert not sandboxes.session_containers(sid)
    home.assert_no_containers()
    home.stop_cleanly()
