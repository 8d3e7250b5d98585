"""The fake model's side of an analysis: sqlsaber-sandbox's pydantic-ai agent, pointed at the
scripted fake model (crates/fake-model) through the OpenAI chat-completions API, is told to run
one given cell and then to answer.

sqlsaber-sandbox offers the model two tools (sqlsaber_sandbox/session.py): `execute_python`
with `{"code": str}`, and `list_workspace` without arguments. A goal is scripted as:

1. once the last tool result holds the cell's marker (something the cell prints): answer;
2. while the last user message is the goal: call `execute_python` with the cell, once;
3. otherwise: an answer that says the script went off its rails (so a cell that failed
   before printing its marker fails the test with its output instead of looping).

Rule 1 comes first because a plot's image follows the tool result as a user message of its
own, so after a plotting cell the last user message is no longer the goal.
"""
from __future__ import annotations

from typing import Any

from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import fakemodel

EXECUTE_PYTHON = "execute_python"
OFF_SCRIPT = "OFF-SCRIPT: the cell did not print its marker"


def model(fake: fakemodel.FakeModel) -> OpenAIChatModel:
    """The analysis agent's model: chat completions against the fake model."""
    return OpenAIChatModel("fake-model", provider=OpenAIProvider(base_url=f"{fake.url}/v1", api_key="x"))


def goal_script(goal: str, code: str, marker: str, answer: str) -> list[dict[str, Any]]:
    """The rules for one goal (see the module docstring)."""
    run_cell = fakemodel.tool_calls([(EXECUTE_PYTHON, {"code": code})], last_user_contains=goal)
    run_cell["times"] = 1
    return [
        fakemodel.text(answer, last_tool_result_contains=marker),
        run_cell,
        fakemodel.text(OFF_SCRIPT),
    ]


def stream_text(cell) -> str:
    """Everything a cell printed (its `stream` outputs), joined."""
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def plain_results(cell) -> list[str]:
    """The `text/plain` of a cell's results and displays."""
    return [o["data"]["text/plain"] for o in cell.outputs if "text/plain" in o.get("data", {})]
