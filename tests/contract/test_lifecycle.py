"""The server process itself: restarts keep the data, SIGTERM is prompt even with a stream
open, and a crash (SIGKILL) is recovered from on the next start.

Each test has its own data directory and server processes, never the shared `server`. After
each test nothing of that data directory may still run: the test checks that the server's
own shutdown stopped its embedded PostgreSQL, and the fixture's finalizer stops whatever is
left (pg_ctl as the cluster's owner) so that a failure does not leak a cluster.
"""
from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
import sandbox_agents

import harness
import seed
from streams import StreamCollector

#: A SIGTERM must end the process within this, even with a stream open.
SHUTDOWN_DEADLINE = 20.0


@pytest.fixture
def home(request):
    process = harness.ServerProcess(
        harness.short_tmpdir(prefix="sa-life-"), name=f"lifecycle server ({request.node.name})"
    )
    yield process
    process.cleanup()


def stop_cleanly(process: harness.ServerProcess) -> None:
    """SIGTERM; exit code 0 within the deadline; no PostgreSQL of this data dir left running."""
    started = time.monotonic()
    code = process.stop(timeout=SHUTDOWN_DEADLINE)
    assert code == 0, f"exit code {code} after SIGTERM\n{process.log_tail(60)}"
    assert time.monotonic() - started < SHUTDOWN_DEADLINE
    harness.wait_until(
        lambda: not harness.postgres_pids(process.data_dir),
        timeout=10,
        what=f"the embedded PostgreSQL of {process.data_dir} to stop with the server",
    )


def make_agent_and_log(process: harness.ServerProcess, tag: str):
    with sandbox_agents.Client(base_url=process.base_url) as c:
        agent = c.agents.create(
            slug=f"{tag}-{uuid.uuid4().hex[:8]}",
            name="Durable",
            manifest={"entries": {"notes.md": {"kind": "file", "content": "keep me"}}},
        )
        agent = c.agents.update(agent.id, version=agent.version, instructions="edited before the restart")
    sid = seed.create_session(
        process.data_dir, agent.id, title="durable", metadata={"k": "v"}, status="stopped", stopped_reason="requested"
    )
    seqs = seed.append_events(process.data_dir, sid, seed.conversation(7, tag=tag))
    return agent, sid, seqs


def assert_intact(process: harness.ServerProcess, agent, sid: str, seqs: list[int]) -> None:
    with sandbox_agents.Client(base_url=process.base_url) as c:
        assert c.health()
        again = c.agents.get(agent.slug)
        assert again.model_dump() == agent.model_dump()
        assert again.version == 2
        detail = c.sessions.get(sid)
        assert detail.title == "durable" and detail.metadata == {"k": "v"}
        assert [e.seq for e in c.sessions.history(sid)] == seqs
        # The sequence goes on from where it was: a cursor taken before the restart still works.
        newer = seed.append_events(process.data_dir, sid, seed.messages(2, tag="after-restart"))
        assert min(newer) > max(seqs)
        assert [e.seq for e in c.sessions.events(sid, after=seqs[-1])] == newer
        # And the server is fully working: writes go through.
        edited = c.agents.update(agent.id, version=again.version, description="after the restart")
        assert edited.version == again.version + 1


def test_restart_keeps_data(home):
    home.start()
    agent, sid, seqs = make_agent_and_log(home, "restart")
    stop_cleanly(home)

    home.start()
    assert_intact(home, agent, sid, seqs)
    stop_cleanly(home)


def test_sigterm_with_an_open_stream_exits_promptly(home):
    home.start()
    agent, sid, seqs = make_agent_and_log(home, "sigterm")
    reader = StreamCollector(home.base_url, sid, after=seqs[-2]).start()
    try:
        assert [e.seq for e in reader.wait_for(1)] == seqs[-1:]
        # Make sure the stream is live (past its backlog) before the signal.
        live = seed.append_events(home.data_dir, sid, seed.messages(1, tag="live"))
        assert [e.seq for e in reader.wait_for(2)] == seqs[-1:] + live
        assert not reader.done, f"the stream ended before the shutdown: {reader.outcome} {reader.error!r}"

        stop_cleanly(home)
        # The reader sees its stream end (a clean close or a dropped connection).
        reader.join(timeout=10)
    finally:
        reader.close()


@pytest.mark.parametrize("crash", ["server_only", "server_and_postgres"])
def test_crash_recovery(home, crash):
    home.start()
    agent, sid, seqs = make_agent_and_log(home, "crash")
    postmaster = harness.postmaster_pid(home.data_dir)
    assert postmaster is not None, "the embedded cluster has no postmaster.pid while the server runs"

    home.kill()
    assert home.proc.returncode == -signal.SIGKILL
    if crash == "server_and_postgres":
        # The whole machine's worth of crash: the postmaster dies too, leaving its pid file.
        os.kill(postmaster, signal.SIGKILL)
        harness.wait_until(
            lambda: not harness.postgres_pids(home.data_dir),
            timeout=30,
            what="every process of the killed cluster to exit",
        )

    home.start()
    assert_intact(home, agent, sid, seqs)
    stop_cleanly(home)
