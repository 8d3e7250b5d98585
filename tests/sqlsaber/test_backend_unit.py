"""The backend against a scripted server (`mockserver`): what it sends, and how it reads the
server's answers into sqlsaber-sandbox's errors. No server, no Docker."""
from __future__ import annotations

import base64
import json
import shlex

import httpx
import pytest
from sqlsaber_sandbox import SandboxConfig
from sqlsaber_sandbox.backends.base import CommandResult, SandboxError, SessionLost
from sqlsaber_sandbox.config import DEFAULT_SANDBOX_IMAGE

from mockserver import SESSION_ID, MockServer, ok, refused, session_json
from sandbox_agents_sqlsaber import SandboxAgentsBackend
from sandbox_agents_sqlsaber._commands import controller_operation, may_repeat

pytestmark = pytest.mark.anyio

SESSION = f"/api/sessions/{SESSION_ID}"
EXEC = f"{SESSION}/exec"
FILES = f"{SESSION}/sandbox-files"
PROCESSES = f"{SESSION}/processes"


def bridge(operation: str, **arguments) -> str:
    """A command as sqlsaber-sandbox's KernelExecution.request writes it."""
    encoded = base64.b64encode(json.dumps({"operation": operation, **arguments}).encode()).decode()
    root = "/tmp/ss-0123456789abcdef"
    return f"/usr/bin/python {root}/controller.py call {root} {shlex.quote(encoded)}"


@pytest.fixture
def server():
    return MockServer()


@pytest.fixture
async def opened(server):
    """A backend whose session is open, over the scripted server."""
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst", environment="analysis", retry_backoff_seconds=0)
        await backend.open(SandboxConfig())
        server.requests.clear()
        yield backend


# -- open ---------------------------------------------------------------------------------


async def test_open_creates_a_session_of_the_agent_in_the_environment_and_waits_for_it(server):
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst", environment="analysis")
        await backend.open(SandboxConfig())
    body = server.body("POST", "/api/sessions")
    assert body["agent_id"] == "analyst"
    assert body["title"] == "sqlsaber-sandbox"
    assert body["environment_id"] == "analysis"
    assert set(body) == {"agent_id", "title", "environment_id", "metadata"}, "unset settings are not sent"
    assert backend.session_id == SESSION_ID
    assert server.sent("GET", SESSION), "it waits until the session runs"


async def test_the_config_s_lifetimes_and_resources_become_session_settings(server):
    config = SandboxConfig(idle_seconds=90.5, max_lifetime_seconds=3600, cpu_cores=1.5, memory_mb=2048)
    async with server.client() as client:
        await SandboxAgentsBackend(client, "analyst").open(config)
    body = server.body("POST", "/api/sessions")
    assert body["idle_ttl_seconds"] == 91
    assert body["max_lifetime_seconds"] == 3600
    assert body["resources"] == {"cpus": 1.5, "memory_mb": 2048}
    assert body["environment_id"] is None


async def test_only_the_resources_that_are_set_are_sent(server):
    async with server.client() as client:
        await SandboxAgentsBackend(client, "analyst").open(SandboxConfig(memory_mb=512))
    body = server.body("POST", "/api/sessions")
    assert body["resources"] == {"memory_mb": 512}
    assert "idle_ttl_seconds" not in body and "max_lifetime_seconds" not in body


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (SandboxConfig(gpu="1"), "no GPUs"),
        (SandboxConfig(image="python:3.12"), "environment="),
        (SandboxConfig(provider="docker"), "provider"),
    ],
)
async def test_a_config_the_server_cannot_honour_is_a_value_error_before_anything_is_created(server, config, words):
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst")
        with pytest.raises(ValueError, match=words):
            await backend.open(config)
    assert server.requests == []
    assert backend.session_id is None


async def test_a_server_that_ignores_a_setting_is_a_value_error_and_close_deletes_its_session(server):
    # A server without the additions answers the create without them (it ignores unknown fields).
    server.route("POST", "/api/sessions", ok(session_json("provisioning"), 202))
    server.route("DELETE", SESSION, httpx.Response(204))
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst")
        with pytest.raises(ValueError, match="max_lifetime_seconds") as raised:
            await backend.open(SandboxConfig(max_lifetime_seconds=60))
        assert "SandboxConfig.max_lifetime_seconds" in str(raised.value)
        await backend.close()
    assert len(server.sent("DELETE", SESSION)) == 1


async def test_a_server_without_the_settings_serves_a_config_that_sets_none(server):
    server.route("POST", "/api/sessions", ok(session_json("provisioning"), 202))
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst")
        await backend.open(SandboxConfig())
    assert backend.session_id == SESSION_ID


async def test_the_default_image_and_the_provider_name_are_accepted(server):
    async with server.client() as client:
        config = SandboxConfig(image=DEFAULT_SANDBOX_IMAGE, provider="sandbox-agents")
        await SandboxAgentsBackend(client, "analyst").open(config)
    assert "image" not in server.body("POST", "/api/sessions")


async def test_a_422_naming_a_session_setting_is_a_value_error_with_the_server_s_words(server):
    detail = "resources.cpus: at most 4 CPUs a sandbox"
    server.route("POST", "/api/sessions", refused(422, detail))
    async with server.client() as client:
        with pytest.raises(ValueError, match="at most 4 CPUs") as raised:
            await SandboxAgentsBackend(client, "analyst").open(SandboxConfig(cpu_cores=64))
    assert "SandboxConfig.cpu_cores" in str(raised.value)


async def test_an_unknown_agent_is_a_sandbox_error_with_the_server_s_words(server):
    server.route("POST", "/api/sessions", refused(404, "agent 'nobody' not found"))
    async with server.client() as client:
        with pytest.raises(SandboxError, match="agent 'nobody' not found"):
            await SandboxAgentsBackend(client, "nobody").open(SandboxConfig())


async def test_a_second_open_is_refused(opened):
    with pytest.raises(SandboxError, match="already opened"):
        await opened.open(SandboxConfig())


async def test_a_failed_boot_is_a_sandbox_error_and_close_still_deletes_the_session(server):
    server.route("GET", SESSION, ok(session_json("error", error="environment build failed: pip said no")))
    server.route("DELETE", SESSION, httpx.Response(204))
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst")
        with pytest.raises(SandboxError, match="pip said no"):
            await backend.open(SandboxConfig())
        await backend.close()
    assert len(server.sent("DELETE", SESSION)) == 1
    assert backend.session_id is None


async def test_a_create_whose_answer_was_lost_is_found_by_its_token_and_owned(server):
    def listing(request: httpx.Request) -> httpx.Response:
        token = server.body("POST", "/api/sessions")["metadata"]["sqlsaber_sandbox_backend"]
        mine = session_json(metadata={"sqlsaber_sandbox_backend": token})
        return ok([session_json(id="someone-else", metadata={}), mine])

    server.route("POST", "/api/sessions", httpx.ReadError("connection reset"))
    server.route("GET", "/api/sessions", listing)
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst")
        await backend.open(SandboxConfig())
    assert backend.session_id == SESSION_ID
    assert len(server.sent("POST", "/api/sessions")) == 1, "a create is never sent twice"


# -- execute ------------------------------------------------------------------------------


async def test_a_command_s_output_and_exit_code_come_back_as_a_command_result(server, opened):
    server.route("POST", EXEC, ok({"exit_code": 3, "stdout": "out", "stderr": "err"}))
    assert await opened.execute("exit 3", timeout=30) == CommandResult("out", "err", 3)
    assert server.body("POST", EXEC) == {"command": "exit 3", "timeout": 30.0}


@pytest.mark.parametrize(("given", "sent"), [(0, 0.001), (-5, 0.001), (12.5, 12.5), (3600, 600.0)])
async def test_the_timeout_is_kept_within_what_the_server_accepts(server, opened, given, sent):
    server.route("POST", EXEC, ok({"exit_code": 0}))
    await opened.execute("true", timeout=given)
    assert server.body("POST", EXEC)["timeout"] == sent


async def test_exit_124_is_a_timeout_error(server, opened):
    server.route("POST", EXEC, ok({"exit_code": 124, "stderr": "\n[timed out after 2 s: the command was killed]\n"}))
    with pytest.raises(TimeoutError, match="keep running"):
        await opened.execute("sleep 10", timeout=2)


@pytest.mark.parametrize(
    ("status", "detail"),
    [
        (404, f"session '{SESSION_ID}' not found"),
        (409, "session is not running (it is stopped, requested); start it first"),
        (409, "the sandbox's daemon was lost mid-command; its outcome is unknown"),
    ],
)
async def test_a_gone_or_stopped_session_is_session_lost(server, opened, status, detail):
    server.route("POST", EXEC, refused(status, detail))
    with pytest.raises(SessionLost, match="Python state is lost"):
        await opened.execute(bridge("status", execution_id="ab"), timeout=30)


async def test_another_refusal_is_a_sandbox_error_not_session_lost(server, opened):
    server.route("POST", EXEC, refused(500, "internal error"))
    with pytest.raises(SandboxError) as raised:
        await opened.execute("true", timeout=30)
    assert not isinstance(raised.value, SessionLost)
    assert len(server.sent("POST", EXEC)) == 1, "an answer is never retried"


async def test_a_repeatable_command_is_sent_again_after_transport_failures(server, opened):
    server.route(
        "POST", EXEC,
        httpx.ConnectError("refused"), httpx.ReadError("reset"), ok({"exit_code": 0, "stdout": '{"epoch": "e"}'}),
    )
    result = await opened.execute(bridge("status", execution_id="ab"), timeout=30)
    assert result.stdout == '{"epoch": "e"}'
    assert len(server.sent("POST", EXEC)) == 3


async def test_retries_are_bounded_and_end_in_a_sandbox_error(server, opened):
    server.route("POST", EXEC, httpx.ConnectError("refused"))
    with pytest.raises(SandboxError, match="could not be reached"):
        await opened.execute("mkdir -p /tmp/x", timeout=30)
    assert len(server.sent("POST", EXEC)) == 4, "one try and three retries"


async def test_an_export_is_never_sent_twice(server, opened):
    server.route("POST", EXEC, httpx.ReadError("reset"), ok({"exit_code": 0}))
    with pytest.raises(SandboxError):
        await opened.execute(bridge("export"), timeout=30)
    assert len(server.sent("POST", EXEC)) == 1


async def test_a_command_before_open_is_session_lost(server):
    async with server.client() as client:
        backend = SandboxAgentsBackend(client, "analyst")
        with pytest.raises(SessionLost):
            await backend.execute("true", timeout=1)


def test_the_operation_of_a_bridge_command_is_read_from_its_request():
    assert controller_operation(bridge("export")) == "export"
    assert controller_operation(bridge("execute", execution_id="ab", code="print(1)")) == "execute"
    assert controller_operation("mkdir -p /tmp/ss-1/inputs; chmod 700 /tmp/ss-1") is None
    assert controller_operation("python /tmp/ss-1/controller.py call /tmp/ss-1 not-base64!") == "?"
    assert may_repeat(bridge("status", execution_id="ab"))
    assert may_repeat("mkdir -p /tmp/x")
    assert not may_repeat(bridge("export"))
    assert not may_repeat("python /tmp/ss-1/controller.py call /tmp/ss-1 not-base64!")


# -- files --------------------------------------------------------------------------------


async def test_an_upload_sends_the_raw_bytes_to_the_absolute_path(server, opened):
    server.route("PUT", FILES, ok({"path": "/tmp/ss-1/inputs/a.bin", "size": 256}))
    data = bytes(range(256))
    await opened.upload(data, "/tmp/ss-1/inputs/a.bin")
    (request,) = server.sent("PUT", FILES)
    assert request.content == data
    assert request.url.params["path"] == "/tmp/ss-1/inputs/a.bin"
    assert request.headers["content-type"] == "application/octet-stream"


async def test_a_download_returns_the_file_s_bytes(server, opened):
    data = b"\x00\xff" * 1000
    server.route("GET", FILES, httpx.Response(200, content=data, headers={"content-type": "application/octet-stream"}))
    assert await opened.download("/tmp/ss-1/results/x.json") == data
    assert server.sent("GET", FILES)[0].url.params["path"] == "/tmp/ss-1/results/x.json"


async def test_a_missing_file_in_a_running_session_is_a_sandbox_error(server, opened):
    server.route("GET", FILES, refused(404, "no such file or directory: /tmp/ss-1/nope"))
    with pytest.raises(SandboxError, match="no such file") as raised:
        await opened.download("/tmp/ss-1/nope")
    assert not isinstance(raised.value, SessionLost)


async def test_a_file_request_to_a_deleted_session_is_session_lost(server, opened):
    server.route("PUT", FILES, refused(404, f"session '{SESSION_ID}' not found"))
    server.route("GET", SESSION, refused(404, f"session '{SESSION_ID}' not found"))
    with pytest.raises(SessionLost, match="is gone"):
        await opened.upload(b"x", "/tmp/ss-1/inputs/manifest.json")


async def test_a_file_request_to_a_stopped_session_is_session_lost(server, opened):
    server.route("GET", FILES, refused(409, "session is not running (it is stopped, requested); start it first"))
    server.route("GET", SESSION, ok(session_json("stopped", stopped_reason="requested")))
    with pytest.raises(SessionLost, match=r"stopped \(requested\)"):
        await opened.download("/tmp/ss-1/results/x.json")


async def test_a_transfer_is_sent_again_after_a_transport_failure(server, opened):
    server.route("PUT", FILES, httpx.WriteError("broken pipe"), ok({}))
    await opened.upload(b"abc", "/tmp/ss-1/config.json")
    assert [r.content for r in server.sent("PUT", FILES)] == [b"abc", b"abc"]


# -- the controller -----------------------------------------------------------------------


def process_json(status: str = "running", **extra) -> dict:
    return {"id": "proc_1", "pid": 42, "command": "python", "cwd": "/workspace", "status": status,
            "started_at": "2025-01-01T00:00:00Z", **extra}


async def test_the_controller_runs_as_a_background_process_of_the_session(server, opened):
    server.route("POST", PROCESSES, ok(process_json(), 201))
    server.route("GET", f"{PROCESSES}/proc_1", ok(process_json(stdout="", stderr="")))
    argv = ["/usr/bin/python", "/tmp/ss-1/controller.py", "serve", "/tmp/ss-1", "/tmp/ss 1/config.json"]
    await opened.start_controller(argv)
    assert shlex.split(server.body("POST", PROCESSES)["command"]) == argv
    assert opened.controller_id == "proc_1"
    with pytest.raises(SandboxError, match="already started"):
        await opened.start_controller(argv)


async def test_an_empty_argv_is_a_value_error(opened):
    with pytest.raises(ValueError, match="empty"):
        await opened.start_controller([])


async def test_a_controller_that_exits_at_once_is_a_sandbox_error_quoting_its_stderr(server, opened):
    server.route("POST", PROCESSES, ok(process_json(), 201))
    stderr = "x" * 5000 + "ModuleNotFoundError: No module named 'jupyter_client'"
    server.route("GET", f"{PROCESSES}/proc_1", ok(process_json("exited", exit_code=1, stderr=stderr)))
    with pytest.raises(SandboxError, match="No module named 'jupyter_client'") as raised:
        await opened.start_controller(["python", "controller.py"])
    assert "exit code 1" in str(raised.value)
    assert len(str(raised.value)) < 2500, "only the tail of stderr is quoted"


# -- close --------------------------------------------------------------------------------


async def test_close_kills_the_controller_then_deletes_the_session_once(server, opened):
    server.route("POST", PROCESSES, ok(process_json(), 201))
    server.route("GET", f"{PROCESSES}/proc_1", ok(process_json()))
    server.route("DELETE", f"{PROCESSES}/proc_1", ok(process_json("exited")))
    server.route("DELETE", SESSION, httpx.Response(204))
    await opened.start_controller(["python", "controller.py"])
    await opened.close()
    await opened.close()
    deletes = [r.url.path for r in server.requests if r.method == "DELETE"]
    assert deletes == [f"{PROCESSES}/proc_1", SESSION]
    assert opened.session_id is None
    with pytest.raises(SessionLost, match="not open"):
        await opened.execute("true", timeout=1)


async def test_close_of_a_session_already_gone_succeeds(server, opened):
    server.route("DELETE", SESSION, refused(404, f"session '{SESSION_ID}' not found"))
    await opened.close()
    assert opened.session_id is None


async def test_a_failed_delete_is_a_sandbox_error_and_the_next_close_retries(server, opened):
    server.route("DELETE", SESSION, refused(500, "docker is unreachable"), httpx.Response(204))
    with pytest.raises(SandboxError, match="call close\\(\\) again"):
        await opened.close()
    assert opened.session_id == SESSION_ID
    await opened.close()
    assert len(server.sent("DELETE", SESSION)) == 2
    assert opened.session_id is None


async def test_close_ignores_a_controller_that_cannot_be_killed_because_the_sandbox_stopped(server, opened):
    server.route("POST", PROCESSES, ok(process_json(), 201))
    server.route("GET", f"{PROCESSES}/proc_1", ok(process_json()))
    server.route("DELETE", f"{PROCESSES}/proc_1", refused(409, "session is not running (it is stopped, requested)"))
    server.route("DELETE", SESSION, httpx.Response(204))
    await opened.start_controller(["python", "controller.py"])
    await opened.close()
    assert opened.session_id is None


async def test_close_before_open_does_nothing(server):
    async with server.client() as client:
        await SandboxAgentsBackend(client, "analyst").close()
    assert server.requests == []
