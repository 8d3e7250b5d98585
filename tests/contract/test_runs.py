"""Runs, driven through the published client against the scripted fake model: messages,
the events a run writes (`user.message`, live `agent.text_delta`s, tool calls and results, a
terminal `session.status_idle` or `session.status_error`), client tools, and the 409s.

`run()` with a sandbox shell tool and a final answer, deltas seen live, client `Tool` handlers
(also one that raises), a deferrable call answered later with `submit_tool_result` and
`wait_for_run(after=last_seq)`, interrupt, `max_turns`, a model error surfacing as
`RunFailedError`, usage figures, `create(prompt=...)` followed by `wait_for_run` without a run
id, and the 409s for busy and parked sessions.

Each test sets the fake model's script (tests run one at a time). One session is shared by the
tests that leave it idle; tests that need a special agent make their own.
"""
from __future__ import annotations

import json
import time

import httpx
import pytest
import sandbox_agents
from sandbox_agents import ConflictError, NotFoundError, RunFailedError, Tool

import fakemodel
import harness
from fakemodel import text, tool_calls
from sandboxes import Janitor

TURN = 120.0


@pytest.fixture(scope="module")
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


@pytest.fixture(scope="module")
def session(client_module, janitor):
    agent = client_module.agents.create(
        slug=f"runner-{time.time_ns()}", name="Runner", instructions="You are a contract-test agent."
    )
    janitor.track_agent(agent)
    return janitor.create_and_wait(client_module, agent.id)


@pytest.fixture(scope="module")
def client_module(server):
    with sandbox_agents.Client(base_url=server.base_url) as c:
        yield c


def test_run_uses_the_shell_streams_deltas_live_and_reports_usage(client, session, fake_model):
    fake_model.set_script(
        [
            text("Done: report.txt says hello.", last_tool_result_contains="exit code: 0"),
            tool_calls([("shell", {"command": "echo hello > report.txt"})], last_user_contains="write the report"),
        ]
    )
    seen: list = []
    result = client.sessions.run(session.id, "write the report", on_event=seen.append, collect_events=True)

    assert result.ok and result.status == "completed"
    assert result.stop_reason == "end_turn"
    assert result.text == "Done: report.txt says hello."
    assert result.turns == 2
    assert result.usage["requests"] == 2 and result.usage["total_tokens"] > 0
    assert result.usage["by_agent"] and result.usage["by_model"]
    assert result.session_usage["requests"] >= 2
    assert result.sandbox_seconds > 0
    types = [e.type for e in seen]
    deltas = [e for e in seen if e.type == "agent.text_delta"]
    assert deltas and all(e.seq == 0 and e.run_id == result.run_id for e in deltas)
    assert "".join(e.payload["text"] for e in deltas) == result.text
    # Live: every delta came before the terminal event.
    assert max(i for i, t in enumerate(types) if t == "agent.text_delta") < types.index("session.status_idle")
    stored = [e.type for e in result.events if e.seq > 0]
    assert stored == ["user.message", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]
    assert client.sessions.read_text(session.id, "report.txt") == "hello\n"
    detail = client.sessions.get(session.id)
    assert detail.activity == "idle"
    run = next(r for r in detail.runs if r.id == result.run_id)
    assert run.status == "completed" and run.final_output == result.text


def test_tool_handlers_answer_client_calls_even_when_they_raise(client, session, fake_model):
    fake_model.set_script(
        [
            text("Ada, and the CRM is down.", last_tool_result_contains="The tool failed: RuntimeError: CRM down"),
            tool_calls([("crm_status", {})], last_tool_result_contains="Ada Lovelace"),
            tool_calls([("lookup", {"id": "42"})], last_user_contains="who is 42"),
        ]
    )
    asked: list = []

    def lookup(args):
        asked.append(args)
        return {"name": "Ada Lovelace"}

    def crm_status(args):
        raise RuntimeError("CRM down")

    result = client.sessions.run(
        session.id,
        "who is 42?",
        tools=[
            Tool(name="lookup", handler=lookup, description="Find a customer.",
                 parameters={"type": "object", "properties": {"id": {"type": "string"}}}),
            Tool(name="crm_status", handler=crm_status),
        ],
        collect_events=True,
    )
    assert result.ok, result.error
    assert result.text == "Ada, and the CRM is down."
    assert asked == [{"id": "42"}]
    results = [e.payload for e in result.events if e.type == "agent.client_tool_result"]
    assert [r["output"] for r in results] == ['{"name": "Ada Lovelace"}', "The tool failed: RuntimeError: CRM down"]
    calls = [e for e in result.events if e.type == "agent.client_tool_call"]
    assert all(isinstance(c.payload["arguments"], str) and c.run_id == result.run_id for c in calls)
    assert client.sessions.tool_calls(session.id) == []


def test_a_deferrable_call_parks_the_run_until_answered_later(client, server, janitor, new_slug, fake_model):
    agent = client.agents.create(
        slug=new_slug("approver"), name="Approver",
        client_tools=[{"name": "approve", "description": "Ask a person.", "deferrable": True}],
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(client, agent.id)
    fake_model.set_script(
        [
            text("Refund sent.", last_tool_result_contains="approved"),
            tool_calls([("approve", {"amount": 25})], last_user_contains="refund"),
        ]
    )
    paused = client.sessions.run(session.id, "refund 25 EUR")
    assert paused.requires_action and not paused.ok
    assert paused.status == "running"
    assert len(paused.call_ids) == 1
    waiting = client.sessions.tool_calls(session.id)
    assert [c.call_id for c in waiting] == paused.call_ids
    assert waiting[0].deferrable and waiting[0].tool == "approve"
    assert json.loads(waiting[0].arguments) == {"amount": 25}
    assert client.sessions.get(session.id).activity == "idle"
    with pytest.raises(ConflictError):
        client.sessions.send(session.id, "anything else?")

    # Later, from another client (another process, for all the server knows).
    with sandbox_agents.Client(base_url=server.base_url) as other:
        other.sessions.submit_tool_result(session.id, paused.call_ids[0], {"approved": True})
        with pytest.raises(NotFoundError):
            other.sessions.submit_tool_result(session.id, paused.call_ids[0], "twice")
    done = client.sessions.wait_for_run(session.id, run_id=paused.run_id, after=paused.last_seq)
    assert done.ok and done.run_id == paused.run_id
    assert done.text == "Refund sent."
    assert done.turns == 2
    assert client.sessions.tool_calls(session.id) == []


def test_interrupt_cancels_a_turn_in_flight(client, session, fake_model):
    fake_model.set_script([{"when": {"last_user_contains": "take your time"},
                            "reply": {"text": "too late", "delay_ms": 60000}}])
    cursor = client.sessions.cursor(session.id)
    run = client.sessions.send(session.id, "take your time")
    with pytest.raises(ConflictError):
        client.sessions.send(session.id, "me too")
    client.sessions.interrupt(session.id)
    result = client.sessions.wait_for_run(session.id, run_id=run.id, after=cursor, timeout=TURN)
    assert result.cancelled and result.status == "cancelled"
    assert client.sessions.get(session.id).activity == "idle"


def test_max_turns_and_model_errors_raise_run_failed(client, session, fake_model):
    fake_model.set_script(
        [
            fakemodel.error(400, "the model is confused", last_user_contains="confuse"),
            tool_calls([("shell", {"command": "true"})], last_user_contains="loop"),
            tool_calls([("shell", {"command": "true"})], last_message_role="tool"),
        ]
    )
    with pytest.raises(RunFailedError) as failed:
        client.sessions.run(session.id, "loop forever", max_turns=2)
    assert failed.value.event.stop_reason == "max_turns"
    assert failed.value.event.turns == 2
    with pytest.raises(RunFailedError) as failed:
        client.sessions.run(session.id, "confuse yourself")
    assert "the model is confused" in str(failed.value)
    # The session is usable afterwards.
    fake_model.set_script([text("fine")])
    assert client.sessions.run(session.id, "still there?").text == "fine"


def test_create_with_a_prompt_runs_it_first(client, janitor, new_slug, fake_model):
    agent = client.agents.create(slug=new_slug("greeter"), name="Greeter")
    janitor.track_agent(agent)
    fake_model.set_script([text("Hello from the first turn.", last_user_contains="say hello")])
    created = janitor.create(client, agent.id, prompt="say hello")
    result = client.sessions.wait_for_run(created.id, timeout=TURN)
    assert result.ok and result.text == "Hello from the first turn."
    assert client.sessions.get(created.id).runs[0].prompt == "say hello"


def test_a_server_killed_mid_run_leaves_no_run_running(fake_model, new_slug):
    """kill -9 while the model is answering; the next start fails the run (its process is gone)
    and the session takes the next message."""
    from conftest import model_env

    process = harness.ServerProcess(harness.short_tmpdir(prefix="sa-run-"), name="killed mid-run", env=model_env(fake_model))
    janitor = Janitor(lambda: process.base_url)
    try:
        process.start()
        fake_model.set_script([{"when": {"last_user_contains": "slowly"}, "reply": {"text": "never", "delay_ms": 120000}}])
        with sandbox_agents.Client(base_url=process.base_url) as c:
            agent = c.agents.create(slug=new_slug("crash"), name="Crash")
            session = janitor.create_and_wait(c, agent.id)
            cursor = c.sessions.cursor(session.id)
            run = c.sessions.send(session.id, "answer slowly")
        harness.wait_until(lambda: fake_model.chat_requests(), timeout=TURN, what="the model to be asked")
        process.kill()
        process.start()
        with sandbox_agents.Client(base_url=process.base_url) as c:
            ended = c.sessions.wait_for_run(session.id, run_id=run.id, after=cursor, timeout=TURN, raise_on_error=False)
            assert ended.status == "failed"
            assert "stopped (it was restarted or crashed)" in ended.error
            assert c.sessions.get(session.id).activity == "idle"
            fake_model.set_script([text("back again")])
            assert c.sessions.run(session.id, "are you there?").text == "back again"
    finally:
        janitor.cleanup(server_up=process.running)
        if process.running:
            process.stop()
        process.cleanup()


def test_a_budget_reached_ends_the_run_as_a_result_not_an_error(client, server, janitor, new_slug, fake_model):
    # A budget is an addition the published client does not know: set with a plain PATCH, and
    # the turn it stops still reads as a completed result (run() returns, it does not raise).
    fake_model.set_script(
        [{"when": {}, "reply": {"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}],
                                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cost": 0.1}}}]
    )
    agent = client.agents.create(slug=new_slug("budgeted"), name="Budgeted")
    janitor.track_agent(agent)
    session = janitor.create_and_wait(client, agent.id)
    r = httpx.patch(f"{server.base_url}/api/sessions/{session.id}", json={"budget": {"max_cost_usd": 0.25}}, timeout=30)
    assert r.status_code == 200 and r.json()["budget"] == {"max_cost_usd": 0.25}, r.text
    result = client.sessions.run(session.id, "spend", max_turns=20)
    assert result.status == "completed" and result.stop_reason == "budget_reached"
    assert result.usage["requests"] == 3 and abs(result.usage["cost_usd"] - 0.3) < 1e-9
    assert len(fake_model.chat_requests()) == 3
    reached = [e for e in client.sessions.history(session.id) if e.type == "session.budget_reached"]
    assert len(reached) == 1 and reached[0].payload["limit"] == "max_cost_usd"
