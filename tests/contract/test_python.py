"""The `python` capability through the published client, as users drive it: `sessions.run`
turns whose model (scripted) calls the `python` tool. The kernel keeps its state across turns,
a plot comes back saved and named, an error cell is followed by a working one, a long cell is
interrupted at its limit with the state kept, a stop and start says plainly that the kernel
restarted, and `GET /api/sessions/{id}/notebook` (no client method: plain httpx) is a notebook
that `nbformat.validate` accepts.

The agent has no environment: its sessions boot in the server's built-in `analysis`
environment, whose image the first session waits for.
"""
from __future__ import annotations

import time

import httpx
import nbformat
import pytest

from fakemodel import text, tool_calls
from sandboxes import Janitor

#: The built-in environment's first build (pip inside Docker) may take minutes.
BUILD_TIMEOUT = 900.0


@pytest.fixture(scope="module")
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


def cell(word: str, code: str, **args) -> dict:
    """A rule: a prompt holding `word` makes the model run `code` in the `python` tool."""
    return tool_calls([("python", {"code": code, **args})], last_user_contains=word)


def outputs(result) -> list[str]:
    return [e.payload["output"] for e in result.events if e.type == "agent.tool_result"]


@pytest.mark.docker_only(
    "its sessions boot in the built-in `analysis` environment, whose packages (the kernel, "
    "matplotlib) are an image build: the Kubernetes backend builds no images"
)
def test_a_kernel_keeps_state_plots_errors_limits_restarts_and_a_valid_notebook(
    client, janitor, fake_model, server
):
    fake_model.set_script(
        [
            text("done", last_message_role="tool"),
            cell("DEFINE", "rows = [3, 1, 4]\nprint('defined', len(rows))"),
            cell("USE", "sum(rows)"),
            cell("PLOT", "import matplotlib.pyplot as plt\nplt.plot(rows)\nplt.show()"),
            cell("BREAK", "rows[10]"),
            cell("SLOW", "import time\ntime.sleep(120)", timeout=2),
        ]
    )
    agent = client.agents.create(
        slug=f"pyan-{time.time_ns()}", name="Analyst", instructions="Analyse.", capabilities=["python"]
    )
    janitor.track_agent(agent)
    assert agent.capabilities == ["python"]
    created = janitor.create(client, agent.id)
    session = client.sessions.wait_until_running(created.id, timeout=BUILD_TIMEOUT)

    def run(prompt: str) -> list[str]:
        result = client.sessions.run(session.id, prompt, collect_events=True)
        assert result.ok, result
        return outputs(result)

    assert run("DEFINE rows") == ["defined 3\n"]
    assert run("USE rows") == ["8\n"]
    (plotted,) = run("PLOT rows")
    assert "[image saved: outputs/" in plotted and ".png]" in plotted
    saved = plotted.split("[image saved: ")[1].split("]")[0]
    assert client.sessions.read_file(session.id, saved)[:8] == b"\x89PNG\r\n\x1a\n"
    (broken,) = run("BREAK it")
    assert "IndexError" in broken and "Traceback" in broken
    assert run("USE rows again") == ["8\n"], "an error leaves the kernel as it was"
    (slow,) = run("SLOW cell")
    assert "interrupted" in slow and "KeyboardInterrupt" in slow
    assert run("USE after the limit") == ["8\n"]

    client.sessions.stop(session.id)
    client.sessions.start(session.id)
    client.sessions.wait_until_running(session.id, timeout=120)
    (after,) = run("USE after a restart")
    assert after.startswith("note: the Python kernel restarted") and "NameError" in after

    r = httpx.get(f"{server.base_url}/api/sessions/{session.id}/notebook", timeout=30)
    assert r.status_code == 200, r.text
    notebook = nbformat.reads(r.text, as_version=4)
    nbformat.validate(notebook)
    statuses = [c.metadata["sandbox_agents"]["status"] for c in notebook.cells]
    assert statuses == ["ok", "ok", "ok", "error", "ok", "timeout", "ok", "error"]
    assert any("image/png" in o.get("data", {}) for o in notebook.cells[2].outputs)
    assert notebook.cells[0].source == "rows = [3, 1, 4]\nprint('defined', len(rows))"
