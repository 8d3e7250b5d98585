"""sqlsaber-sandbox 0.7.1 running its persistent Python kernel in sessions of the real server,
through `SandboxAgentsBackend`: real Docker sandboxes, the real controller and kernel, the
model scripted (see `analysis`).

Each test opens its own `SandboxSession` with a backend of its own, and checks what the
server and Docker say once it is closed: the session is gone (404) and no container of it is
left.
"""
from __future__ import annotations

import asyncio
import hashlib
import subprocess
import time

import httpx
import nbformat
import pytest
import sandbox_agents
from sqlsaber_sandbox import SandboxConfig, SandboxError, SandboxSession, SessionLost

import analysis
import sandboxes
from sandbox_agents_sqlsaber import SandboxAgentsBackend

pytestmark = pytest.mark.anyio

#: A session in a built environment boots in seconds; the first kernel start is slower.
OPEN_SECONDS = 180
#: How long the sandbox of a deleted session may take to disappear from Docker.
GONE_DEADLINE = 60.0
#: When the controller interrupts a cell (SandboxConfig.cell_seconds) in the interrupt test.
CELL_SECONDS = 15
#: How long the cell the test cancels may take to show that it started: less than
#: CELL_SECONDS, or the controller would interrupt it before the test cancels it.
STARTED_DEADLINE = 10.0
POLL = 0.2

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def backend(aclient, analyst, analysis_environment, janitor):
    """A backend opening a session of the test agent, in the built-in analysis environment
    (built by then). Its session is also handed to the janitor, so a failing test leaves
    nothing running."""
    made = SandboxAgentsBackend(aclient, analyst.slug)
    yield made
    if made.session_id is not None:
        janitor.track(made.session_id)


async def wait_for(predicate, timeout: float, what: str):
    """Polls the coroutine function `predicate` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(POLL)


def assert_cleaned_up(client: sandbox_agents.Client, server, session_id: str) -> None:
    """The session is deleted and Docker holds nothing of it, nor of the deployment."""
    with pytest.raises(sandbox_agents.NotFoundError):
        client.sessions.get(session_id)
    sandboxes.wait_no_containers([session_id], GONE_DEADLINE, f"the deleted session {session_id}")
    left = sandboxes.deployment_containers(server.deployment)
    assert not left, f"containers of the deployment remain:\n{sandboxes.describe(left)}"


async def test_analyses_share_one_kernel_and_bring_back_plots_files_and_a_notebook(
    backend, fake_model, client, server
):
    model = analysis.model(fake_model)
    first_code = "numbers = [3, 1, 4, 1, 5]\nprint('MARK-ONE', sum(numbers))"
    second_code = (
        "import hashlib, os\n"
        "import matplotlib.pyplot as plt\n"
        "payload = os.urandom(64 * 1024)\n"
        "with open('payload.bin', 'wb') as f:\n"
        "    f.write(payload)\n"
        "print('MARK-TWO', max(numbers), hashlib.sha256(payload).hexdigest(), os.getcwd())\n"
        "plt.plot(numbers)\n"
        "plt.show()\n"
    )
    async with SandboxSession(model=model, config=SandboxConfig(open_seconds=OPEN_SECONDS), backend=backend) as session:
        fake_model.set_script(analysis.goal_script("GOAL-ONE", first_code, "MARK-ONE", "The sum is 14."))
        first = await session.analyze("GOAL-ONE: sum the numbers 3, 1, 4, 1, 5")
        assert first.answer == "The sum is 14."
        assert [c.status for c in first.cells] == ["ok"]
        assert analysis.stream_text(first.cells[0]).strip() == "MARK-ONE 14"

        answer = "Plotted, and payload.bin written."
        fake_model.set_script(analysis.goal_script("GOAL-TWO", second_code, "MARK-TWO", answer))
        second = await session.analyze("GOAL-TWO: plot the numbers and write a payload")
        assert second.answer == answer
        assert [c.status for c in second.cells] == ["ok", "ok"], second.cells[-1].outputs
        # `numbers` came from the first analysis: the kernel is the same.
        _, biggest, digest, run_dir = analysis.stream_text(second.cells[-1]).split()
        assert biggest == "5"

        files = {f.name: f for f in second.files}
        payload = files.pop("payload.bin")
        assert len(payload.data) == 64 * 1024
        assert hashlib.sha256(payload.data).hexdigest() == digest
        # Byte for byte what the sandbox holds, read past the backend.
        response = httpx.get(
            f"{server.base_url}/api/sessions/{backend.session_id}/sandbox-files",
            params={"path": f"{run_dir}/payload.bin"}, timeout=60,
        )
        assert response.status_code == 200, response.text
        assert response.content == payload.data
        (plot,) = files.values()
        assert plot.name.startswith("plots/") and plot.media_type == "image/png"
        assert plot.data.startswith(PNG_SIGNATURE)

        notebook = nbformat.reads(second.notebook.decode(), as_version=4)
        nbformat.validate(notebook)
        assert [cell.source for cell in notebook.cells] == [first_code, second_code]
        assert any(o.get("data", {}).get("image/png") for o in notebook.cells[1].outputs)

        # The model saw the cell's output (and the plot) in the tool result.
        last = fake_model.chat_requests()[-1]["messages"]
        assert any(m["role"] == "tool" and "MARK-TWO" in str(m["content"]) for m in last)
        session_id = backend.session_id
    assert backend.session_id is None
    assert_cleaned_up(client, server, session_id)


async def test_an_interrupted_cell_leaves_the_kernel_and_its_state(backend, aclient, client, server):
    config = SandboxConfig(open_seconds=OPEN_SECONDS, cell_seconds=CELL_SECONDS)
    async with SandboxSession(model="test", config=config, backend=backend) as session:
        first = await session.execute("import os\nx = 41\nprint(os.getcwd())")
        run_dir = analysis.stream_text(first).strip()

        # The controller interrupts a cell at cell_seconds.
        slow = await session.execute("import time\ntime.sleep(600)")
        assert slow.status == "interrupted"
        assert any(o.get("ename") == "KeyboardInterrupt" for o in slow.outputs), slow.outputs
        assert analysis.plain_results(await session.execute("x + 1")) == ["42"]

        # The host cancels a running cell: it is interrupted, not the kernel.
        started = f"{run_dir}/started"
        cell = asyncio.create_task(
            session.execute(f"import pathlib, time\npathlib.Path({started!r}).touch()\ntime.sleep(600)")
        )

        async def cell_started() -> bool:
            probe = await aclient.sessions.exec(backend.session_id, f"test -e {started}", timeout=10)
            return probe.exit_code == 0

        await wait_for(cell_started, STARTED_DEADLINE, "the cancelled cell to start")
        cell.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cell
        assert not session.lost
        notebook = nbformat.reads(session.notebook_bytes().decode(), as_version=4)
        assert [c.metadata["status"] for c in notebook.cells][-2:] == ["ok", "interrupted"]
        assert analysis.plain_results(await session.execute("x + 2")) == ["43"]
        session_id = backend.session_id
    assert_cleaned_up(client, server, session_id)


async def test_a_session_stopped_from_outside_is_lost_and_close_still_deletes_it(backend, aclient, client, server):
    config = SandboxConfig(open_seconds=OPEN_SECONDS)
    async with SandboxSession(model="test", config=config, backend=backend) as session:
        assert analysis.plain_results(await session.execute("y = 7\ny")) == ["7"]
        # A command past its timeout is killed alone: the kernel keeps its state.
        with pytest.raises(TimeoutError):
            await backend.execute("sleep 30", timeout=1)
        assert analysis.plain_results(await session.execute("y")) == ["7"]
        session_id = backend.session_id
        stopped = await aclient.sessions.stop(session_id)
        assert stopped.status == "stopped"
        with pytest.raises(SessionLost, match="Python state is lost"):
            await session.execute("y")
    assert backend.session_id is None
    assert_cleaned_up(client, server, session_id)


def inspect(container: str, fmt: str) -> str:
    out = subprocess.run(["docker", "inspect", "-f", fmt, container], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


async def test_the_configs_lifetime_idle_time_and_resources_reach_the_sandbox(backend, client, server):
    config = SandboxConfig(
        open_seconds=OPEN_SECONDS, idle_seconds=300, max_lifetime_seconds=900, cpu_cores=0.5, memory_mb=768,
    )
    async with SandboxSession(model="test", config=config, backend=backend) as session:
        assert analysis.plain_results(await session.execute("6 * 7")) == ["42"]
        s = client.sessions.get(backend.session_id)
        extra = s.model_extra or {}
        assert (extra["idle_ttl_seconds"], extra["max_lifetime_seconds"]) == (300, 900)
        assert extra["resources"] == {"cpus": 0.5, "memory_mb": 768, "gpus": None}
        assert extra["expires_at"] is not None
        assert inspect(s.container_id, "{{.HostConfig.NanoCpus}}") == "500000000"
        assert inspect(s.container_id, "{{.HostConfig.Memory}}") == str(768 * 1024 * 1024)
        session_id = backend.session_id
    assert_cleaned_up(client, server, session_id)


async def test_a_gpu_is_refused_before_anything_is_created(aclient, analyst, client):
    before = client.sessions.list(agent_id=analyst.id).total
    backend = SandboxAgentsBackend(aclient, analyst.slug)
    # sqlsaber-sandbox opens its sandbox with the first cell.
    with pytest.raises((ValueError, SandboxError), match="no GPUs"):
        async with SandboxSession(model="test", config=SandboxConfig(gpu="any"), backend=backend) as session:
            await session.execute("1")
    assert backend.session_id is None
    assert client.sessions.list(agent_id=analyst.id).total == before
