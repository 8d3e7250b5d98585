"""Schemathesis hooks of the API fuzz (tests/schemathesis/run.py writes the seeds they read).

* Path parameters: most valid cases name the resource `run.py` seeded for the operation (so
  they reach the handler's real work instead of its 404), the rest keep the generated value
  (so unknown and malformed ids are fuzzed too). Seeds go into a case as it is sent, and only
  into its parts generated to be valid.
* Body fields that name another resource (a session's `agent_id`, a webhook's), and query
  parameters that name a seeded file: the same. A body field named `a.b` is `b` inside `a`,
  set when the generated `a` is an object.
* Values only the server can give are fetched when the case is sent: the client tool call
  waiting now (`POST .../tool-results`), a fresh recovery code (`POST /api/auth/recovery`).
* An operation that deletes, archives, stops or restores never acts on a seeded resource the
  rest of the run needs, even one schemathesis saw in an answer and tries as a value: it gets
  the spare instead.
* A git key's test reaches 127.0.0.1 instead of the generated host: the probe waits up to
  30 s for a connection (100 s in all) by design, and a generated host may be an address that
  never answers (or a port of this machine that never speaks). The host's syntax is still
  fuzzed: only a host the schema accepts (which the server checks no less strictly) is
  redirected, to port 22, its user kept.
"""
from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import httpx
import schemathesis


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
    if query and _positive(case, "query") and _mostly(case, "query"):
        case.query = {**(case.query or {}), **query}
    if not isinstance(case.body, dict) or not _positive(case, "body") or not _mostly(case, "body"):
        return
    if key in _SEEDS["body"]:
        case.body = _with(case.body, _SEEDS["body"][key])


@schemathesis.hook
def before_call(context, case, kwargs):
    key = _key(context)
    _seed(key or "", case)
    _fill_in(key, case)
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
