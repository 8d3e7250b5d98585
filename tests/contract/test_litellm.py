"""Runs through a real LiteLLM proxy, end to end: the server's `proxy` transport talks to
`litellm --config` (offline: `LITELLM_LOCAL_MODEL_COST_MAP=True`, a master key), which forwards
to the scripted fake model. Streaming, tool calls and usage must survive the translation, and
`GET /api/models` must show the proxy's catalogue. The proxy prices the calls (its
`include_cost_in_streaming_usage`, from the prices its config gives the model), and the run's
usage carries that cost.

`scripts/test` installs LiteLLM into `target/litellm-venv` and sets `SA_REQUIRE_LITELLM=1`, so
CI fails rather than skips when it is missing; elsewhere a missing LiteLLM skips the module.
Set `SANDBOX_AGENTS_LITELLM_BIN` to use another `litellm` executable.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
import sandbox_agents
from sandbox_agents import Tool

import harness
from fakemodel import text, tool_calls
from sandboxes import Janitor

MASTER_KEY = "sk-contract-litellm"
# The fake model's prices in the proxy's config, US dollars per token.
INPUT_PRICE = 0.000002
OUTPUT_PRICE = 0.00001


def litellm_binary() -> Path:
    return Path(os.environ.get("SANDBOX_AGENTS_LITELLM_BIN") or harness.REPO_ROOT / "target" / "litellm-venv" / "bin" / "litellm")


@pytest.fixture(scope="module")
def litellm(fake_model, tmp_path_factory):
    exe = litellm_binary()
    if not exe.exists():
        if os.environ.get("SA_REQUIRE_LITELLM") == "1":
            pytest.fail(f"{exe} is missing (scripts/test installs it)")
        pytest.skip(f"LiteLLM is not installed at {exe}")
    d = tmp_path_factory.mktemp("litellm")
    config = d / "config.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: fake-model\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: {fake_model.url}/v1\n"
        "      api_key: fake\n"
        "    model_info:\n"
        f"      input_cost_per_token: {INPUT_PRICE}\n"
        f"      output_cost_per_token: {OUTPUT_PRICE}\n"
        "litellm_settings:\n"
        "  include_cost_in_streaming_usage: true\n"
    )
    port = harness.free_port()
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_MASTER_KEY=MASTER_KEY, NO_COLOR="1")
    log = open(d / "litellm.log", "wb")
    proc = subprocess.Popen(
        [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
    )
    url = f"http://127.0.0.1:{port}"

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"litellm exited with {proc.returncode}:\n{(d / 'litellm.log').read_text()[-3000:]}")
        try:
            return httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        harness.wait_until(up, timeout=180, what="the LiteLLM proxy to answer", poll=0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def via_litellm(litellm):
    """A server whose LiteLLM proxy is the real one."""
    process = harness.ServerProcess(
        harness.short_tmpdir(), name="server via LiteLLM",
        env={"LITELLM_PROXY_API_BASE": litellm, "LITELLM_PROXY_API_KEY": MASTER_KEY},
    )
    janitor = None
    try:
        process.start()
        janitor = Janitor(process.base_url)
        with sandbox_agents.Client(base_url=process.base_url) as client:
            yield client, janitor
    finally:
        if janitor is not None:
            janitor.cleanup(server_up=process.running)
        if process.running:
            assert process.stop() == 0
        process.cleanup()


def test_models_come_from_the_proxy(via_litellm):
    client, _ = via_litellm
    assert "fake-model" in [m.id for m in client.models.list()]


def test_the_proxy_lists_prices_where_the_server_reads_them(litellm):
    # The server prices a call the proxy did not price from /model/info's per-token prices:
    # the real proxy lists them under the names the server reads.
    info = httpx.get(f"{litellm}/model/info", headers={"Authorization": f"Bearer {MASTER_KEY}"}, timeout=30).json()
    entry = next(e for e in info["data"] if e["model_name"] == "fake-model")
    assert entry["model_info"]["input_cost_per_token"] == pytest.approx(INPUT_PRICE)
    assert entry["model_info"]["output_cost_per_token"] == pytest.approx(OUTPUT_PRICE)


def test_a_turn_with_sandbox_and_client_tools_runs_through_litellm(via_litellm, fake_model, new_slug):
    client, janitor = via_litellm
    fake_model.set_script(
        [
            text("Ada lives in /workspace/ada.txt.", last_tool_result_contains="Lovelace"),
            tool_calls([("lookup", {"id": "7"})], last_tool_result_contains="exit code: 0"),
            tool_calls([("shell", {"command": "echo Ada > ada.txt"})], last_user_contains="file ada"),
        ]
    )
    agent = client.agents.create(slug=new_slug("ll"), name="Via LiteLLM", model="fake-model")
    janitor.track_agent(agent)
    session = janitor.create_and_wait(client, agent.id)
    seen: list = []
    result = client.sessions.run(
        session.id,
        "file ada, then look her up",
        tools=[Tool(name="lookup", handler=lambda args: f"Lovelace (id {args['id']})")],
        on_event=seen.append,
    )
    assert result.ok, result.error
    assert result.text == "Ada lives in /workspace/ada.txt."
    assert result.turns == 3
    assert result.usage["requests"] == 3 and result.usage["total_tokens"] > 0
    assert "fake-model" in result.usage["by_model"]
    # Priced by the proxy, at its config's prices.
    usage = result.usage
    assert usage["unpriced_requests"] == 0, usage
    want = usage["input_tokens"] * INPUT_PRICE + usage["output_tokens"] * OUTPUT_PRICE
    assert usage["cost_usd"] == pytest.approx(want, rel=1e-6), usage
    assert any(e.type == "agent.text_delta" for e in seen)
    assert client.sessions.read_text(session.id, "ada.txt") == "Ada\n"
    # The model behind the proxy saw our request shapes.
    bodies = fake_model.chat_requests()
    assert len(bodies) == 3 and all(b.get("stream") for b in bodies)
    assert {t["function"]["name"] for t in bodies[0]["tools"]} >= {"shell", "lookup"}
