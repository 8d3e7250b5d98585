"""Schemathesis hooks of the API fuzz (tests/schemathesis/run.py writes the seeds they read).

* Path parameters: most valid cases name the resource `run.py` seeded for the operation (so
  they reach the handler's real work instead of its 404), the rest keep the generated value
  (so unknown and malformed ids are fuzzed too). Seeds go into a case as it is sent, and only
  into its parts generated to be valid.
* Body fields that name another resource (a session's `agent_id`, a webhook's), and query
  parameters that name a seeded file: the same. A body field named `a.b` is `b` inside `a`,
  set when the generated `a` is an object.
* Values only the server can give are fetched when the case is sent: the client tool call
  waiting now (`POST .../tool-results`), a fresh recovery code (`POST /api/auth/recovery`),
  the current version of what a PATCH or PUT edits (an agent, its memory). The file
  `DELETE .../files` names is written just before (not in the stateful phase, see `_seed`).
* A fully valid skill-bundle push sends a readable archive, most of the time (see
  `_skills_archive_part`).
* A fully valid JSON body sends an integral float as an integer (see `_integral`).
* An operation that deletes, archives, stops or restores never acts on a seeded resource the
  rest of the run needs, even one schemathesis saw in an answer and tries as a value: it gets
  the spare instead.
* A git key's test reaches 127.0.0.1 instead of the generated host: the probe waits up to
  30 s for a connection (100 s in all) by design, and a generated host may be an address that
  never answers (or a port of this machine that never speaks). The host's syntax is still
  fuzzed: only a host the schema accepts (which the server checks no less strictly) is
  redirected, to port 22, its user kept.
* A project's accepted `limits` are raised to their ceilings: a fuzzed monthly limit of $0,
  one sandbox or one request a minute would hold back every operation after it (402s, queued
  sessions, 429s) and leave them untested. Out-of-range values are kept, and still fuzzed.
"""
from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import httpx
import schemathesis

from archives import skills_archive


_SEEDS = json.loads(Path(os.environ["SA_FUZZ_SEEDS"]).read_text())
_DESTRUCTIVE = frozenset(_SEEDS["destructive"])
_PROTECTED = frozenset(_SEEDS["protected"])
_API = httpx.Client(
    base_url=os.environ["SA_FUZZ_URL"], timeout=60.0,
    headers={"Authorization": f"Bearer {os.environ['SA_FUZZ_TOKEN']}", "X-Project": os.environ["SA_FUZZ_PROJECT"]},
)
_PROJECT = os.environ["SA_FUZZ_PROJECT"]


def _key(context) -> str | None:
    operation = context.operation
    if operation is None:
        return None
    return f"{operation.method.upper()} {operation.path}"


def _mostly(case, salt: str) -> bool:
    """Three cases in four, the same for the same case (its id) whatever the order of calls."""
    return random.Random(f"{case.id}:{salt}").random() < 0.75


def _positive(case, location: str) -> bool:
    """Whether the case was generated valid in every part (`location` is the part to seed):
    only those get seeded values (a negative case keeps what it was generated to break)."""
    meta = case.meta
    if meta is None:
        return True
    # A case negative anywhere (a header, say) is left as generated: a seeded body would
    # get it accepted for the wrong reason.
    if getattr(meta.generation.mode, "value", meta.generation.mode) != "positive":
        return False
    return all(getattr(info.mode, "value", info.mode) == "positive" for info in (meta.components or {}).values())


def _with(body: dict, seeded: dict) -> dict:
    """`body` with the seeded fields; `a.b` sets `b` inside `a` when `a` is an object."""
    out = dict(body)
    for key, value in seeded.items():
        outer, _, inner = key.partition(".")
        if not inner:
            out[outer] = value
        elif isinstance(out.get(outer), dict):
            out[outer] = {**out[outer], inner: value}
    return out


def _seed(key: str, case) -> None:
    """The seeded values of the case's positive parts, most of the time. Applied as the case is
    sent rather than to the generation strategies, so that every phase gets them (the coverage
    phase does not draw from the strategies) and no negative part loses what it was made to
    break."""
    # A generated X-Project is a negative header the configured one replaces on the wire: the
    # case stays as generated, so that the server's answer is not a seeded success.
    if (case.headers or {}).get("X-Project", _PROJECT) != _PROJECT:
        return
    path = _SEEDS["path"].get(key)
    if path and case.path_parameters is not None and _positive(case, "path") and _mostly(case, "path"):
        case.path_parameters.update({k: str(v) for k, v in path.items()})
    query = _SEEDS["query"].get(key)
    # The stateful phase takes a DELETE's success to mean that what the GET at the same path
    # answers is gone; `DELETE .../files` deletes the file its query names, and the listing
    # `GET .../files` stays: so the file is deleted only in the other phases.
    if key == "DELETE /api/sessions/{session_id}/files" and _phase(case) == "stateful":
        query = None
    if query and _positive(case, "query") and _mostly(case, "query"):
        case.query = {**(case.query or {}), **query}
    if not isinstance(case.body, dict) or not _positive(case, "body") or not _mostly(case, "body"):
        return
    if key in _SEEDS["body"]:
        case.body = _with(case.body, _SEEDS["body"][key])


def _phase(case) -> str | None:
    phase = getattr(case.meta, "phase", None)
    name = getattr(phase, "name", None)
    return getattr(name, "value", name)


def _seed_always(key: str, case) -> None:
    """The seeds every fully valid body gets (`body_fields_always` in run.py says why)."""
    if key in _SEEDS["body_always"] and isinstance(case.body, dict) and _positive(case, "body"):
        case.body = _with(case.body, _SEEDS["body_always"][key])


def _integral(value):
    """`value` with every integral float (`2011.0`) as an integer (`2011`). JSON Schema counts
    2011.0 as an integer, so the fuzz generates it where the document says integer; the server
    (serde's typed integers) refuses it with a 422, and we keep it so: a client writes an
    integer without a fraction (Python's json and JSON.stringify alike, and every client we
    publish), so accepting a fraction of zero would only widen what a port, a version or a
    limit may look like on the wire, for no client. A JSON Schema cannot say "no fraction",
    so the document cannot steer the fuzz away from it: valid cases are sent as a client would
    send them. A negative case keeps its floats (an `1.5` for a port is still fuzzed)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


@schemathesis.hook
def before_call(context, case, kwargs):
    key = _key(context)
    _seed(key or "", case)
    _seed_always(key or "", case)
    if case.media_type == "application/json" and isinstance(case.body, (dict, list)) and _positive(case, "body"):
        integral = _integral(case.body)
        # Assigned only when it differs: schemathesis revalidates a body the hook changed.
        if integral != case.body:
            case.body = integral
    _fill_in(key, case)
    if key == "PATCH /api/projects/{ref}":
        # Every phase (the coverage phase sends bodies no strategy drew, so `map_body` would
        # miss them), negative cases too: only values the server accepts are changed.
        lifted = _lifted_limits(case.body)
        if lifted != case.body:
            case.body = lifted
    if key == "POST /api/skill-bundles/{slug}/versions" and _positive(case, "body") and _mostly(case, "body"):
        kwargs["files"] = _skills_archive_part()
    if key not in _DESTRUCTIVE or not case.path_parameters:
        return
    if any(str(value) in _PROTECTED for value in case.path_parameters.values()):
        case.path_parameters.update(_SEEDS["path"][key])


# `GitKeyTestRequest.host`'s pattern, with its parts named.
_GIT_HOST = re.compile(
    r"^(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*@)?(?P<name>[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:]+\])"
    r"(:[0-9]+)?$"
)


#: An exec's own limit when it names none (`DEFAULT_TIMEOUT_SECS`); the most a fuzzed exec may
#: run, which schemathesis.toml's request timeout for exec covers.
_EXEC_DEFAULT = 60
#: The most an exec may ask for; more is refused at once (and still fuzzed).
_EXEC_MAX = 600


@schemathesis.hook
def map_body(context, body):
    key = _key(context)
    if key == "POST /api/sessions/{session_id}/exec":
        return _bounded_exec(body)
    if key != "POST /api/git-keys/{key_id}/test" or not isinstance(body, dict):
        return body
    host = body.get("host")
    match = _GIT_HOST.match(host) if isinstance(host, str) else None
    if match is None:
        return body
    return {**body, "host": f"{match['user'] or ''}127.0.0.1"}


#: Each project limit's ceiling (`ProjectLimits` in openapi.json): what a fuzzed limit the
#: server accepts is raised to.
_LIMIT_CEILINGS = {
    "monthly_cost_usd": 1_000_000,
    "max_sandboxes": 1_000_000,
    "max_runs": 1_000_000,
    "requests_per_minute": 1_000_000,
}


def _lifted_limits(body):
    """A PATCH's `limits` with every accepted value at its ceiling (see the module's comment)."""
    if not isinstance(body, dict) or not isinstance(body.get("limits"), dict):
        return body
    limits = dict(body["limits"])
    for name, ceiling in _LIMIT_CEILINGS.items():
        value = limits.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= ceiling:
            limits[name] = ceiling
    return {**body, "limits": limits}


def _bounded_exec(body):
    """An exec runs its command to its end, up to its timeout: a command seen in an answer
    (`sleep 3600`, the seeded background process's) would hold a case for up to 600 s. A
    timeout the server accepts is lowered to the default 60 s; a refused one is kept."""
    if not isinstance(body, dict):
        return body
    timeout = body.get("timeout")
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and _EXEC_DEFAULT < timeout <= _EXEC_MAX:
        return {**body, "timeout": _EXEC_DEFAULT}
    return body


def _fill_in(key, case) -> None:
    """Values only the server can give, fetched as the case is sent (see the module's comment)."""
    body = case.body if isinstance(case.body, dict) else {}
    if key == "POST /api/sessions/{session_id}/tool-results" and body.get("call_id") == _SEEDS["pending_call"]:
        session = case.path_parameters.get("session_id") if case.path_parameters else None
        calls = _API.get(f"/api/sessions/{session}/tool-calls")
        if calls.status_code == 200 and calls.json():
            body["call_id"] = calls.json()[0]["call_id"]
    elif key == "POST /api/auth/recovery" and body.get("code") == _SEEDS["fresh_recovery_code"]:
        minted = _API.post(f"/api/users/{_SEEDS['person']}/recovery")
        if minted.status_code < 300:
            body["code"] = minted.json()["recovery_code"]
    elif body.get("version") == _SEEDS["current_version"]:
        # The version the edited resource has now (an agent, or its memory): another is a 409.
        # An agent that is not there keeps 0, and answers its 404.
        ref = case.path_parameters.get("ref") if case.path_parameters else None
        path = f"/api/agents/{ref}/memory" if key == "PUT /api/agents/{ref}/memory" else f"/api/agents/{ref}"
        current = _API.get(path)
        body["version"] = current.json().get("version", 0) if current.status_code == 200 else 0
    if (key == "DELETE /api/sessions/{session_id}/files" and case.query
            and case.query.get("path") == _SEEDS["workspace_doomed"]):
        session = case.path_parameters.get("session_id") if case.path_parameters else None
        _API.post(f"/api/sessions/{session}/files", params={"path": _SEEDS["workspace_doomed"]},
                  files={"file": ("doomed.txt", b"deleted by the fuzz\n", "text/plain")})


def _skills_archive_part() -> list:
    """The multipart part of a push of a readable archive: a generated `file` is an image or
    noise (a 400), so a fully valid case never reaches the push itself. Given to the transport
    (its `files`) rather than put into the case: schemathesis revalidates a body the hook
    changed, and a body holding bytes never validates, so the case would become a negative one
    that the push then accepts (a false "schema-violating request accepted")."""
    return [("file", ("skills.tar.gz", skills_archive(), "application/gzip"))]


