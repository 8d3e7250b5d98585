"""Agent memory, driven as users drive it: the published client declares the agent (the
`memory` capability), runs its sessions and stops them; the memory store itself
(`GET/PUT /api/agents/{ref}/memory`) is not in the client, so it is read over plain HTTP.

What a user relies on:
* a session of the agent starts with the store under `memories/` and its summary in the
  system prompt;
* what a run writes to `memories/MEMORY.md` (here through the model's own tool call) is merged
  into the agent's store after the session stops, by the server's consolidation worker, without
  anyone asking;
* the next session of the agent sees the merged store;
* the consolidation's model call is counted in the stopped session's usage.

The fake model tells the consolidation's calls from the turns' by its system prompt.
"""
from __future__ import annotations

import time

import pytest

from fakemodel import text, tool_calls
from sandboxes import Janitor

#: How the consolidation's system prompt starts (`sandbox_agents_agent::CONSOLIDATION_MARKER`).
CONSOLIDATION = "You consolidate the long-term memory of an AI agent."
#: The worker looks for queued jobs every 5 s; a model call is instant here.
CONSOLIDATION_DEADLINE = 60.0


@pytest.fixture(scope="module")
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


def _memory(raw, agent_id: str) -> dict:
    r = raw.get(f"/api/agents/{agent_id}/memory")
    assert r.status_code == 200, r.text
    return r.json()


def _wait_for_version(raw, agent_id: str, version: int) -> dict:
    deadline = time.monotonic() + CONSOLIDATION_DEADLINE
    while True:
        m = _memory(raw, agent_id)
        if m["version"] >= version:
            return m
        if time.monotonic() > deadline:
            raise AssertionError(f"the memory did not reach version {version} in {CONSOLIDATION_DEADLINE}s: {m}")
        time.sleep(0.5)


def _system(request: dict) -> str:
    return request["messages"][0].get("content") or ""


def test_what_a_run_writes_to_memory_is_consolidated_after_the_stop_and_seen_by_the_next_session(
    client, raw, janitor, fake_model
):
    fake_model.set_script(
        [
            text(
                "<memory>\n# Memory\n- the build listens on port 8123\n</memory>\n"
                "<summary>\nThe build listens on port 8123.\n</summary>",
                system_contains=CONSOLIDATION,
            ),
            text("Noted in my memory.", system_contains="You remember.", last_message_role="tool"),
            tool_calls(
                [("shell", {"command": "echo '- the build listens on port 8123' >> memories/MEMORY.md"})],
                system_contains="You remember.",
                last_user_contains="port 8123",
            ),
            text("It listens on port 8123.", system_contains="You remember."),
        ]
    )
    agent = client.agents.create(
        slug=f"memo-{time.time_ns()}",
        name="memo",
        instructions="You remember.",
        capabilities=["shell", "filesystem", "memory"],
    )
    janitor.track_agent(agent)
    assert "memory" in agent.capabilities
    assert _memory(raw, agent.id) == {"memory": "", "summary": "", "version": 0, "updated_at": None}

    first = janitor.create_and_wait(client, agent.id)
    assert client.sessions.read_text(first.id, "memories/MEMORY.md") == ""
    result = client.sessions.run(first.id, "The build listens on port 8123; remember it.")
    assert result.ok and result.text == "Noted in my memory."
    assert "port 8123" in client.sessions.read_text(first.id, "memories/MEMORY.md")

    stopped = client.sessions.stop(first.id)
    assert stopped.status == "stopped"
    merged = _wait_for_version(raw, agent.id, 1)
    assert merged["memory"] == "# Memory\n- the build listens on port 8123"
    assert merged["summary"] == "The build listens on port 8123."
    asked = [r for r in fake_model.chat_requests() if _system(r).startswith(CONSOLIDATION)]
    assert len(asked) == 1
    assert "- the build listens on port 8123" in asked[0]["messages"][1]["content"]

    # Its model call is the stopped session's usage too, marked as memory's.
    usage = client.sessions.get(first.id).usage
    assert usage["memory"]["requests"] == 1, usage
    assert usage["requests"] == 3, usage  # two steps of the turn, one consolidation
    assert usage["by_agent"][agent.slug]["requests"] == 3, usage

    # The next session starts from the merged store, in its workspace and its system prompt.
    second = janitor.create_and_wait(client, agent.id)
    assert client.sessions.read_text(second.id, "memories/MEMORY.md") == merged["memory"]
    result = client.sessions.run(second.id, "Which port?")
    assert result.ok and result.text == "It listens on port 8123."
    last = [r for r in fake_model.chat_requests() if "You remember." in _system(r)][-1]
    assert _system(last).endswith("The build listens on port 8123."), _system(last)
