"""What a command from sqlsaber-sandbox asks the controller to do, read off its text.

sqlsaber-sandbox talks to its in-sandbox controller through one short-lived bridge process per
request: `<python> <root>/controller.py call <root> <base64 JSON>`, where the JSON is
`{"operation": ..., ...}` (sqlsaber_sandbox/execution.py, `KernelExecution.request`). Every
command it sends may be repeated after a lost answer (`mkdir -p`, the package check, `ping`,
`status`, `workspace`, `interrupt`, `release_export`, and `execute`, which the controller
de-duplicates by execution id and code digest) except `export`, which copies the run
directory again and would leave the first copy behind.
"""
from __future__ import annotations

import base64
import binascii
import json
import shlex

#: Operations that change state on every delivery: never sent twice.
UNREPEATABLE_OPERATIONS = frozenset({"export"})


def controller_operation(command: str) -> str | None:
    """The operation of a controller bridge command, `"?"` for a bridge command whose request
    cannot be read, and None for any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for index, word in enumerate(words[:-3]):
        if word.endswith("/controller.py") and words[index + 1] == "call":
            encoded = words[index + 3]
            try:
                request = json.loads(base64.b64decode(encoded, validate=True))
            except (binascii.Error, ValueError):
                return "?"
            operation = request.get("operation") if isinstance(request, dict) else None
            return operation if isinstance(operation, str) else "?"
    return None


def may_repeat(command: str) -> bool:
    """Whether sending `command` again after an answer was lost can do no harm.

    A bridge command whose request cannot be read is treated as unrepeatable: only what is
    known to be safe is repeated."""
    operation = controller_operation(command)
    return operation is None or (operation != "?" and operation not in UNREPEATABLE_OPERATIONS)
