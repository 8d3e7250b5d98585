"""sqlsaber-sandbox 0.7.1's own `e2b` provider, unmodified, running its analyses on our server
through the E2B-compatible API (docs/e2b.md): nothing but `E2B_API_URL`, `E2B_SANDBOX_URL` and
`E2B_API_KEY` (an API key of ours; any value in open mode) points it at us. The template `code-interpreter-v1` is our
built-in `analysis` environment, which has the kernel packages sqlsaber-sandbox checks for, so
nothing is pip-installed in the sandbox.

Checked: two analyses share the kernel's state, a plot and a generated file come back, the
E2B sandbox is a session of ours while it runs, and after the session closes it is killed (the
session stopped, its container gone).
"""
from __future__ import annotations

import hashlib

import httpx
import pytest
import sandbox_agents
from sqlsaber_sandbox import SandboxConfig, SandboxSession

import analysis
import sandboxes

pytestmark = pytest.mark.anyio

OPEN_SECONDS = 300
GONE_DEADLINE = 60.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def e2b_env(server, monkeypatch, analysis_environment):
    """The E2B SDK's settings for our server. The run's server is in open mode (no key
    exists, and making one would close it for the other tests), where the E2B API takes
    whatever the SDK insists on sending that is not a key of ours (`ak_…`), as the REST API
    takes requests without one;
    crates/server/tests/api/e2b.rs checks that a closed server refuses a wrong key."""
    key = "open-mode-takes-any-key"
    monkeypatch.setenv("E2B_API_URL", f"{server.base_url}/e2b")
    monkeypatch.setenv("E2B_SANDBOX_URL", f"{server.base_url}/e2b-sandbox")
    monkeypatch.setenv("E2B_API_KEY", key)
    monkeypatch.delenv("E2B_DOMAIN", raising=False)
    monkeypatch.delenv("E2B_ACCESS_TOKEN", raising=False)
    return key


def running_sandboxes(server, key: str) -> list[str]:
    listed = httpx.get(
        f"{server.base_url}/e2b/v2/sandboxes", headers={"X-API-KEY": key}, timeout=30
    )
    assert listed.status_code == 200, listed.text
    return [s["sandboxID"] for s in listed.json()]


async def test_the_e2b_provider_runs_analyses_on_us(e2b_env, fake_model, client, server, janitor):
    model = analysis.model(fake_model)
    first_code = "numbers = [3, 1, 4, 1, 5]\nprint('MARK-ONE', sum(numbers))"
    second_code = (
        "import hashlib, os\n"
        "import matplotlib.pyplot as plt\n"
        "payload = os.urandom(32 * 1024)\n"
        "with open('payload.bin', 'wb') as f:\n"
        "    f.write(payload)\n"
        "print('MARK-TWO', max(numbers), hashlib.sha256(payload).hexdigest())\n"
        "plt.plot(numbers)\n"
        "plt.show()\n"
    )
    config = SandboxConfig(provider="e2b", image="code-interpreter-v1", open_seconds=OPEN_SECONDS)
    async with SandboxSession(model=model, config=config) as session:
        fake_model.set_script(analysis.goal_script("GOAL-ONE", first_code, "MARK-ONE", "The sum is 14."))
        first = await session.analyze("GOAL-ONE: sum the numbers 3, 1, 4, 1, 5")
        assert first.answer == "The sum is 14."
        assert analysis.stream_text(first.cells[0]).strip() == "MARK-ONE 14"

        answer = "Plotted, and payload.bin written."
        fake_model.set_script(analysis.goal_script("GOAL-TWO", second_code, "MARK-TWO", answer))
        second = await session.analyze("GOAL-TWO: plot the numbers and write a payload")
        assert second.answer == answer
        assert [c.status for c in second.cells] == ["ok", "ok"], second.cells[-1].outputs
        # `numbers` came from the first analysis: the kernel is the same.
        _, biggest, digest = analysis.stream_text(second.cells[-1]).split()
        assert biggest == "5"
        files = {f.name: f for f in second.files}
        payload = files.pop("payload.bin")
        assert hashlib.sha256(payload.data).hexdigest() == digest
        (plot,) = files.values()
        assert plot.media_type == "image/png" and plot.data.startswith(PNG_SIGNATURE)

        # The E2B sandbox is a session of ours, of the built-in code-interpreter agent.
        (sandbox_id,) = running_sandboxes(server, e2b_env)
        janitor.track(sandbox_id)
        ours = client.sessions.get(sandbox_id)
        assert ours.status == "running"
        assert ours.title == "E2B sandbox (code-interpreter-v1)", ours

    # Closed: the provider killed the sandbox, which stopped the session and its container.
    assert running_sandboxes(server, e2b_env) == []
    assert client.sessions.get(sandbox_id).status == "stopped"
    sandboxes.wait_no_containers([sandbox_id], GONE_DEADLINE, f"the killed E2B sandbox {sandbox_id}")
