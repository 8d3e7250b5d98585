"""Drives our E2B-compatible API with the real E2B Python SDK (whichever version runs this),
exactly as a user does: `E2B_API_URL` and `E2B_API_KEY` in the environment, nothing else.
Prints what it saw as one JSON object; crates/server/tests/api/e2b.rs asserts on it.

    E2B_API_URL=http://127.0.0.1:PORT/e2b E2B_API_KEY=ak_... OTHER_KEY=ak_... python drive.py control

Scenario `control`: the control plane (create, get_info, set_timeout, list with metadata
filters and paging, pause, connect, kill, a wrong key, another project's key).
Scenario `sandbox` (needs `E2B_SANDBOX_URL` too): commands (foreground, background with
streamed output, a failing one, a timeout, a signal) and files (write, read, list, remove, a
large file byte for byte), and files kept across a pause.
Scenario `interpreter` (needs `E2B_SANDBOX_URL` and e2b-code-interpreter): `run_code` keeping
state, streaming stdout, an error, a PNG, per-run environment variables, and code contexts
(create, run, list, restart, remove).
Scenario `hosts` (E2B_SANDBOX_URL unset: the sandbox's `domain` from create names its hosts):
the SDK's sandbox hosts and signed file URLs, which the Rust test fetches itself (the SDK
speaks https to hosts, which the test server does not).
"""

import base64
import importlib.metadata
import json
import os
import sys
import threading
import time
import uuid

import e2b
import httpx
from e2b import Sandbox, SandboxQuery

seen = {"sdk": importlib.metadata.version("e2b")}


def failure(f):
    """The exception `f` raises, by class name and message; None when it raises nothing."""
    try:
        f()
    except Exception as e:  # noqa: BLE001 - any SDK exception is an observation
        return {"type": type(e).__name__, "message": str(e)}
    return None


def pages(query, limit):
    paginator = Sandbox.list(query=query, limit=limit)
    out = []
    while paginator.has_next:
        out.append(sorted(s.sandbox_id for s in paginator.next_items()))
    return out


def control(other_key):
    run = uuid.uuid4().hex
    sbx = Sandbox.create(timeout=120, metadata={"run": run, "purpose": "first one"}, envs={"GREETING": "hi"})
    info = sbx.get_info()
    seen["created"] = {
        "id": sbx.sandbox_id,
        "template": info.template_id,
        "state": str(info.state.value if hasattr(info.state, "value") else info.state),
        "metadata": info.metadata,
        "lifetime": round((info.end_at - info.started_at).total_seconds()),
    }
    sbx.set_timeout(600)
    info = sbx.get_info()
    seen["after_timeout"] = round((info.end_at - info.started_at).total_seconds())

    others = [Sandbox.create(metadata={"run": run, "purpose": "more"}) for _ in range(2)]
    seen["pages"] = pages(SandboxQuery(metadata={"run": run}), 2)
    seen["all_ids"] = sorted([sbx.sandbox_id] + [o.sandbox_id for o in others])
    seen["by_purpose"] = pages(SandboxQuery(metadata={"run": run, "purpose": "first one"}), 10)

    seen["pause"] = sbx.pause()
    seen["state_paused"] = str(sbx.get_info().state.value)
    seen["paused_list"] = pages(SandboxQuery(metadata={"run": run}, state=[e2b.SandboxState.PAUSED]), 10)
    seen["pause_again"] = sbx.pause()
    again = Sandbox.connect(sbx.sandbox_id)
    seen["state_resumed"] = str(again.get_info().state.value)

    seen["other_project_get"] = failure(lambda: Sandbox.get_info(sbx.sandbox_id, api_key=other_key))
    seen["other_project_list"] = [s.sandbox_id for s in Sandbox.list(api_key=other_key).next_items()]
    seen["other_project_kill"] = Sandbox.kill(sbx.sandbox_id, api_key=other_key)
    seen["wrong_key"] = failure(lambda: Sandbox.create(api_key="ak_not_a_key_of_this_server"))

    seen["kill"] = sbx.kill()
    seen["kill_again"] = Sandbox.kill(sbx.sandbox_id)
    seen["get_killed"] = failure(lambda: Sandbox.get_info(sbx.sandbox_id))
    for o in others:
        o.kill()
    seen["after_kill"] = pages(SandboxQuery(metadata={"run": run}), 10)


def sandbox():
    sbx = Sandbox.create(timeout=300, envs={"GREETING": "hello"})
    r = sbx.commands.run('echo "$GREETING from $(pwd)"; echo oops >&2')
    seen["run"] = {"stdout": r.stdout, "stderr": r.stderr, "exit_code": r.exit_code}
    seen["failed"] = failure(lambda: sbx.commands.run("echo partial; exit 3"))
    lines = []
    handle = sbx.commands.run("for i in 1 2 3; do echo line$i; sleep 0.2; done", background=True)
    seen["background"] = {"exit_code": handle.wait(on_stdout=lines.append).exit_code, "lines": lines}
    seen["timeout"] = failure(lambda: sbx.commands.run("sleep 30", timeout=1))
    sleeper = sbx.commands.run("sleep 60", background=True)
    seen["listed"] = sleeper.pid in [p.pid for p in sbx.commands.list()]
    seen["kill"] = sbx.commands.kill(sleeper.pid)
    seen["killed"] = failure(lambda: sleeper.wait())
    seen["kill_gone"] = sbx.commands.kill(sleeper.pid)

    sbx.files.write("/home/user/notes/a.txt", "hello file")
    seen["read"] = sbx.files.read("/home/user/notes/a.txt")
    big = os.urandom(3 * 1024 * 1024 + 7)
    sbx.files.write("big.bin", big)
    seen["big_equal"] = sbx.files.read("big.bin", format="bytes") == big
    seen["list"] = sorted(e.name for e in sbx.files.list("/home/user/notes"))
    seen["exists"] = [sbx.files.exists("/home/user/notes/a.txt"), sbx.files.exists("/home/user/nope")]
    sbx.files.remove("/home/user/notes/a.txt")
    seen["after_remove"] = sbx.files.exists("/home/user/notes/a.txt")
    seen["read_missing"] = failure(lambda: sbx.files.read("/home/user/nope"))
    many = sbx.files.write_files(
        [{"path": "/home/user/many/1.txt", "data": "one"}, {"path": "/home/user/many/2.bin", "data": b"two"}]
    )
    seen["write_files"] = {
        "paths": [w.path for w in many],
        "read": [sbx.files.read("/home/user/many/1.txt"), sbx.files.read("/home/user/many/2.bin")],
    }
    sbx.files.write("zipped.txt", "compressed on the way " * 100, gzip=True)
    seen["gzip"] = sbx.files.read("zipped.txt", gzip=True) == "compressed on the way " * 100

    # The data plane opens a sandbox only with its own token.
    other = Sandbox.create()
    stat = os.environ["E2B_SANDBOX_URL"] + "/filesystem.Filesystem/Stat"

    def envd(sandbox_id, token):
        headers = {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": "49983", "Connect-Protocol-Version": "1"}
        if token is not None:
            headers["X-Access-Token"] = token
        r = httpx.post(stat, headers=headers, json={"path": "/workspace"})
        return [r.status_code, r.json().get("code")]

    seen["own_token"] = envd(sbx.sandbox_id, sbx._envd_access_token)
    seen["other_token"] = envd(sbx.sandbox_id, other._envd_access_token)
    seen["no_token"] = envd(sbx.sandbox_id, None)
    seen["garbled_id"] = envd("not-a-sandbox", sbx._envd_access_token)
    other.kill()

    # A disconnected command goes on running; connecting again streams what comes next.
    ticking = sbx.commands.run("for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.3; done", background=True)
    ticking.disconnect()
    ticks = []
    again = sbx.commands.connect(ticking.pid)
    seen["connect"] = {"exit_code": again.wait(on_stdout=ticks.append).exit_code, "last": ticks[-1:]}
    seen["connect_gone"] = failure(lambda: sbx.commands.connect(ticking.pid))
    seen["pty"] = pty(sbx)

    sbx.files.write("kept.txt", "kept across a pause")
    sbx.pause()
    resumed = Sandbox.connect(sbx.sandbox_id)
    seen["kept"] = resumed.files.read("kept.txt")
    seen["id"] = sbx.sandbox_id
    resumed.kill()
    seen["after_kill"] = failure(lambda: resumed.commands.run("true"))
    seen["after_kill_raw"] = envd(sbx.sandbox_id, sbx._envd_access_token)


def pty(sbx):
    """A terminal: a login shell on a pseudo-terminal, typed into, resized, exited."""
    from e2b import PtySize

    out = bytearray()
    seen_marker = threading.Event()
    sized = threading.Event()

    def on_pty(data):
        out.extend(data)
        if b"pty-42" in out:
            seen_marker.set()
        if b"30 100" in out:
            sized.set()

    term = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
    waited = {}
    reader = threading.Thread(target=lambda: waited.update(result=term.wait(on_pty=on_pty)))
    reader.start()
    sbx.pty.send_stdin(term.pid, b"echo pty-$((6*7))\n")
    echoed = seen_marker.wait(30)
    sbx.pty.resize(term.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(term.pid, b"stty size\n")
    resized = sized.wait(30)
    sbx.pty.send_stdin(term.pid, b"exit\n")
    reader.join(30)
    result = waited.get("result")
    return {"echoed": echoed, "resized": resized, "exit_code": result.exit_code if result else None}


def interpreter():
    from e2b_code_interpreter import Sandbox as CodeSandbox

    seen["interpreter_sdk"] = importlib.metadata.version("e2b-code-interpreter")
    sbx = CodeSandbox.create(timeout=300)
    seen["template"] = sbx.get_info().template_id
    first = sbx.run_code("x = 41\nprint('set')")
    second = sbx.run_code("x + 1")
    seen["state"] = {"stdout": first.logs.stdout, "text": second.text, "count": second.execution_count}
    streamed = []
    sbx.run_code(
        "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)",
        on_stdout=lambda m: streamed.append(m.line),
    )
    seen["streamed"] = "".join(streamed)
    err = sbx.run_code("undefined_name")
    seen["error"] = {"name": err.error.name, "value": err.error.value, "traceback": bool(err.error.traceback)}
    plot = sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
    pngs = [base64.b64decode(r.png) for r in plot.results if r.png]
    seen["png"] = [p[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs]
    seen["env"] = sbx.run_code("import os\nos.environ.get('ONLY_HERE')", envs={"ONLY_HERE": "yes"}).text
    seen["env_after"] = sbx.run_code("repr(os.environ.get('ONLY_HERE'))").text
    seen["js"] = failure(lambda: sbx.run_code("1", language="js"))

    sbx.files.make_dir("/home/user/sub")
    ctx = sbx.create_code_context(cwd="/home/user/sub")
    seen["context"] = {"cwd": ctx.cwd, "language": ctx.language}
    seen["context_isolated"] = sbx.run_code("'x' in globals()", context=ctx).text
    seen["context_cwd"] = sbx.run_code("import os\nos.getcwd()", context=ctx).text
    seen["contexts"] = sorted(c.id for c in sbx.list_code_contexts())
    seen["context_id"] = ctx.id
    sbx.run_code("y = 1", context=ctx)
    sbx.restart_code_context(ctx)
    seen["after_restart"] = sbx.run_code("'y' in globals()", context=ctx).text
    sbx.remove_code_context(ctx)
    seen["contexts_after_remove"] = [c.id for c in sbx.list_code_contexts()]
    seen["removed_run"] = sbx.run_code("1", context=ctx).error.value
    seen["default_state"] = sbx.run_code("x").text

    # /contexts opens only with the sandbox's own traffic token.
    contexts = os.environ["E2B_SANDBOX_URL"] + "/contexts"
    headers = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49999"}
    seen["contexts_no_token"] = httpx.get(contexts, headers=headers).status_code
    seen["contexts_wrong_token"] = httpx.get(
        contexts, headers={**headers, "E2B-Traffic-Access-Token": "0" * 64}
    ).status_code
    seen["id"] = sbx.sandbox_id
    sbx.kill()


def hosts():
    sbx = Sandbox.create(timeout=300)
    seen["id"] = sbx.sandbox_id
    seen["token"] = sbx._envd_access_token
    seen["envd_host"] = sbx.get_host(49983)
    seen["download_url"] = sbx.download_url("/home/user/signed.txt")
    seen["upload_url"] = sbx.upload_url("/home/user/uploaded.txt")
    seen["expiring_url"] = sbx.download_url("/home/user/signed.txt", use_signature_expiration=120)


def main():
    scenario, other_key = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    started = time.monotonic()
    {"control": lambda: control(other_key), "sandbox": sandbox, "interpreter": interpreter, "hosts": hosts}[
        scenario
    ]()
    seen["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(seen, default=str))


if __name__ == "__main__":
    main()
