"""The scripted fake model server (`crates/fake-model`, binary `fake-model`), as a process.

It speaks the OpenAI chat-completions wire format over a real socket (streaming deltas, tool
calls, usage, errors); the server under test reaches it as its LiteLLM proxy
(`LITELLM_PROXY_API_BASE`). A test sets the rules it needs with `set_script` ("when the
conversation looks like X, answer Y"; see crates/fake-model/src/script.rs) and may read back
the requests the model received.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx

import harness


def binary() -> Path:
    return Path(os.environ.get("SANDBOX_AGENTS_FAKE_MODEL_BIN") or harness.REPO_ROOT / "target" / "debug" / "fake-model")


class FakeModel:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None

    def start(self) -> "FakeModel":
        exe = binary()
        if not exe.exists():
            raise RuntimeError(f"{exe} does not exist: build it with `cargo build -p sandbox-agents-fake-model`")
        self.proc = subprocess.Popen(
            [str(exe), "--bind", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        prefix = "listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"the fake model did not start: {line!r}")
        self.url = line[len(prefix):]
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def set_script(self, rules: list[dict[str, Any]]) -> None:
        """Replaces the rules (the first matching rule answers) and forgets recorded requests."""
        r = httpx.put(f"{self.url}/_script", json={"rules": rules}, timeout=10)
        r.raise_for_status()
        httpx.delete(f"{self.url}/_requests", timeout=10).raise_for_status()

    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat-completions request bodies received since the script was set, in order."""
        r = httpx.get(f"{self.url}/_requests", timeout=10)
        r.raise_for_status()
        return [x["body"] for x in r.json() if x.get("path", "").endswith("/chat/completions")]


# -- rule builders (the script's JSON shapes) --


def text(reply: str, **when: Any) -> dict[str, Any]:
    return {"when": when, "reply": {"text": reply}}


def tool_calls(calls: list[tuple[str, dict[str, Any]]], **when: Any) -> dict[str, Any]:
    return {"when": when, "reply": {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}}


def error(status: int, message: str, **when: Any) -> dict[str, Any]:
    return {"when": when, "reply": {"error": {"status": status, "body": message}}}
