"""Compaction through the published client: a run whose conversation reaches 90% of the
model's input window is summarised before its next model call and completes; the client
reads the run's result as usual, and `history()` holds every event, `agent.compaction` (a type
the client does not know) among them.

The server is one of its own, with `--default-max-input-tokens 10000`: the agent's model is
not in the fake model's catalogue, so that flag is its window. The fake model reports the
prompt tokens the script says, which puts the second step over the threshold.
"""
from __future__ import annotations

import time

import pytest
import sandbox_agents

import sandboxes
from conftest import CA_ENV, model_env
from fakemodel import text
from sandboxes import Janitor

CHECKPOINT = "CONTEXT CHECKPOINT"
COMPACTED = "Earlier turns of this conversation were compacted"
SUMMARY = "SUMMARY: the user asked to list the files; the listing ran."


@pytest.fixture(scope="module")
def small_window_server(fake_model):
    env = {**model_env(fake_model), **CA_ENV, "SANDBOX_AGENTS_DEFAULT_MAX_INPUT_TOKENS": "10000"}
    with sandboxes.own_server("small-window server", env) as process:
        yield process


@pytest.fixture
def sclient(small_window_server):
    with sandbox_agents.Client(base_url=small_window_server.base_url) as c:
        yield c


@pytest.fixture
def janitor(small_window_server):
    j = Janitor(small_window_server.base_url)
    yield j
    j.cleanup()


def test_a_run_that_compacts_completes_and_history_keeps_every_event(sclient, janitor, fake_model):
    fake_model.set_script(
        [
            text(SUMMARY, last_user_contains=CHECKPOINT),
            text("Done after compaction.", last_user_contains=COMPACTED),
            {
                "when": {"last_user_contains": "list the files"},
                "reply": {
                    "tool_calls": [{"name": "shell", "arguments": {"command": "echo first"}}],
                    "usage": {"prompt_tokens": 9500, "completion_tokens": 5},
                },
            },
        ]
    )
    agent = sclient.agents.create(
        slug=f"compacting-{time.time_ns()}", name="Compacting",
        instructions="You are a contract-test agent.", model="contract-small-window",
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(sclient, agent.id)

    result = sclient.sessions.run(session.id, "list the files", collect_events=True)
    assert result.ok, result.error
    assert result.text == "Done after compaction."
    assert result.turns == 2
    assert result.usage["requests"] == 3, "two steps and the summary"

    history = [e for e in sclient.sessions.history(session.id) if e.run_id == result.run_id]
    types = [e.type for e in history]
    assert types == [
        "user.message", "agent.tool_use", "agent.tool_result", "agent.compaction", "agent.message",
        "session.status_idle",
    ]
    compaction = history[3].payload
    assert compaction["window"] == 10000
    assert compaction["tokens_before"] >= 9000 > compaction["tokens_after"]
    assert compaction["summary"] == SUMMARY

    # The model's last call saw the system prompt, the user's message and the summary only.
    last = fake_model.chat_requests()[-1]
    assert [m["role"] for m in last["messages"]] == ["system", "user", "user"]
    assert last["messages"][2]["content"].endswith(SUMMARY)
    assert "echo first" not in str(last["messages"])
