"""A pytest plugin: a failing test's report carries what each server (`harness.ServerProcess`)
logged while it ran. Registered by the contract suite's and tests/sqlsaber's conftests
(`pytest_plugins = ["server_logs"]`).
"""
from __future__ import annotations

import pytest

import harness


def pytest_runtest_setup(item):
    # Where each server log ends now: a failing test shows only what was written during it.
    item._sa_log_offsets = {id(p): _log_size(p) for p in harness.ServerProcess.instances}


def _log_size(process: harness.ServerProcess) -> int:
    try:
        return process.log_path.stat().st_size
    except FileNotFoundError:
        return 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    offsets = getattr(item, "_sa_log_offsets", {})
    for process in harness.ServerProcess.instances:
        try:
            with open(process.log_path, "rb") as log:
                log.seek(offsets.get(id(process), 0))
                text = log.read().decode(errors="replace")
        except FileNotFoundError:
            continue
        text = harness.strip_ansi(text).strip()
        if text:
            tail = "\n".join(text.splitlines()[-150:])
            report.sections.append((f"{process.name} log ({process.log_path})", tail))
