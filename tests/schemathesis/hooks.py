"""Schemathesis hooks of the API fuzz (tests/schemathesis/run.py writes the seeds they read).

* Path parameters: most cases name the resource `run.py` seeded for the operation (so they
  reach the handler's real work instead of its 404), the rest keep the generated value (so
  unknown and malformed ids are fuzzed too).
* Body fields that name another resource (a session's `agent_id`, a webhook's): the same.
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
import re
from pathlib import Path

import schemathesis
from hypothesis import strategies as st

_SEEDS = json.loads(Path(os.environ["SA_FUZZ_SEEDS"]).read_text())
_DESTRUCTIVE = frozenset(_SEEDS["destructive"])
_PROTECTED = frozenset(_SEEDS["protected"])


def _key(context) -> str | None:
    operation = context.operation
    if operation is None:
        return None
    return f"{operation.method.upper()} {operation.path}"


def _mostly(seeded, generated):
    """The seeded value three times in four; hypothesis shrinks toward it (the first choice)."""
    return st.sampled_from([seeded, seeded, seeded, generated])


@schemathesis.hook
def flatmap_path_parameters(context, path_parameters):
    seeded = _SEEDS["path"].get(_key(context) or "")
    if not seeded or path_parameters is None:
        return st.just(path_parameters)
    return _mostly({**path_parameters, **{k: str(v) for k, v in seeded.items()}}, path_parameters)


@schemathesis.hook
def flatmap_body(context, body):
    seeded = _SEEDS["body"].get(_key(context) or "")
    if not seeded or not isinstance(body, dict):
        return st.just(body)
    return _mostly({**body, **seeded}, body)


@schemathesis.hook
def before_call(context, case, kwargs):
    key = _key(context)
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
