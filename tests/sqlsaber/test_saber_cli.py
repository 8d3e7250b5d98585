"""The `sandbox-agents` plugin through sqlsaber's own CLI: `saber plugins setup sandbox-agents`
(or environment variables alone) and then `saber "question"`, with no code of ours in between.

Each test runs the real `saber` of the venv in a home of its own (its settings, its model
configuration, its credential store), against a SQLite file, with sqlsaber's model pointed at the
scripted fake model, and the server of the run closed by an API key (so a request without the
configured key is refused). The model delegates to `analyze_in_sandbox`; sqlsaber-sandbox's
analyst runs one cell; the cell proves where it runs by a handshake with the test, which reads
the server's side while saber waits:

1. the cell writes a file at a path of the test's choosing, then waits for a second one;
2. the test finds the agent's session on the server (its agent, environment and limits are
   asserted), reads the first file from that session's sandbox and writes the second with a
   nonce;
3. the cell prints the nonce, which reaches the model only if the cell ran in that session.

After saber exits, the session is deleted and nothing of it is left in Docker. The setup
wizard itself (what `saber plugins setup sandbox-agents` asks in a terminal) is driven in a
pseudo-terminal, with no server.
"""
from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest
import sandbox_agents

import fakemodel
import sandboxes

#: How long one `saber` question may take: a session boots in the built environment, the
#: kernel starts, one cell runs.
SABER_DEADLINE = 420.0
#: How long the session and the cell's first file may take to appear once saber runs.
SESSION_DEADLINE = 300.0
#: How long the cell waits for the test's file before printing that it got none.
RELEASE_SECONDS = 240
GONE_DEADLINE = 60.0
#: How long the server may go on requiring credentials once its only key is deleted (it
#: trusts "keys exist" for a minute).
REOPEN_DEADLINE = 90.0
POLL = 0.2

SABER = Path(sys.executable).with_name("saber")
#: pydantic-ai's OpenAI chat-completions model (sqlsaber passes a model it does not know to
#: pydantic-ai as it is; `saber models set` accepts only its own providers, so the test writes
#: the model configuration file, as a user pointing saber at an OpenAI-compatible proxy would).
MODEL = "openai-chat:fake-model"
#: A file-based keyring that needs no desktop session and no password prompt: the plugin's
#: API key is stored through sqlsaber's own keyring calls, in this backend.
KEYRING_BACKEND = "keyrings.cryptfile.file.PlaintextKeyring"

ANALYZE = "analyze_in_sandbox"
EXECUTE_PYTHON = "execute_python"


@dataclass
class Home:
    """A saber home: where its settings, model configuration and keyring live."""

    root: Path
    database: Path

    @property
    def config_dir(self) -> Path:
        return self.root / "config" / "sqlsaber"

    def env(self, fake: fakemodel.FakeModel | None, **extra: str) -> dict[str, str]:
        """saber's environment: nothing of the developer's (no server, model or saber
        variables), this home, the fake model (if any) as the OpenAI endpoint."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SANDBOX_AGENTS_", "SQLSABER_", "OPENAI_", "XDG_", "PYTHON_KEYRING"))
        }
        env.update(
            HOME=str(self.root),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_DATA_HOME=str(self.root / "data"),
            XDG_STATE_HOME=str(self.root / "state"),
            XDG_CACHE_HOME=str(self.root / "cache"),
            PYTHON_KEYRING_BACKEND=KEYRING_BACKEND,
            SQLSABER_SKIP_VERSION_CHECK="1",
            NO_COLOR="1",
            COLUMNS="200",
        )
        if fake is not None:
            env.update(OPENAI_BASE_URL=f"{fake.url}/v1", OPENAI_API_KEY="sqlsaber-cli-tests")
        env.update(extra)
        return env

    def saber(self, env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SABER), *args], env=env, cwd=self.root, input=stdin, capture_output=True, text=True,
            timeout=timeout,
        )


@pytest.fixture
def home(tmp_path: Path) -> Home:
    """A fresh saber home with its model set to the fake model and a SQLite database."""
    root = tmp_path / "home"
    config = root / "config" / "sqlsaber"
    config.mkdir(parents=True)
    (config / "model_config.json").write_text(
        json.dumps({"version": 2, "model": MODEL, "thinking": {"enabled": False, "level": "medium"}})
    )
    database = root / "numbers.db"
    db = sqlite3.connect(database)
    with db:
        db.execute("create table numbers (n integer)")
        db.executemany("insert into numbers values (?)", [(3,), (1,), (4,), (1,), (5,)])
    db.close()
    return Home(root, database)


@pytest.fixture(scope="module")
def api_key(server, client: sandbox_agents.Client) -> Iterator[str]:
    """An API key of the server, which closes it while it exists: a saber that did not send
    the key gets 401. Deleting it at the end of the module opens the server again for the other
    tests, once the server stops trusting its cached "keys exist" (a minute; waited for).

    Only an operator may delete a key, and a key is one only when unbound (the server has no
    shared token), which it is when no project resolves at its creation: the key is made while
    a second project exists, which is then deleted with the key (the server is closed by then)."""
    extra = client.projects.create("saber cli", slug=f"saber-cli-{uuid.uuid4().hex[:6]}")
    created = client.api_keys.create(name=f"saber-cli-{uuid.uuid4().hex[:6]}")
    auth = {"Authorization": f"Bearer {created.key}"}
    try:
        assert created.project_id is None, "the key must be unbound to delete itself"
        gone = httpx.delete(f"{server.base_url}/api/projects/{extra.id}", headers=auth, timeout=30)
        assert gone.status_code == 204, gone.text
        yield created.key
    finally:
        # Idempotent: the other tests need the server's one project alone again.
        httpx.delete(f"{server.base_url}/api/projects/{extra.id}", headers=auth, timeout=30)
        deleted = httpx.delete(f"{server.base_url}/api/api-keys/{created.id}", headers=auth, timeout=30)
        assert deleted.status_code == 204, deleted.text
        deadline = time.monotonic() + REOPEN_DEADLINE
        while client.me().auth_required:
            assert time.monotonic() < deadline, f"the server was still closed {REOPEN_DEADLINE:g}s after its key was deleted"
            time.sleep(1)


def script(goal: str, code: str, marker: str) -> tuple[list[dict[str, Any]], str, str]:
    """The fake model's rules: the main agent (offered `analyze_in_sandbox`) delegates the
    goal, the analyst (offered `execute_python`) runs the cell once and reports, the main
    agent answers with what the analyst reported. Anything else is an off-script answer."""
    analyst_answer = f"ANALYST-DONE {goal}"
    final = f"SABER-FINAL {goal}"
    delegate = fakemodel.tool_calls([(ANALYZE, {"goal": f"{goal}: run the cell"})], has_tool=ANALYZE)
    delegate["times"] = 1
    run_cell = fakemodel.tool_calls([(EXECUTE_PYTHON, {"code": code})], has_tool=EXECUTE_PYTHON)
    run_cell["times"] = 1
    rules = [
        fakemodel.text(final, has_tool=ANALYZE, last_tool_result_contains=analyst_answer),
        fakemodel.text(analyst_answer, has_tool=EXECUTE_PYTHON, last_tool_result_contains=marker),
        delegate,
        run_cell,
        fakemodel.text("OFF-SCRIPT"),
    ]
    return rules, analyst_answer, final


def handshake_cell(started: str, release: str, marker: str) -> str:
    """The cell: write `started`, wait (with a deadline) for `release`, print its content."""
    return (
        "import pathlib, time\n"
        f"pathlib.Path({started!r}).write_text('started')\n"
        f"release = pathlib.Path({release!r})\n"
        f"deadline = time.monotonic() + {RELEASE_SECONDS}\n"
        "while not release.exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        f"print({marker!r}, release.read_text() if release.exists() else 'NO-RELEASE')\n"
    )


def poll(predicate, timeout: float, what: str, process: subprocess.Popen) -> Any:
    """`predicate()` until it returns something truthy; fails early when saber exited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"saber exited ({process.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(POLL)


@dataclass
class Analysis:
    session: dict[str, Any]
    stdout: str
    stderr: str


def ask_saber(home: Home, env: dict[str, str], server, key: str, agent: Any, fake: fakemodel.FakeModel) -> Analysis:
    """Runs `saber -d <sqlite> "<question>"`, does the handshake with its cell through the
    server, and returns the session saber's analysis ran in and what saber printed."""
    tag = uuid.uuid4().hex[:10]
    goal, marker, nonce = f"GOAL-{tag}", f"MARK-{tag}", f"NONCE-{uuid.uuid4().hex}"
    started, release = f"/tmp/saber-started-{tag}", f"/tmp/saber-release-{tag}"
    rules, analyst_answer, final = script(goal, handshake_cell(started, release, marker), marker)
    fake.set_script(rules)
    api = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    process = subprocess.Popen(
        [str(SABER), "-d", str(home.database), f"QUESTION-{tag}: analyse the numbers in a sandbox"],
        env=env, cwd=home.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    session = None
    try:

        def agent_session() -> dict[str, Any] | None:
            r = api.get("/api/sessions", params={"agent_id": agent.slug})
            if r.status_code == 404:  # an agent made on first use (E2B's) is not there yet
                return None
            r.raise_for_status()
            running = [s for s in r.json() if s["status"] == "running"]
            return running[0] if running else None

        session = poll(agent_session, SESSION_DEADLINE, f"a running session of {agent.slug}", process)

        def cell_started() -> bool:
            r = api.get(f"/api/sessions/{session['id']}/sandbox-files", params={"path": started})
            return r.status_code == 200 and r.content == b"started"

        poll(cell_started, SESSION_DEADLINE, f"the cell to write {started} in session {session['id']}", process)
        put = api.put(
            f"/api/sessions/{session['id']}/sandbox-files", params={"path": release}, content=nonce.encode(),
            headers={"Content-Type": "application/octet-stream"},
        )
        assert put.status_code < 300, put.text
        stdout, stderr = process.communicate(timeout=SABER_DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        if process.returncode != 0 and session is not None:
            api.delete(f"/api/sessions/{session['id']}")  # what a failed saber left
        api.close()
    assert process.returncode == 0, f"saber exited with {process.returncode}\n{stdout}\n{stderr}"
    assert final in stdout, f"saber did not print the final answer:\n{stdout}\n{stderr}"
    # The cell's output, with the nonce only the session's sandbox held, reached the analyst.
    tool_results = [
        str(m.get("content"))
        for body in fake.chat_requests()
        for m in body["messages"]
        if m["role"] == "tool"
    ]
    assert any(f"{marker} {nonce}" in r for r in tool_results), tool_results
    assert any(analyst_answer in r for r in tool_results), tool_results
    return Analysis(session, stdout, stderr)


def assert_gone(server, key: str, session_id: str) -> None:
    r = httpx.get(f"{server.base_url}/api/sessions/{session_id}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 404, f"saber's session {session_id} was not deleted: {r.status_code} {r.text}"
    sandboxes.wait_no_containers([session_id], GONE_DEADLINE, f"saber's session {session_id}")


def test_the_setup_wizard_asks_for_each_setting_and_keeps_the_key_in_the_credential_store(home):
    """`saber plugins setup sandbox-agents` in a terminal (a pseudo-terminal here): sqlsaber's
    wizard over our declaration, the key masked, a notice for a server off this machine."""
    key = f"ak_wizard{uuid.uuid4().hex}"
    env = home.env(None, LINES="40")
    wizard = pexpect.spawn(
        str(SABER), ["plugins", "setup", "sandbox-agents"], env=env, cwd=str(home.root), encoding="utf-8",
        timeout=30, dimensions=(40, 160),
    )
    wizard.logfile_read = screen = io.StringIO()
    try:
        answers = [
            ("Sandbox Agents server URL", "\x01\x0bhttps://sa.example.test"),  # ^A ^K: clear the default
            ("API key", key),
            ("Agent", "analyst"),
            ("Environment", "analysis"),
            ("Idle timeout", "300"),
            ("Maximum lifetime", "900"),
            ("Configure advanced settings", ""),  # default: no
        ]
        for prompt, answer in answers:
            wizard.expect_exact(prompt)
            wizard.send(answer + "\r")
        wizard.expect_exact("uploaded to the Sandbox Agents server at sa.example.test")
        wizard.expect_exact("Save these plugin settings?")
        wizard.send("\x1b[A\r")  # up to "Yes"
        wizard.expect_exact("Saved sandbox-agents settings")
        wizard.expect(pexpect.EOF)
    finally:
        wizard.close()
    assert wizard.exitstatus == 0, screen.getvalue()
    assert key not in screen.getvalue(), "the key was echoed"
    saved = json.loads((home.config_dir / "plugin_config.json").read_text())
    assert saved["plugins"]["sandbox-agents"]["settings"] == {
        "server_url": "https://sa.example.test", "agent": "analyst", "environment": "analysis",
        "idle_seconds": 300.0, "max_lifetime_seconds": 900,
    }
    stored = subprocess.run(
        [sys.executable, "-c", "import keyring; print(keyring.get_password('sqlsaber-plugins', 'sandbox-agents.api_key'))"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert stored.stdout.strip() == key, stored.stderr


def test_plugins_setup_alone_makes_saber_analyse_in_a_session_of_the_configured_agent(
    home, server, fake_model, analyst, analysis_environment, api_key
):
    env = home.env(fake_model)
    setup = home.saber(
        env, "plugins", "setup", "sandbox-agents",
        "--set", f"server_url={server.base_url}",
        "--set", f"agent={analyst.slug}",
        "--set", "environment=analysis",
        "--set", "idle_seconds=300",
        "--set", "max_lifetime_seconds=900",
        "--secret-stdin", "api_key",
        stdin=api_key,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    # sqlsaber-sandbox's own plugin offers the same tools: the two are alternatives.
    disable = home.saber(env, "plugins", "disable", "sandbox")
    assert disable.returncode == 0, disable.stdout + disable.stderr

    # The key went to the credential store, not to the settings file.
    saved = (home.config_dir / "plugin_config.json").read_text()
    assert api_key not in saved
    assert json.loads(saved)["plugins"]["sandbox-agents"]["settings"] == {
        "server_url": server.base_url, "agent": analyst.slug, "environment": "analysis",
        "idle_seconds": 300.0, "max_lifetime_seconds": 900,
    }
    show = home.saber(env, "plugins", "show", "sandbox-agents")
    assert show.returncode == 0, show.stdout + show.stderr
    (api_key_row,) = [line for line in show.stdout.splitlines() if line.startswith("| api\\_key")]
    assert "credential store" in api_key_row and api_key not in show.stdout

    analysis = ask_saber(home, env, server, api_key, analyst, fake_model)
    session = analysis.session
    assert session["agent_id"] == analyst.id
    assert session["environment_id"] == analysis_environment.id
    assert (session["idle_ttl_seconds"], session["max_lifetime_seconds"]) == (300, 900)
    assert session["title"] == "sqlsaber"
    assert_gone(server, api_key, session["id"])


def test_environment_variables_alone_configure_a_headless_saber(
    home, server, fake_model, analyst, analysis_environment, api_key
):
    """No setup, no saved settings, no keyring entry: the client's variables and the plugin's
    own configure it (CI, containers). sqlsaber-sandbox's unconfigured `sandbox` plugin is
    skipped with a warning and does not get in the way."""
    env = home.env(
        fake_model,
        SANDBOX_AGENTS_BASE_URL=server.base_url,
        SANDBOX_AGENTS_API_KEY=api_key,
        SQLSABER_SANDBOX_AGENTS_AGENT=analyst.slug,
        SQLSABER_SANDBOX_AGENTS_ENVIRONMENT=analysis_environment.id,
        SQLSABER_SANDBOX_AGENTS_IDLE_SECONDS="420",
        SQLSABER_SANDBOX_AGENTS_MAX_LIFETIME_SECONDS="1200",
    )
    show = home.saber(env, "plugins", "show", "sandbox-agents")
    assert show.returncode == 0, show.stdout + show.stderr
    assert "environment (SANDBOX\\_AGENTS\\_API\\_KEY)" in show.stdout, show.stdout

    analysis = ask_saber(home, env, server, api_key, analyst, fake_model)
    session = analysis.session
    assert session["agent_id"] == analyst.id
    assert session["environment_id"] == analysis_environment.id
    assert (session["idle_ttl_seconds"], session["max_lifetime_seconds"]) == (420, 1200)
    assert not (home.config_dir / "plugin_config.json").exists()
    assert_gone(server, api_key, session["id"])


def test_sqlsaber_sandboxs_own_e2b_provider_analyses_on_us_by_configuration_alone(
    home, server, fake_model, analysis_environment, api_key
):
    """sqlsaber-sandbox's built-in `sandbox` plugin with its `e2b` provider, configured with
    `saber plugins setup sandbox` as a user of E2B would, and pointed at our E2B-compatible API
    by the E2B SDK's own variables: its analysis runs in a session of ours (the project's
    `e2b-code-interpreter` agent, template `code-interpreter-v1`), killed when saber exits."""
    env = home.env(
        fake_model,
        E2B_API_URL=f"{server.base_url}/e2b",
        E2B_SANDBOX_URL=f"{server.base_url}/e2b-sandbox",
    )
    setup = home.saber(
        env, "plugins", "setup", "sandbox",
        "--set", "provider=e2b",
        "--set", "e2b_template=code-interpreter-v1",
        "--secret-stdin", "e2b_api_key",
        "--yes",
        stdin=api_key,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    disable = home.saber(env, "plugins", "disable", "sandbox-agents")
    assert disable.returncode == 0, disable.stdout + disable.stderr

    e2b_agent = type("Agent", (), {"slug": "e2b-code-interpreter"})()
    analysis = ask_saber(home, env, server, api_key, e2b_agent, fake_model)
    session = analysis.session
    assert session["title"] == "E2B sandbox (code-interpreter-v1)", session
    # saber closed the sandbox: E2B's kill, which stops the session and removes its container.
    r = httpx.get(
        f"{server.base_url}/api/sessions/{session['id']}",
        headers={"Authorization": f"Bearer {api_key}"}, timeout=30,
    )
    assert r.status_code == 200 and r.json()["status"] == "stopped", r.text
    sandboxes.wait_no_containers([session["id"]], GONE_DEADLINE, f"saber's E2B sandbox {session['id']}")


def test_saber_without_the_key_reports_the_refusal_and_leaves_nothing(
    home, server, fake_model, analyst, analysis_environment, api_key
):
    """The server is closed and saber is configured without a key: the analysis tool reports
    the 401 to the model, no session is created."""
    env = home.env(
        fake_model,
        SANDBOX_AGENTS_BASE_URL=server.base_url,
        SQLSABER_SANDBOX_AGENTS_AGENT=analyst.slug,
    )
    tag = uuid.uuid4().hex[:10]
    rules, _, _ = script(f"GOAL-{tag}", "print('never')", f"MARK-{tag}")
    refused = f"REFUSED-{tag}"
    fake_model.set_script([fakemodel.text(refused, has_tool=ANALYZE, last_tool_result_contains="401"), *rules[2:3], rules[-1]])
    done = home.saber(env, "-d", str(home.database), f"QUESTION-{tag}: analyse", timeout=SABER_DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert refused in done.stdout, done.stdout + done.stderr
    r = httpx.get(
        f"{server.base_url}/api/sessions", params={"agent_id": analyst.slug},
        headers={"Authorization": f"Bearer {api_key}"}, timeout=30,
    )
    assert r.json() == [], r.json()
