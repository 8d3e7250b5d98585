"""Property fuzzing of the API: schemathesis over openapi/openapi.json against the real server.

Starts `sandbox-agents serve` (SANDBOX_AGENTS_BIN) on a fresh data directory, with its
embedded PostgreSQL, a shared operator token and Docker sandboxes, like the contract suite's
harness (tests/contract/harness.py, reused here). Seeds through the API itself one of every
resource a path names (a project, an agent, a running session with a background process and a
snapshot, a secret, a git key, an environment, a skill bundle with a version, a webhook with a
delivery, a person with a membership, an API key), plus a spare of each that deleting
operations may destroy, and writes their ids to a JSON file that `hooks.py` reads: generated
cases then name a seeded resource most of the time (so they get past the 404) and a generated
value the rest. Then runs `st run` with `schemathesis.toml` (the checks, and the bounds that
keep the run to a few minutes, each said why there; every documented operation is fuzzed) and
fails when schemathesis does. The server's log is printed on failure.

    run.py [--seed N] [--max-examples N] [--workers N] [--keep] [-- extra `st run` arguments]
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from archives import skills_archive

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "contract"))

import fakemodel  # noqa: E402 - tests/contract is put on the path just above
import harness  # noqa: E402
from harness import wait_until  # noqa: E402

#: How long a session may take to boot here (a local image, no pull).
BOOT_DEADLINE = 120.0
#: How long the seeded webhook's first delivery may take to be recorded.
DELIVERY_DEADLINE = 30.0

DEPLOYMENT_LABEL = "io.sandbox-agents.deployment"
#: How long the seeded environment's image build may take to finish (it fails or succeeds:
#: either way its log is there for `GET .../build-log`).
BUILD_DEADLINE = 300.0
#: The port the seeded agents expose (`GET .../ports/{port}` names it).
EXPOSED_PORT = 8000
#: The client tool the tools session's model calls, and the prompt that makes it call it.
CLIENT_TOOL = "fuzz_tool"
TOOL_PROMPT = "FUZZ-CALL-THE-CLIENT-TOOL"
#: Files the file operations name most of the time: in the workspace (relative) and in the
#: sandbox (absolute).
WORKSPACE_FILE = "fuzz/seed.txt"
WORKSPACE_SCRATCH = "fuzz/scratch.txt"
#: The file `DELETE .../files` deletes: hooks.py writes it just before each case that names it,
#: so that the case deletes a file (204) rather than one an earlier case deleted (404).
WORKSPACE_DOOMED = "fuzz/doomed.txt"
SANDBOX_FILE = "/tmp/fuzz-seed.txt"
#: The file `PUT .../sandbox-files` writes: not the one GET reads, since a PUT's generated
#: `mode` (a `0`, say) leaves that file unreadable (403) for the rest of the run.
SANDBOX_SCRATCH = "/tmp/fuzz-scratch.txt"
#: What the fuzz generates cases from and checks answers against.
COMMITTED_DOCUMENT = REPO_ROOT / "openapi" / "openapi.json"


class Api:
    """The seeding client: the operator token, the seeded project once there is one; every
    answer must be a success, or seeding stops saying what the server answered."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=120.0, headers={"Authorization": f"Bearer {token}"})
        self.project: str | None = None

    def call(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if self.project:
            headers = {"X-Project": self.project, **headers}
        r = self.http.request(method, path, headers=headers, **kwargs)
        if r.status_code >= 300:
            raise RuntimeError(f"seeding: {method} {path} answered {r.status_code}: {r.text[:2000]}")
        return r

    def post(self, path: str, body: dict | None = None, **kwargs) -> dict:
        r = self.call("POST", path, json=body, **kwargs) if body is not None else self.call("POST", path, **kwargs)
        return r.json() if r.content else {}

    def get(self, path: str, **kwargs):
        return self.call("GET", path, **kwargs).json()




def wait_running(api: Api, session_id: str) -> None:
    def settled():
        detail = api.get(f"/api/sessions/{session_id}")
        return detail if detail["status"] != "provisioning" else None

    detail = wait_until(settled, BOOT_DEADLINE, f"session {session_id} to boot")
    if detail["status"] != "running":
        raise RuntimeError(f"seeding: session {session_id} did not boot: {json.dumps(detail)[:2000]}")


def seed(api: Api) -> dict:
    """One of each resource (and a spare for the operations that delete or stop), created
    through the API; returns their ids."""
    s: dict[str, str] = {}
    project = api.post("/api/projects", {"name": "Fuzz", "slug": "fuzz"})
    s["project"] = project["id"]
    s["project_spare"] = api.post("/api/projects", {"name": "Fuzz spare", "slug": "fuzz-spare"})["id"]
    # Every later request names the seeded project: the fuzzer creates projects of its own,
    # and a request that names none is then a 400 ("several projects are available").
    api.project = s["project"]

    # A person for each membership, and a guest whom POST .../members may add.
    # `person_member` holds the spare membership: deleting `person_spare` (a user's
    # DELETE) takes that person's memberships with it.
    for name in ("person", "person_spare", "person_member", "guest"):
        s[name] = api.post("/api/users", {"email": f"{name.replace('_', '-')}@fuzz.example", "name": name})["id"]
    for name, person in (("member", "person"), ("member_spare", "person_member")):
        s[name] = api.post(
            f"/api/projects/{s['project']}/members", {"email": f"{person.replace('_', '-')}@fuzz.example"}
        )["id"]
    for name in ("api_key", "api_key_spare"):
        s[name] = api.post("/api/api-keys", {"name": name})["id"]
    for name in ("git_key", "git_key_spare"):
        s[name] = api.post("/api/git-keys", {"name": name})["id"]
    for name in ("secret", "secret_spare"):
        s[name] = api.post("/api/secrets", {"name": name.upper(), "value": "fuzz-value"})["id"]
    # No packages: nothing to build, so the environment is ready at once.
    for name in ("environment", "environment_spare"):
        s[name] = api.post("/api/environments", {"name": name})["id"]
    for name in ("bundle", "bundle_spare"):
        bundle = api.post("/api/skill-bundles", {"slug": name.replace("_", "-")})
        s[name] = bundle["slug"]
        api.post(
            f"/api/skill-bundles/{bundle['slug']}/versions",
            files={"file": ("skills.tar.gz", skills_archive(), "application/gzip")},
        )
    for name in ("agent", "agent_spare"):
        s[name] = api.post("/api/agents", {"slug": name.replace("_", "-"), "name": name,
                                           "exposed_ports": [EXPOSED_PORT]})["id"]
    # The agent PATCH edits: whatever the fuzz makes of it, the seeded agent's sessions still
    # boot (a workspace_source without a skills_source is refused at a session's create).
    s["agent_patch"] = api.post("/api/agents", {"slug": "agent-patch", "name": "agent to patch"})["id"]
    s["agent_tools"] = api.post("/api/agents", {
        "slug": "agent-tools", "name": "agent with a client tool",
        "client_tools": [{"name": CLIENT_TOOL, "description": "A tool the fuzz answers.", "deferrable": True}],
    })["id"]
    # An environment with a package: its image build runs (and succeeds or fails), so
    # `GET .../build-log` has a log to answer with.
    s["environment_built"] = api.post("/api/environments", {
        "name": "environment-built", "config": {"packages": {"pip": ["sandbox-agents-fuzz-nonexistent"]}},
    })["id"]
    # Delivered to a closed port on this machine: every attempt fails at once, and is recorded.
    for name in ("webhook", "webhook_spare"):
        s[name] = api.post("/api/webhooks", {"name": name, "url": "http://127.0.0.1:9/fuzz"})["id"]

    for name in ("session", "session_spare"):
        s[name] = api.post("/api/sessions", {"agent_id": s["agent"], "title": name})["id"]
    s["session_tools"] = api.post("/api/sessions", {"agent_id": s["agent_tools"], "title": "tools",
                                                    "prompt": TOOL_PROMPT})["id"]
    for name in ("session", "session_spare", "session_tools"):
        wait_running(api, s[name])
    for path in (WORKSPACE_FILE, WORKSPACE_SCRATCH):
        api.post(f"/api/sessions/{s['session']}/files", params={"path": path},
                 files={"file": ("seed.txt", b"seeded by the fuzz\n", "text/plain")})
    api.call("PUT", f"/api/sessions/{s['session']}/sandbox-files", params={"path": SANDBOX_FILE},
             content=b"seeded by the fuzz\n", headers={"Content-Type": "application/octet-stream"})

    def pending_call():
        calls = api.get(f"/api/sessions/{s['session_tools']}/tool-calls")
        return calls[0]["call_id"] if calls else None

    wait_until(pending_call, DELIVERY_DEADLINE, "the tools session's client tool call")

    def built():
        build = api.get(f"/api/environments/{s['environment_built']}").get("build") or {}
        return build.get("status") not in (None, "none", "building")

    wait_until(built, BUILD_DEADLINE, "the seeded environment's image build")
    s["process"] = api.post(f"/api/sessions/{s['session']}/processes", {"command": "sleep 3600"})["id"]
    s["snapshot"] = api.post(f"/api/sessions/{s['session']}/snapshots", {"label": "fuzz"})["id"]
    s["snapshot_spare"] = api.post(f"/api/sessions/{s['session_spare']}/snapshots", {"label": "spare"})["id"]

    def delivery():
        deliveries = api.get(f"/api/webhooks/{s['webhook']}/deliveries")
        return deliveries[0]["id"] if deliveries else None

    s["delivery"] = wait_until(delivery, DELIVERY_DEADLINE, "the seeded webhook's first delivery")
    return s


def path_parameters(s: dict) -> dict[str, dict[str, str]]:
    """The seeded value of each path parameter, per operation (`METHOD /path`). Operations that
    delete, stop or restore act on the spares, so the seeded resources stay for the rest."""
    agent = {"ref": s["agent"]}
    session = {"session_id": s["session"]}
    spare_session = {"session_id": s["session_spare"]}
    table: dict[str, dict[str, str]] = {
        "GET /api/agents/{ref}": agent,
        "PATCH /api/agents/{ref}": {"ref": s["agent_patch"]},
        "DELETE /api/agents/{ref}": {"ref": s["agent_spare"]},
        "POST /api/agents/{ref}/archive": {"ref": s["agent_spare"]},
        "POST /api/agents/{ref}/unarchive": agent,
        "GET /api/agents/{ref}/memory": agent,
        "PUT /api/agents/{ref}/memory": agent,
        "DELETE /api/api-keys/{key_id}": {"key_id": s["api_key_spare"]},
        "POST /api/api-keys/{key_id}/revoke": {"key_id": s["api_key"]},
        "GET /api/environments/{ref}": {"ref": s["environment"]},
        "PATCH /api/environments/{ref}": {"ref": s["environment"]},
        "DELETE /api/environments/{ref}": {"ref": s["environment_spare"]},
        "POST /api/environments/{ref}/archive": {"ref": s["environment_spare"]},
        "GET /api/environments/{ref}/build-log": {"ref": s["environment_built"]},
        "DELETE /api/git-keys/{key_id}": {"key_id": s["git_key_spare"]},
        "POST /api/git-keys/{key_id}/test": {"key_id": s["git_key"]},
        "GET /api/projects/{ref}": {"ref": s["project"]},
        "PATCH /api/projects/{ref}": {"ref": s["project"]},
        "DELETE /api/projects/{ref}": {"ref": s["project_spare"]},
        "GET /api/projects/{ref}/members": {"ref": s["project"]},
        "POST /api/projects/{ref}/members": {"ref": s["project"]},
        "DELETE /api/projects/{ref}/members/{member_id}": {"ref": s["project"], "member_id": s["member_spare"]},
        "GET /api/secrets/{secret_id}": {"secret_id": s["secret"]},
        "PUT /api/secrets/{secret_id}": {"secret_id": s["secret"]},
        "DELETE /api/secrets/{secret_id}": {"secret_id": s["secret_spare"]},
        "GET /api/skill-bundles/{slug}": {"slug": s["bundle"]},
        "DELETE /api/skill-bundles/{slug}": {"slug": s["bundle_spare"]},
        "GET /api/skill-bundles/{slug}/versions": {"slug": s["bundle"]},
        "POST /api/skill-bundles/{slug}/versions": {"slug": s["bundle"]},
        "DELETE /api/skill-bundles/{slug}/versions/{version}": {"slug": s["bundle"], "version": 1},
        "DELETE /api/users/{identity_id}": {"identity_id": s["person_spare"]},
        "PATCH /api/users/{identity_id}": {"identity_id": s["person"]},
        "POST /api/users/{identity_id}/recovery": {"identity_id": s["person"]},
        "GET /api/webhooks/{webhook_id}": {"webhook_id": s["webhook"]},
        "PATCH /api/webhooks/{webhook_id}": {"webhook_id": s["webhook"]},
        "DELETE /api/webhooks/{webhook_id}": {"webhook_id": s["webhook_spare"]},
        "GET /api/webhooks/{webhook_id}/deliveries": {"webhook_id": s["webhook"]},
        "GET /api/webhooks/{webhook_id}/deliveries/{delivery_id}/attempts": {
            "webhook_id": s["webhook"], "delivery_id": s["delivery"],
        },
        "POST /api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver": {
            "webhook_id": s["webhook"], "delivery_id": s["delivery"],
        },
        "POST /api/webhooks/{webhook_id}/ping": {"webhook_id": s["webhook"]},
        "POST /api/webhooks/{webhook_id}/rotate-secret": {"webhook_id": s["webhook"]},
        # A session's destructive operations act on the spare session.
        "DELETE /api/sessions/{session_id}": spare_session,
        "POST /api/sessions/{session_id}/stop": spare_session,
        "POST /api/sessions/{session_id}/start": spare_session,
        "POST /api/sessions/{session_id}/snapshots/{snapshot_id}/restore": {
            **spare_session, "snapshot_id": s["snapshot_spare"],
        },
        "GET /api/sessions/{session_id}/processes/{process_id}": {**session, "process_id": s["process"]},
        "DELETE /api/sessions/{session_id}/processes/{process_id}": {**session, "process_id": s["process"]},
    }
    # Every other operation on a session reads or changes the running seeded one.
    for op in (
        "GET /api/sessions/{session_id}", "PATCH /api/sessions/{session_id}",
        "GET /api/sessions/{session_id}/events", "GET /api/sessions/{session_id}/events/stream",
        "POST /api/sessions/{session_id}/exec", "GET /api/sessions/{session_id}/files",
        "POST /api/sessions/{session_id}/files", "DELETE /api/sessions/{session_id}/files",
        "GET /api/sessions/{session_id}/files/content", "POST /api/sessions/{session_id}/interrupt",
        "POST /api/sessions/{session_id}/messages", "GET /api/sessions/{session_id}/notebook",
        "GET /api/sessions/{session_id}/ports/{port}", "GET /api/sessions/{session_id}/processes",
        "POST /api/sessions/{session_id}/processes", "GET /api/sessions/{session_id}/sandbox-files",
        "PUT /api/sessions/{session_id}/sandbox-files", "GET /api/sessions/{session_id}/snapshots",
        "POST /api/sessions/{session_id}/snapshots", "GET /api/sessions/{session_id}/terminal",
        "GET /api/sessions/{session_id}/tool-calls", "POST /api/sessions/{session_id}/tool-results",
    ):
        table[op] = session
    table["GET /api/sessions/{session_id}/ports/{port}"] = {**session, "port": EXPOSED_PORT}
    table["POST /api/sessions/{session_id}/tool-results"] = {"session_id": s["session_tools"]}
    return table


#: Operations that delete, archive, stop or restore what their path names: pointed at the
#: spares (see `path_parameters`), and never at a seeded resource the rest of the run needs,
#: even when schemathesis names one it saw in an answer (hooks.py, `before_call`).
DESTRUCTIVE = (
    "DELETE /api/agents/{ref}", "POST /api/agents/{ref}/archive", "DELETE /api/api-keys/{key_id}",
    "DELETE /api/environments/{ref}", "POST /api/environments/{ref}/archive",
    "DELETE /api/git-keys/{key_id}", "DELETE /api/projects/{ref}",
    "DELETE /api/projects/{ref}/members/{member_id}", "DELETE /api/secrets/{secret_id}",
    "DELETE /api/skill-bundles/{slug}", "DELETE /api/users/{identity_id}",
    "DELETE /api/webhooks/{webhook_id}", "DELETE /api/sessions/{session_id}",
    "POST /api/sessions/{session_id}/stop", "POST /api/sessions/{session_id}/snapshots/{snapshot_id}/restore",
)

#: Markers in seeded bodies that hooks.py replaces when the case is sent.
PENDING_CALL = "__pending_call__"
FRESH_RECOVERY_CODE = "__fresh_recovery_code__"
CURRENT_VERSION = "__current_version__"

#: The seeded resources the run needs to the end (the spares may go).
PROTECTED = (
    "project", "person", "guest", "member", "api_key", "git_key", "secret", "environment", "bundle",
    "agent", "webhook", "session", "snapshot", "agent_patch", "agent_tools", "session_tools", "environment_built",
)


def body_fields(s: dict) -> dict[str, dict[str, str]]:
    """Fields of request bodies that name another resource, per operation: set to the seeded
    one most of the time, like path parameters."""
    return {
        "POST /api/sessions": {"agent_id": s["agent"]},
        # An address the server may deliver to (this run allows private ones): a generated
        # URL mostly names a host that does not resolve, or one the address check refuses.
        "POST /api/webhooks": {"agent_id": s["agent"], "url": "http://127.0.0.1:9/fuzz"},
        # A slug other than the agent's own is refused (it cannot change); the version is the
        # agent's current one, which hooks.py reads when the case is sent (another is a 409).
        "PATCH /api/agents/{ref}": {"environment_id": s["environment"], "slug": "agent-patch",
                                    "version": CURRENT_VERSION},
        # The call waiting now, which hooks.py looks up when the case is sent.
        "POST /api/sessions/{session_id}/tool-results": {"call_id": PENDING_CALL},
        # A fresh recovery code, which hooks.py mints when the case is sent.
        "POST /api/auth/recovery": {"code": FRESH_RECOVERY_CODE},
        "PATCH /api/webhooks/{webhook_id}": {"agent_id": s["agent"]},
        "POST /api/projects/{ref}/members": {"email": "guest@fuzz.example"},
        # The memory's current version, which hooks.py reads when the case is sent.
        "PUT /api/agents/{ref}/memory": {"version": CURRENT_VERSION},
    }


def body_fields_always() -> dict[str, dict]:
    """Body fields set in every fully valid case, not most: a closed set of values no
    generated string is in, so that a lone case (the examples phase sends one) does not
    depend on the draw."""
    return {
        # The backend is one of `GET /api/backends` (400 otherwise): the server's default.
        "POST /api/environments": {"config.backend": None},
        "PATCH /api/environments/{ref}": {"config.backend": None},
    }



#: Operations an HTTP client cannot use: the terminal is a WebSocket, so every case the fuzz
#: sends (a plain GET) is refused with a 400 by design; its own tests open one
#: (crates/server/tests/api/terminal.rs, the e2e suite). Left out of the counts below, and
#: its warnings are off in schemathesis.toml.
NOT_OVER_HTTP = frozenset({"GET /api/sessions/{session_id}/terminal"})
HTTP_METHODS = frozenset({"GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS"})


def rejected_operations(report_dir: Path) -> tuple[list[str], list[str]]:
    """From the run's NDJSON report, the two numbers that say whether the document lets the
    fuzz reach the API's real work: the operations whose generated cases only ever found
    nothing (404: the run lacks the data they need), and those that mostly rejected what was
    generated (400/422: the document's rules are looser than the server's). Schemathesis warns
    about both at the end of its output; the same rules here make them a line of the summary
    CI prints (it counts, per scenario whose positive cases were all refused, the 404s and the
    other refusals but 401, 403, 409 and 429, warning at a tenth; an operation served once is
    not missing data)."""
    served: set[str] = set()
    missing: set[str] = set()
    mismatch: set[str] = set()
    for path in sorted(report_dir.glob("*.ndjson")):
        with path.open() as lines:
            for line in lines:
                if '"ScenarioFinished"' not in line[:40]:
                    continue
                event = json.loads(line)["ScenarioFinished"]
                recorder = event["recorder"]
                label = recorder["label"]
                # Operations only ("Stateful tests" is a label too).
                if label in NOT_OVER_HTTP or label.split(" ")[0] not in HTTP_METHODS:
                    continue
                counts: dict[int, int] = {}
                for case_id, case in (recorder.get("cases") or {}).items():
                    meta = case["value"].get("meta") or {}
                    # Valid in every part: a case of a header's scenario is "positive" even when
                    # it carries a body another scenario generated invalid (a `0` for an
                    # object), and the server's 422 for that body says nothing about the document
                    # (hooks.py seeds by the same rule).
                    if (meta.get("generation") or {}).get("mode") != "positive" or any(
                        (part or {}).get("mode") != "positive" for part in (meta.get("components") or {}).values()
                    ):
                        continue
                    response = ((recorder.get("interactions") or {}).get(case_id) or {}).get("response")
                    if response is None:
                        continue
                    status = response["status_code"]
                    counts[status] = counts.get(status, 0) + 1
                    if status < 400:
                        served.add(label)
                if event["status"] != "success" or not counts or any(s < 400 for s in counts):
                    continue
                if set(counts) <= {401, 403, 500} or not all(400 <= s < 500 for s in counts if s != 500):
                    continue
                not_found = counts.get(404, 0)
                refused = sum(c for s, c in counts.items() if 400 <= s < 500 and s not in {401, 403, 404, 409, 429})
                total = not_found + refused
                if total and not_found / total >= 0.1:
                    missing.add(label)
                if total and refused / total >= 0.1:
                    mismatch.add(label)
    return sorted(missing - served), sorted(mismatch)


def query_parameters() -> dict[str, dict[str, str]]:
    """Query parameters that name a seeded file, per operation: set to it most of the time."""
    return {
        "GET /api/sessions/{session_id}/files/content": {"path": WORKSPACE_FILE},
        "GET /api/sessions/{session_id}/files": {"path": "fuzz"},
        # A file hooks.py writes just before the case (a stop racing the delete is the 409
        # documented on the operation: crates/sandbox/src/docker/error.rs).
        "DELETE /api/sessions/{session_id}/files": {"path": WORKSPACE_DOOMED},
        "POST /api/sessions/{session_id}/files": {"path": WORKSPACE_SCRATCH},
        "GET /api/sessions/{session_id}/sandbox-files": {"path": SANDBOX_FILE},
        "PUT /api/sessions/{session_id}/sandbox-files": {"path": SANDBOX_SCRATCH},
    }


def remove_deployment(deployments: set[str]) -> None:
    """What the server leaves on purpose when it stops (running sandboxes, the warm pool, snapshot
    and environment images): this deployment's, removed."""
    for deployment in deployments:
        for kind, remove in (("ps", "rm"), ("images", "rmi")):
            listing = ["docker", kind, "-q", "--no-trunc", "--filter", f"label={DEPLOYMENT_LABEL}={deployment}"]
            if kind == "ps":
                listing.insert(2, "-a")
            ids = subprocess.run(listing, capture_output=True, text=True, timeout=60).stdout.split()
            if ids:
                subprocess.run(["docker", remove, "-f", *sorted(set(ids))], capture_output=True, timeout=300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SA_FUZZ_SEED", "20261201")),
                        help="hypothesis seed (SA_FUZZ_SEED): the same seed generates the same cases")
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("SA_FUZZ_MAX_EXAMPLES", "40")),
                        help="cases per operation and phase (SA_FUZZ_MAX_EXAMPLES)")
    parser.add_argument("--workers", default=os.environ.get("SA_FUZZ_WORKERS", "2"))
    parser.add_argument("--keep", action="store_true",
                        help="keep the data directory and the server's log (the sandboxes go anyway)")
    parser.add_argument("st_args", nargs="*", help="more `st run` arguments (after --)")
    args = parser.parse_args()

    out = REPO_ROOT / "target" / "schemathesis"
    shutil.rmtree(out / "report", ignore_errors=True)  # this run's reports only
    out.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    server = harness.ServerProcess(
        harness.short_tmpdir("sa-fuzz-"),
        name="fuzzed server",
        env={
            "SANDBOX_AGENTS_TOKEN": token,
            # The seeded webhook delivers to 127.0.0.1; retries come quickly.
            "SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE": "true",
            "SANDBOX_AGENTS_WEBHOOK_RETRY_BASE_SECONDS": "0.2",
            "SANDBOX_AGENTS_WEBHOOK_RETRY_MAX_SECONDS": "1",
            # The fuzzer sends far more than a client would: no 429 for the shared token.
            "SANDBOX_AGENTS_RATE_LIMIT_PER_MINUTE": "0",
            # Two cores: one environment build at a time, one warm sandbox.
            "SANDBOX_AGENTS_MAX_CONCURRENT_BUILDS": "1",
            "SANDBOX_AGENTS_WARM_POOL_SIZE": "1",
        },
    )
    started = time.monotonic()
    code = 1
    # The server's LiteLLM proxy: `GET /api/models` lists its model, and every turn a message
    # starts gets the same short answer.
    model = fakemodel.FakeModel().start()
    model.set_script([
        # The tools session's prompt: the model calls the deferrable client tool, so the session
        # has a call waiting for `POST .../tool-results` (an answer starts the turn again, and
        # the model calls it again).
        {"when": {"any_message_contains": TOOL_PROMPT},
         "reply": {"tool_calls": [{"name": CLIENT_TOOL, "arguments": {}}]}},
        {"reply": {"text": "Done."}},
    ])
    server.env.update({"LITELLM_PROXY_API_BASE": model.url, "LITELLM_PROXY_API_KEY": "api-fuzz"})
    try:
        server.start()
        # The fuzz reads the committed document: it must be the one this binary serves.
        served = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
        if served != json.loads(COMMITTED_DOCUMENT.read_text()):
            raise RuntimeError(
                f"{COMMITTED_DOCUMENT} is not the document {harness.server_binary()} serves: "
                "regenerate it (UPDATE_OPENAPI=1 cargo test -p sandbox-agents-server --test api "
                "openapi) or rebuild the server"
            )
        api = Api(server.base_url, token)
        seeded = seed(api)
        print(f"seeded in {time.monotonic() - started:.0f} s: {json.dumps(seeded)}", flush=True)
        seeds_file = out / "seeds.json"
        seeds_file.write_text(json.dumps({
            "project": seeded["project"],
            "path": path_parameters(seeded),
            "body": body_fields(seeded),
            "body_always": body_fields_always(),
            "query": query_parameters(),
            "session": seeded["session"],
            "person": seeded["person"],
            "workspace_scratch": WORKSPACE_SCRATCH,
            "pending_call": PENDING_CALL,
            "fresh_recovery_code": FRESH_RECOVERY_CODE,
            "current_version": CURRENT_VERSION,
            "workspace_doomed": WORKSPACE_DOOMED,
            "destructive": DESTRUCTIVE,
            "protected": [seeded[name] for name in PROTECTED],
        }, indent=1))
        env = {
            **os.environ,
            "SA_FUZZ_TOKEN": token,
            "SA_FUZZ_PROJECT": seeded["project"],
            "SA_FUZZ_SEEDS": str(seeds_file),
            "SA_FUZZ_URL": server.base_url,
            "PYTHONPATH": str(HERE),
        }
        command = [
            str(Path(sys.executable).parent / "st"), "--config-file", str(HERE / "schemathesis.toml"),
            "run", str(COMMITTED_DOCUMENT),
            "--url", server.base_url,
            "--seed", str(args.seed),
            "--max-examples", str(args.max_examples),
            "--workers", str(args.workers),
            "--report", "junit,ndjson", "--report-dir", str(out / "report"),
            *args.st_args,
        ]
        print("$ " + " ".join(command), flush=True)
        code = subprocess.run(command, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL).returncode
        missing, mismatch = rejected_operations(out / "report")
        print(f"api fuzz: {len(missing)} operations only ever answered 404 (missing test data)"
              + "".join(f"\n  - {label}" for label in missing), flush=True)
        print(f"api fuzz: {len(mismatch)} operations mostly rejected generated data (rules looser than the server's)"
              + "".join(f"\n  - {label}" for label in mismatch), flush=True)
        if server.proc.poll() is not None:
            print(f"the server exited during the run (code {server.proc.returncode})", file=sys.stderr)
            code = code or 1
    finally:
        log = out / "server.log"
        log.unlink(missing_ok=True)
        if (code != 0 or args.keep) and server.log_path.exists():
            shutil.copyfile(server.log_path, log)
            print(f"the server's log: {log}", file=sys.stderr)
        if code != 0:
            print(f"--- its last lines ---\n{server.log_tail(60)}", file=sys.stderr)
        deployments = set(server.deployments)
        server.cleanup(remove=not args.keep)
        model.stop()
        # What the server leaves on purpose goes in any case; --keep keeps the data directory.
        remove_deployment(deployments)
        if args.keep:
            print(f"kept the data directory {server.data_dir} (its cluster is stopped)", file=sys.stderr)
        print(f"api fuzz: {'passed' if code == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
