"""Subagents, declared with the published client's `Subagent` models on `agents.create` and
driven with `sessions.run`, exactly as users do.

* `mode="tool"`: the parent's model calls the subagent with a task; its steps are ordinary
  `agent.*` events of the same run marked with `payload.subagent = {agent, call_id}`, its answer
  is the call's `agent.tool_result`, and the waiting helper sees exactly one terminal event.
* `mode="handoff"`: `agent.handoff {from, to}`, and the next prompt goes to `to` until it hands
  back.

The fake model tells the agents apart by their instructions (`system_contains`).
"""
from __future__ import annotations

import time

import pytest
import sandbox_agents
from sandbox_agents import Subagent

from fakemodel import text, tool_calls
from sandboxes import Janitor

TERMINAL = {"session.status_idle", "session.status_error"}


@pytest.fixture(scope="module")
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


def _agent(client, janitor, prefix: str, instructions: str, **kwargs):
    a = client.agents.create(slug=f"{prefix}-{time.time_ns()}", name=prefix, instructions=instructions, **kwargs)
    janitor.track_agent(a)
    return a


def test_a_tool_subagent_answers_its_caller_inside_the_same_run(client, janitor, fake_model):
    fake_model.set_script(
        [
            text("researched: 7 files", system_contains="You research.", last_message_role="tool"),
            tool_calls([("shell", {"command": "ls / | wc -l"})], system_contains="You research."),
            text("There are 7 files.", system_contains="You write.", last_tool_result_contains="researched"),
            tool_calls([("research", {"input": "count the files"})], system_contains="You write."),
        ]
    )
    researcher = _agent(client, janitor, "researcher", "You research.", description="Looks things up.")
    writer = _agent(
        client,
        janitor,
        "writer",
        "You write.",
        subagents=[Subagent(agent=researcher.slug, mode="tool", tool_name="research")],
    )
    assert writer.subagents[0].agent == researcher.slug and writer.subagents[0].tool_name == "research"
    session = janitor.create_and_wait(client, writer.id)

    result = client.sessions.run(session.id, "how many files?", collect_events=True)

    assert result.ok and result.text == "There are 7 files."
    stored = [e for e in result.events if e.seq > 0]
    assert [e.type for e in stored].count("session.status_idle") == 1
    assert all(e.run_id == result.run_id for e in stored)
    call = next(e for e in stored if e.type == "agent.tool_use" and e.payload["tool"] == "research")
    nested = [e for e in stored if isinstance(e.payload.get("subagent"), dict)]
    assert [e.type for e in nested] == ["agent.tool_use", "agent.tool_result", "agent.message"]
    assert all(e.payload["subagent"] == {"agent": researcher.slug, "call_id": call.payload["call_id"]} for e in nested)
    answer = next(
        e for e in stored if e.type == "agent.tool_result" and e.payload.get("call_id") == call.payload["call_id"]
    )
    assert answer.payload["output"] == "researched: 7 files"
    assert result.usage["by_agent"][researcher.slug]["requests"] == 2
    assert result.usage["by_agent"][writer.slug]["requests"] == 2
    # The subagent's first request held only its task.
    first = next(r for r in fake_model.chat_requests() if "You research." in (r["messages"][0].get("content") or ""))
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == "count the files"


def test_a_handoff_gives_the_next_prompts_to_the_new_agent_until_it_hands_back(client, janitor, fake_model):
    support = _agent(client, janitor, "support", "You are support.")
    fake_model.set_script(
        [
            tool_calls(
                [(f"transfer_to_{support.slug}", {})], system_contains="You are the desk.", last_message_role="user",
                last_user_contains="broken",
            ),
            text("desk here", system_contains="You are the desk."),
            text("support here", system_contains="You are support."),
        ]
    )
    desk = _agent(
        client, janitor, "desk", "You are the desk.", subagents=[{"agent": support.slug, "mode": "handoff"}]
    )
    session = janitor.create_and_wait(client, desk.id)

    first = client.sessions.run(session.id, "my laptop is broken")
    assert first.ok and first.text == "support here"
    handoffs = [e for e in client.sessions.history(session.id) if e.type == "agent.handoff"]
    assert [(e.payload["from"], e.payload["to"], e.run_id) for e in handoffs] == [
        (desk.slug, support.slug, first.run_id)
    ]
    second = client.sessions.run(session.id, "it still does not boot")
    assert second.ok and second.text == "support here"
    assert list(second.usage["by_agent"]) == [support.slug]

    # Support is offered the way back to the desk.
    offered = [
        t["function"]["name"]
        for r in fake_model.chat_requests()
        if "You are support." in (r["messages"][0].get("content") or "")
        for t in r.get("tools", [])
    ]
    back = f"transfer_to_{desk.slug}"
    assert back in offered
    fake_model.set_script(
        [
            tool_calls([(back, {})], system_contains="You are support.", last_message_role="user"),
            text("desk here", system_contains="You are the desk."),
        ]
    )
    third = client.sessions.run(session.id, "done, thanks")
    assert third.ok and third.text == "desk here"
    handoffs = [e for e in client.sessions.history(session.id) if e.type == "agent.handoff"]
    assert (handoffs[-1].payload["from"], handoffs[-1].payload["to"]) == (support.slug, desk.slug)


def test_a_cycle_of_subagents_is_a_422(client, janitor):
    leaf = _agent(client, janitor, "leaf", "")
    top = _agent(client, janitor, "top", "", subagents=[Subagent(agent=leaf.slug)])
    with pytest.raises(sandbox_agents.UnprocessableEntityError) as e:
        client.agents.update(leaf.id, version=leaf.version, subagents=[Subagent(agent=top.slug)])
    assert "cycle" in str(e.value)
    assert client.agents.get(leaf.id).subagents == []
