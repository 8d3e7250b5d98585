"""Sessions on real Docker sandboxes, driven through the published client: the lifecycle, its
events, exec, files, snapshots and previews.

Boot and the manifest, exec (`check()`, timeouts), the files API (upload, list, read, delete,
path rules, the `user.file` event), stop/start with the workspace kept and readable while
stopped, snapshots (restore, fork), a failing boot, port previews (HTTP and WebSocket through
the control plane), and delete. Docker itself is asked (labels `io.sandbox-agents.session` /
`.deployment`) whether a container exists, rather than trusting the server's word for it.

Every session a test creates is deleted when it ends (`sandboxes.Janitor`). Sessions that
several tests only read share one module-scoped sandbox (`box`) to keep the run short; each
of those tests works under a directory of its own.
"""
from __future__ import annotations

import base64
import hashlib
import os
import socket
import time
import uuid

import httpx
import pytest
import sandbox_agents
from sandbox_agents import (
    APIStatusError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    RunFailedError,
    SandboxAgentsError,
)

import kube
import sandboxes
from harness import wait_until
from sandboxes import Janitor

BRIEF = "# Brief\n\nRenewals for Q3 — the three accounts at risk.\n"
SESSION_NOTE = "added by the session's own manifest\n"


# -- fixtures --


@pytest.fixture(scope="module")
def mclient(server):
    with sandbox_agents.Client(base_url=server.base_url) as c:
        yield c


@pytest.fixture(scope="module")
def box_agent(mclient):
    return mclient.agents.create(
        slug=f"box-{uuid.uuid4().hex[:12]}",
        name="Sandbox box",
        manifest={
            "entries": {
                "brief.md": {"kind": "file", "content": BRIEF},
                "output": {"kind": "dir"},
            },
            "environment": {"BRIEF_TOPIC": "renewals", "OVERRIDDEN": "by the agent"},
        },
    )


@pytest.fixture(scope="module")
def box(server, mclient, box_agent):
    """One running session shared by the tests that do not stop, restore or delete it."""
    janitor = Janitor(server.base_url)
    janitor.track_agent(box_agent)
    try:
        yield mclient.sessions.create_and_wait(
            box_agent.slug,
            timeout=sandboxes.BOOT_DEADLINE,
            title="box",
            manifest={
                "entries": {"session.md": {"kind": "file", "content": SESSION_NOTE}},
                "environment": {"OVERRIDDEN": "by the session"},
            },
        )
    finally:
        janitor.cleanup()


@pytest.fixture
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


@pytest.fixture
def plain_agent(client, janitor, new_slug):
    """An agent with nothing in its manifest; its sessions are deleted at the end."""
    agent = client.agents.create(slug=new_slug("plain"), name="Plain sandbox")
    janitor.track_agent(agent)
    return agent


def tag() -> str:
    return uuid.uuid4().hex[:10]


def binary_blob() -> bytes:
    """Every byte value, NULs and CRLFs, and incompressible noise: what a text path would mangle."""
    return bytes(range(256)) * 64 + b"\r\n\x00\r\n" + os.urandom(150_000) + b"\xff\xfe\x00end"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def exec_ok(client, sid: str, command: str, timeout: float = 60.0) -> str:
    return client.sessions.exec(sid, command, timeout=timeout).check().stdout


def types_of(client, sid: str) -> list[str]:
    return [e.type for e in client.sessions.history(sid)]


# -- boot, manifest, exec --


def test_create_and_wait_boots_the_manifest(mclient, box, box_agent):
    assert box.status == "running"
    assert box.agent_id == box_agent.id
    assert box.backend == kube.BACKEND
    assert box.container_id
    assert box.workdir == "/workspace"
    assert box.error is None and box.stopped_reason is None

    # Docker has exactly one running container for this session, the one the session names.
    running = sandboxes.session_containers(box.id, running_only=True)
    assert len(running) == 1, sandboxes.describe(sandboxes.session_containers(box.id))
    assert running[0].startswith(box.container_id) or box.container_id in sandboxes.describe(running), (
        box.container_id,
        sandboxes.describe(running),
    )

    # session.created, then session.status_running, both session-wide (run_id null).
    events = list(mclient.sessions.history(box.id))
    kinds = [e.type for e in events]
    assert "session.created" in kinds and "session.status_running" in kinds, kinds
    assert kinds.index("session.created") < kinds.index("session.status_running")
    for e in events:
        if e.type in ("session.created", "session.status_running"):
            assert e.run_id is None, e

    # The agent's file and dir, and the session's own entry (a session's manifest is merged
    # over its agent's, entry by entry).
    assert exec_ok(mclient, box.id, "cat brief.md") == BRIEF
    assert exec_ok(mclient, box.id, "cat session.md") == SESSION_NOTE
    assert exec_ok(mclient, box.id, "test -d output && echo dir") == "dir\n"
    assert exec_ok(mclient, box.id, "pwd") == "/workspace\n"
    # Owned by the sandbox user, so the agent can edit what it was given.
    owners = exec_ok(mclient, box.id, "stat -c '%u %n' brief.md output session.md")
    assert owners.split("\n")[:3] == ["1000 brief.md", "1000 output", "1000 session.md"], owners
    # The manifest's environment, the session's value winning per key.
    env = exec_ok(mclient, box.id, 'printf "%s|%s" "$BRIEF_TOPIC" "$OVERRIDDEN"')
    assert env == "renewals|by the session"

    detail = mclient.sessions.get(box.id)
    assert detail.status == "running"
    assert detail.sandbox_seconds > 0


def test_exec_results_and_check(mclient, box):
    result = mclient.sessions.exec(box.id, "echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert not result.ok
    # A failing command is not an HTTP error (exec answers 200 with the exit code); `.check()`
    # is what raises, with the
    # client's base error type (not an API status error: the server said 200).
    with pytest.raises(SandboxAgentsError) as caught:
        result.check()
    assert type(caught.value) is SandboxAgentsError
    assert "command exited 3" in str(caught.value) and "err" in str(caught.value)

    ok = mclient.sessions.exec(box.id, "printf 'a\\nb'")
    assert ok.check() is ok and ok.exit_code == 0 and ok.stdout == "a\nb"

    # `timeout: null` is the server default (60 s).
    assert mclient.sessions.exec(box.id, "echo default", timeout=None).check().stdout == "default\n"


def test_exec_timeout_gives_124_and_keeps_the_sandbox(mclient, box):
    started = time.monotonic()
    result = mclient.sessions.exec(box.id, "sleep 30", timeout=1)
    elapsed = time.monotonic() - started
    assert result.exit_code == 124, result
    assert result.stderr.strip(), "a timed-out command should say so in stderr"
    assert elapsed < 15, f"a 1 s timeout took {elapsed:.1f}s"
    # Only the command died: the sandbox still runs commands.
    assert exec_ok(mclient, box.id, "echo alive") == "alive\n"
    assert mclient.sessions.get(box.id).status == "running"


def test_exec_timeout_above_the_maximum_is_refused(mclient, box):
    # The longest exec timeout is 600 s.
    with pytest.raises(APIStatusError) as caught:
        mclient.sessions.exec(box.id, "true", timeout=601)
    assert 400 <= caught.value.status_code < 500, caught.value


def test_interrupt_without_a_turn_returns_the_session_unchanged(mclient, box):
    session = mclient.sessions.interrupt(box.id)
    assert session.id == box.id
    assert session.status == "running"
    assert session.activity == "idle"


# -- files --


def test_upload_default_and_explicit_path(mclient, box, tmp_path):
    t = tag()
    data = f"notes {t}\n".encode()
    uploaded = mclient.sessions.upload_file(box.id, data, filename=f"notes-{t}.txt")
    assert uploaded.path == f"uploads/notes-{t}.txt"
    assert uploaded.size == len(data)
    assert exec_ok(mclient, box.id, f"cat uploads/notes-{t}.txt") == data.decode()

    local = tmp_path / f"local-{t}.bin"
    blob = binary_blob()
    local.write_bytes(blob)
    placed = mclient.sessions.upload_file(box.id, local, path=f"up-{t}/deep/er/blob.bin")
    assert placed.path == f"up-{t}/deep/er/blob.bin"
    assert placed.size == len(blob)
    # Parents are created; the bytes arrived intact; the sandbox user can work with the file.
    assert exec_ok(mclient, box.id, f"sha256sum up-{t}/deep/er/blob.bin").split()[0] == sha256(blob)
    assert exec_ok(mclient, box.id, f"test -w up-{t}/deep/er/blob.bin && test -w up-{t}/deep && echo w") == "w\n"

    # Uploading again to the same path replaces the file.
    again = mclient.sessions.upload_file(box.id, b"v2", filename="ignored.txt", path=f"up-{t}/deep/er/blob.bin")
    assert again.size == 2
    assert mclient.sessions.read_file(box.id, f"up-{t}/deep/er/blob.bin") == b"v2"


def test_upload_is_a_user_file_event(mclient, box):
    t = tag()
    uploaded = mclient.sessions.upload_file(box.id, b"0123456789", filename=f"event-{t}.txt")
    events = [e for e in mclient.sessions.history(box.id) if e.type == "user.file"]
    mine = [e for e in events if e.payload.get("path") == uploaded.path]
    assert len(mine) == 1, f"expected one user.file event for {uploaded.path}, got {[e.payload for e in events]}"
    event = mine[0]
    assert event.run_id is None
    assert event.seq > 0
    assert event.payload.get("size") == 10
    assert event.payload.get("filename") == f"event-{t}.txt"


def test_list_files_directories_and_single_files(mclient, box):
    t = tag()
    exec_ok(
        mclient,
        box.id,
        f"mkdir -p list-{t}/sub/inner && printf 12345 > list-{t}/a.txt && printf x > list-{t}/sub/b.txt",
    )

    root = {e.path: e for e in mclient.sessions.list_files(box.id)}
    assert "brief.md" in root and "output" in root and f"list-{t}" in root, sorted(root)
    brief = root["brief.md"]
    assert not brief.is_dir and brief.kind == "file"
    assert brief.size == len(BRIEF.encode())
    assert brief.permissions.startswith("-") and len(brief.permissions) == 10, brief.permissions
    assert root["output"].is_dir and root["output"].kind == "directory"
    assert root["output"].permissions.startswith("d")
    # Not recursive: only the root's own entries.
    assert f"list-{t}/a.txt" not in root

    sub = mclient.sessions.list_files(box.id, f"list-{t}")
    assert sorted(e.path for e in sub) == [f"list-{t}/a.txt", f"list-{t}/sub"]
    by_path = {e.path: e for e in sub}
    assert by_path[f"list-{t}/a.txt"].size == 5 and not by_path[f"list-{t}/a.txt"].is_dir
    assert by_path[f"list-{t}/sub"].is_dir

    # A file's path lists that one file.
    one = mclient.sessions.list_files(box.id, f"list-{t}/sub/b.txt")
    assert len(one) == 1
    assert one[0].path == f"list-{t}/sub/b.txt" and one[0].size == 1 and not one[0].is_dir

    # An empty directory has no entries; "./x" and "x/" name the same directory.
    assert mclient.sessions.list_files(box.id, f"list-{t}/sub/inner") == []
    assert [e.path for e in mclient.sessions.list_files(box.id, f"./list-{t}/sub/")] == [
        f"list-{t}/sub/b.txt",
        f"list-{t}/sub/inner",
    ]


def test_read_is_byte_for_byte(mclient, box, tmp_path):
    t = tag()
    blob = binary_blob()
    mclient.sessions.upload_file(box.id, blob, path=f"read-{t}/blob.bin")
    assert mclient.sessions.read_file(box.id, f"read-{t}/blob.bin") == blob

    target = mclient.sessions.download_file(box.id, f"read-{t}/blob.bin", tmp_path)
    assert target == tmp_path / "blob.bin"
    assert target.read_bytes() == blob

    assert mclient.sessions.read_text(box.id, "brief.md") == BRIEF
    # A file the sandbox wrote itself (not through the API), and an empty one.
    exec_ok(mclient, box.id, f"printf 'made\\r\\nin the box' > read-{t}/made.txt && : > read-{t}/empty")
    assert mclient.sessions.read_file(box.id, f"read-{t}/made.txt") == b"made\r\nin the box"
    assert mclient.sessions.read_file(box.id, f"read-{t}/empty") == b""


def test_read_of_a_directory_is_a_bad_request(mclient, box):
    with pytest.raises(BadRequestError):
        mclient.sessions.read_file(box.id, "output")


def test_delete_files_and_directories(mclient, box):
    t = tag()
    exec_ok(
        mclient,
        box.id,
        f"mkdir -p del-{t}/tree/deep && echo 1 > del-{t}/one.txt && echo 2 > del-{t}/tree/deep/two.txt",
    )

    assert mclient.sessions.delete_file(box.id, f"del-{t}/one.txt") is None
    with pytest.raises(NotFoundError):
        mclient.sessions.list_files(box.id, f"del-{t}/one.txt")
    assert exec_ok(mclient, box.id, f"test -e del-{t}/one.txt || echo gone") == "gone\n"

    # A non-empty directory needs recursive=true; without it nothing is removed.
    with pytest.raises(APIStatusError) as caught:
        mclient.sessions.delete_file(box.id, f"del-{t}/tree")
    assert 400 <= caught.value.status_code < 500, caught.value
    assert exec_ok(mclient, box.id, f"cat del-{t}/tree/deep/two.txt") == "2\n"

    mclient.sessions.delete_file(box.id, f"del-{t}/tree", recursive=True)
    with pytest.raises(NotFoundError):
        mclient.sessions.list_files(box.id, f"del-{t}/tree")
    assert [e.path for e in mclient.sessions.list_files(box.id, f"del-{t}")] == []


@pytest.mark.parametrize(
    "path",
    ["../etc/passwd", "..", "/etc/passwd", "/workspace/brief.md", "output/../../etc/passwd", "a/b/../../../x"],
)
def test_paths_outside_the_workspace_are_refused(mclient, box, path):
    sid = box.id
    with pytest.raises(BadRequestError):
        mclient.sessions.list_files(sid, path)
    with pytest.raises(BadRequestError):
        mclient.sessions.read_file(sid, path)
    with pytest.raises(BadRequestError):
        mclient.sessions.upload_file(sid, b"escaped", path=path)
    with pytest.raises(BadRequestError):
        mclient.sessions.delete_file(sid, path, recursive=True)
    # Nothing was written outside, and nothing was removed.
    assert exec_ok(mclient, sid, "test -e /etc/passwd && test -e /workspace/brief.md && echo intact") == "intact\n"


def test_upload_filename_cannot_escape(mclient, box):
    # The default path is uploads/<filename>: a filename with `..` must not lead outside.
    with pytest.raises(BadRequestError):
        mclient.sessions.upload_file(box.id, b"evil", filename="../../../tmp/evil.txt")
    assert exec_ok(mclient, box.id, "test -e /tmp/evil.txt || echo absent") == "absent\n"


def test_symlinks_cannot_lead_outside_the_workspace(mclient, box):
    t = tag()
    exec_ok(mclient, box.id, f"mkdir -p link-{t} && ln -s /etc link-{t}/etc && ln -s /tmp link-{t}/tmp")
    with pytest.raises(BadRequestError):
        mclient.sessions.read_file(box.id, f"link-{t}/etc/passwd")
    with pytest.raises(BadRequestError):
        mclient.sessions.list_files(box.id, f"link-{t}/etc")
    with pytest.raises(BadRequestError):
        mclient.sessions.upload_file(box.id, b"through a link", path=f"link-{t}/tmp/through-{t}.txt")
    assert exec_ok(mclient, box.id, f"test -e /tmp/through-{t}.txt || echo absent") == "absent\n"


def test_missing_paths_are_not_found(mclient, box):
    t = tag()
    with pytest.raises(NotFoundError):
        mclient.sessions.list_files(box.id, f"missing-{t}")
    with pytest.raises(NotFoundError):
        mclient.sessions.read_file(box.id, f"missing-{t}.txt")
    with pytest.raises(NotFoundError):
        mclient.sessions.read_file(box.id, f"missing-{t}/inside.txt")
    with pytest.raises(NotFoundError):
        mclient.sessions.delete_file(box.id, f"missing-{t}.txt")


def test_file_routes_of_an_unknown_session_are_not_found(client):
    ghost = str(uuid.uuid4())
    with pytest.raises(NotFoundError):
        client.sessions.list_files(ghost)
    with pytest.raises(NotFoundError):
        client.sessions.read_file(ghost, "brief.md")
    with pytest.raises(NotFoundError):
        client.sessions.upload_file(ghost, b"x", filename="x.txt")
    with pytest.raises(NotFoundError):
        client.sessions.delete_file(ghost, "x.txt")
    with pytest.raises(NotFoundError):
        client.sessions.exec(ghost, "true")


# -- stop / start --


def test_stop_keeps_the_workspace_readable_and_start_restores_it(client, janitor, plain_agent):
    session = client.sessions.create_and_wait(plain_agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="stop-start")
    sid = session.id
    exec_ok(
        client,
        sid,
        "mkdir -p out/nested && printf 'keep me\\n' > out/kept.txt"
        " && head -c 300000 /dev/urandom > out/nested/noise.bin && chmod 0750 out/nested",
    )
    noise_sum = exec_ok(client, sid, "sha256sum out/nested/noise.bin").split()[0]

    stopped = client.sessions.stop(sid)
    assert stopped.status == "stopped"
    assert stopped.stopped_reason == "requested"
    detail = client.sessions.get(sid)
    assert (detail.status, detail.stopped_reason) == ("stopped", "requested")
    stop_events = [e for e in client.sessions.history(sid) if e.type == "session.status_stopped"]
    assert len(stop_events) == 1 and stop_events[0].run_id is None
    assert stop_events[0].payload.get("reason") == "requested"
    assert not sandboxes.session_containers(sid, running_only=True), "the container still runs after stop"

    # List and read work on a stopped session, from the archive, booting nothing.
    root = {e.path: e for e in client.sessions.list_files(sid)}
    assert root["out"].is_dir
    assert {e.path for e in client.sessions.list_files(sid, "out")} == {"out/kept.txt", "out/nested"}
    nested = client.sessions.list_files(sid, "out/nested")
    assert [(e.path, e.size) for e in nested] == [("out/nested/noise.bin", 300000)]
    assert client.sessions.read_text(sid, "out/kept.txt") == "keep me\n"
    assert sha256(client.sessions.read_file(sid, "out/nested/noise.bin")) == noise_sum
    with pytest.raises(NotFoundError):
        client.sessions.read_file(sid, "out/none.txt")
    with pytest.raises(NotFoundError):
        client.sessions.list_files(sid, "none")
    with pytest.raises(BadRequestError):
        client.sessions.read_file(sid, "../etc/passwd")
    detail = client.sessions.get(sid)
    assert (detail.status, detail.stopped_reason) == ("stopped", "requested"), "reading a stopped session booted it"
    assert not sandboxes.session_containers(sid, running_only=True), "reading a stopped session started a container"

    # Exec, upload and delete on a stopped session are 409: they need a running sandbox.
    with pytest.raises(ConflictError):
        client.sessions.exec(sid, "true")
    with pytest.raises(ConflictError):
        client.sessions.upload_file(sid, b"late", filename="late.txt")
    with pytest.raises(ConflictError):
        client.sessions.delete_file(sid, "out/kept.txt")

    started = client.sessions.start(sid)
    assert started.id == sid and started.status in ("provisioning", "running")
    running = client.sessions.wait_until_running(sid, timeout=sandboxes.BOOT_DEADLINE)
    assert running.status == "running"
    assert running.stopped_reason is None
    assert exec_ok(client, sid, "cat out/kept.txt") == "keep me\n"
    assert exec_ok(client, sid, "sha256sum out/nested/noise.bin").split()[0] == noise_sum
    assert exec_ok(client, sid, "stat -c '%a %u' out/nested") == "750 1000\n"

    # A start writes a new session.status_running after the stop.
    kinds = types_of(client, sid)
    assert kinds.count("session.status_running") >= 2, kinds
    assert max(i for i, k in enumerate(kinds) if k == "session.status_running") > kinds.index("session.status_stopped")

    # Start on a running session is 200, and changes nothing.
    again = client.sessions.start(sid)
    assert again.status == "running"
    assert client.sessions.get(sid).sandbox_seconds > 0


# -- snapshots --


def test_snapshot_restore_and_fork(client, janitor, plain_agent):
    session = client.sessions.create_and_wait(plain_agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="snapshots")
    sid = session.id
    exec_ok(client, sid, "mkdir -p data && printf 'version 1\\n' > data/v.txt && printf 'keep\\n' > data/keep.txt")

    label = f"before-edit-{tag()}"
    snap = client.sessions.create_snapshot(sid, label=label)
    assert snap.id and snap.session_id == sid
    assert snap.label == label
    assert snap.size_bytes > 0
    listed = client.sessions.snapshots(sid)
    assert [s.id for s in listed] == [snap.id]
    assert listed[0].label == label and listed[0].size_bytes == snap.size_bytes

    exec_ok(client, sid, "printf 'version 2\\n' > data/v.txt && rm data/keep.txt && echo new > data/new.txt")
    restored = client.sessions.restore_snapshot(sid, snap.id)
    assert restored.id == sid
    if restored.status != "running":
        restored = client.sessions.wait_until_running(sid, timeout=sandboxes.BOOT_DEADLINE)
    assert restored.status == "running"
    assert exec_ok(client, sid, "cat data/v.txt data/keep.txt") == "version 1\nkeep\n"
    assert exec_ok(client, sid, "test -e data/new.txt || echo absent") == "absent\n"
    assert [s.id for s in client.sessions.snapshots(sid)] == [snap.id]

    # Fork: a new session that starts from the snapshot's workspace.
    fork = client.sessions.create_and_wait(
        plain_agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="fork", from_snapshot_id=snap.id
    )
    assert fork.id != sid and fork.status == "running"
    assert exec_ok(client, fork.id, "cat data/v.txt data/keep.txt") == "version 1\nkeep\n"
    assert client.sessions.snapshots(fork.id) == []
    # The fork and the original are separate workspaces.
    exec_ok(client, fork.id, "echo forked > data/v.txt")
    assert exec_ok(client, sid, "cat data/v.txt") == "version 1\n"


def test_fork_from_an_unknown_snapshot_is_not_found(client, janitor, plain_agent):
    # An unknown snapshot id is a 404.
    with pytest.raises(NotFoundError):
        janitor.create(client, plain_agent.slug, from_snapshot_id=str(uuid.uuid4()))


# -- boot failure --


def test_a_failed_boot_is_an_error_session(client, janitor, new_slug):
    agent = client.agents.create(slug=new_slug("noimage"), name="No image", image=sandboxes.MISSING_IMAGE)
    janitor.track_agent(agent)
    created = janitor.create(client, agent.slug, title="doomed")
    assert created.status == "provisioning"
    with pytest.raises(RunFailedError) as caught:
        client.sessions.wait_until_running(created.id, timeout=sandboxes.BOOT_DEADLINE)

    detail = client.sessions.get(created.id)
    assert detail.status == "error"
    assert detail.error, "a session with status error MUST have error set"
    assert caught.value.detail == detail.error
    assert sandboxes.MISSING_IMAGE in detail.error, detail.error

    # session.created, then session.status_error{error} with run_id null.
    events = list(client.sessions.history(created.id))
    failures = [e for e in events if e.type == "session.status_error"]
    assert len(failures) == 1, [e.type for e in events]
    assert failures[0].run_id is None
    assert failures[0].payload.get("error") == detail.error
    assert "session.status_running" not in [e.type for e in events]
    assert not sandboxes.session_containers(created.id, running_only=True)

    # And the same thing through the one-call helper.
    with pytest.raises(RunFailedError) as again:
        client.sessions.create_and_wait(agent.slug, title="doomed again", timeout=sandboxes.BOOT_DEADLINE)
    assert sandboxes.MISSING_IMAGE in again.value.detail
    assert again.value.run_id is None
    assert client.sessions.list(agent_id=agent.id, status="error").total == 2


# -- ports --

WS_SERVER = r'''
import base64, hashlib, socket, struct, threading
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def exact(c, n):
    buf = b""
    while len(buf) < n:
        chunk = c.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf
def handle(c):
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(4096)
            if not chunk:
                return
            data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(b":", 1) for l in head[1:] if b":" in l)}
        accept = base64.b64encode(hashlib.sha1(headers[b"sec-websocket-key"] + GUID).digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        while True:
            b1, b2 = exact(c, 2)
            n = b2 & 0x7F
            if n == 126:
                n = struct.unpack(">H", exact(c, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", exact(c, 8))[0]
            mask = exact(c, 4) if b2 & 0x80 else b"\0\0\0\0"
            payload = bytes(x ^ mask[i % 4] for i, x in enumerate(exact(c, n)))
            if b1 & 0x0F == 8:
                c.sendall(b"\x88\x00")
                return
            reply = b"echo:" + head[0].split(b" ")[1] + b":" + payload
            c.sendall(bytes([0x81, len(reply)]) + reply)
    except EOFError:
        pass
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8081))
s.listen()
while True:
    conn, _ = s.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
'''


@pytest.fixture
def web_session(client, janitor, new_slug):
    agent = client.agents.create(slug=new_slug("web"), name="Web preview", exposed_ports=[8080, 8081])
    janitor.track_agent(agent)
    session = client.sessions.create_and_wait(agent.slug, title="preview", timeout=sandboxes.BOOT_DEADLINE)
    assert session.exposed_ports == [8080, 8081]
    return session


def poll_http(url: str, *, timeout: float = 30.0) -> httpx.Response:
    """GETs `url` until it answers 200 (the server in the sandbox takes a moment to listen)."""
    last: object = None
    with httpx.Client(timeout=10.0) as h:

        def answered() -> httpx.Response | None:
            nonlocal last
            try:
                response = h.get(url)
                if response.status_code == 200:
                    return response
                last = f"{response.status_code} {response.text[:200]!r}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            return None

        return wait_until(answered, timeout, f"{url} to answer 200", 0.2, last=lambda: last)


def test_port_preview_serves_http(client, server, web_session):
    sid = web_session.id
    exec_ok(
        client,
        sid,
        "sh -c 'cd /workspace && echo hello > index.html && nohup python3 -m http.server 8080 >/dev/null 2>&1 &'",
    )
    preview = client.sessions.port(sid, 8080)
    assert preview.port == 8080
    url = httpx.URL(preview.url)
    assert url.scheme in ("http", "https") and url.host
    assert "/preview/" in url.path, preview.url

    response = poll_http(preview.url)
    assert response.text == "hello\n"
    # Paths below the preview URL reach the same paths in the sandbox.
    exec_ok(client, sid, "mkdir -p sub && printf 'nested page' > sub/page.txt")
    nested = poll_http(str(url.join("sub/page.txt")))
    assert nested.text == "nested page"

    # Only exposed ports have previews: any other port is a 404.
    with pytest.raises(NotFoundError):
        client.sessions.port(sid, 9999)


def test_port_preview_tunnels_websockets(client, web_session):
    sid = web_session.id
    exec_ok(client, sid, f"cat > /tmp/ws.py <<'EOF'\n{WS_SERVER}\nEOF\nnohup python3 /tmp/ws.py >/tmp/ws.log 2>&1 &")
    preview = client.sessions.port(sid, 8081)
    url = httpx.URL(preview.url)
    assert url.scheme == "http", "this test speaks plain-text WebSocket"
    port = url.port or 80

    status = b""

    def upgraded():
        """One handshake attempt: (socket, key, head) once the answer is a 101."""
        nonlocal status
        key = base64.b64encode(os.urandom(16))
        sock = None
        try:
            sock = socket.create_connection((url.host, port), timeout=10)
            sock.sendall(
                b"GET " + url.path.encode() + b"chat?room=1 HTTP/1.1\r\n"
                b"Host: " + f"{url.host}:{port}".encode() + b"\r\n"
                b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
            )
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
            status = head.split(b"\r\n", 1)[0]
            if b" 101 " in status + b" ":
                return sock, key, head
        except OSError:
            status = b"(connection failed)"
        if sock is not None:
            sock.close()
        return None

    sock, key, head = wait_until(
        upgraded, 30, f"a WebSocket upgrade through {preview.url}", 0.2, last=lambda: f"status {status!r}"
    )

    try:
        lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(b":", 1) for l in lines[1:] if b":" in l)}
        expected = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        assert headers.get(b"sec-websocket-accept") == expected, lines

        message = b"hello over ws"
        mask = os.urandom(4)
        sock.sendall(bytes([0x81, 0x80 | len(message)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(message)))
        leftover = head.split(b"\r\n\r\n", 1)[1]
        frame = leftover
        while len(frame) < 2 or len(frame) < 2 + (frame[1] & 0x7F):
            chunk = sock.recv(4096)
            assert chunk, f"the tunnel closed before the echo came back (got {frame!r})"
            frame += chunk
        assert frame[0] == 0x81
        payload = frame[2 : 2 + (frame[1] & 0x7F)]
        # The sandbox saw the path below the preview prefix, query included.
        assert payload == b"echo:/chat?room=1:" + message, payload
        sock.sendall(bytes([0x88, 0x80]) + os.urandom(4))
    finally:
        sock.close()


def test_port_of_a_session_without_exposed_ports_is_not_found(client, janitor, plain_agent):
    session = client.sessions.create_and_wait(plain_agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="no ports")
    with pytest.raises(NotFoundError):
        client.sessions.port(session.id, 8080)


# -- delete --


def test_delete_removes_the_container(client, janitor, plain_agent):
    session = client.sessions.create_and_wait(plain_agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="to delete")
    sid = session.id
    assert sandboxes.session_containers(sid), "a running session has no container carrying its label"

    assert client.sessions.delete(sid) is None
    with pytest.raises(NotFoundError):
        client.sessions.get(sid)
    left = sandboxes.session_containers(sid)
    assert not left, f"DELETE returned but the container remains: {sandboxes.describe(left)}"
    with pytest.raises(NotFoundError):
        client.sessions.delete(sid)
    with pytest.raises(NotFoundError):
        client.sessions.exec(sid, "true")
    with pytest.raises(NotFoundError):
        client.sessions.events(sid)


def test_delete_of_a_stopped_session(client, janitor, plain_agent):
    session = client.sessions.create_and_wait(
        plain_agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="stopped then deleted"
    )
    client.sessions.stop(session.id)
    client.sessions.delete(session.id)
    with pytest.raises(NotFoundError):
        client.sessions.get(session.id)
    with pytest.raises(NotFoundError):
        client.sessions.list_files(session.id)
    assert not sandboxes.session_containers(session.id)
