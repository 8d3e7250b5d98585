"""Seeding sessions and events straight into the server's embedded PostgreSQL.

`POST /api/sessions` needs the Docker sandbox, which the server does not have yet, so the
event-log tests write the rows themselves with `psql` over the cluster's unix socket
(`<data-dir>/postgres/run`). Events are appended **exactly as the server appends them**, so a
live stream sees them: in one transaction, lock the session row (the `update ... last_event_at`),
insert the batch (drawing seqs from the identity), `pg_notify('sa_events', {"s": <session>,
"q": <max seq>})`, commit. Postgres delivers the notification only after the commit, which
is what the server's live fan-out relies on.

Schema: migrations/20261129000001_foundation.sql.
"""
from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: The project every deployment starts with (created by the first migration).
DEFAULT_PROJECT_ID = "00000000-0000-7000-8000-000000000001"


def dsn(data_dir: str | Path) -> str:
    socket_dir = Path(data_dir).resolve() / "postgres" / "run"
    return f"host={socket_dir} user=sandbox_agents dbname=sandbox_agents connect_timeout=10"


def psql(data_dir: str | Path, sql: str, *, timeout: float = 60.0) -> str:
    """Runs `sql` (read from stdin, so it may hold several statements) and returns the
    unaligned, tuples-only output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    result = subprocess.run(
        ["psql", dsn(data_dir), "-v", "ON_ERROR_STOP=1", "-X", "-q", "-A", "-t", "-f", "-"],
        input=sql,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"psql failed ({result.returncode}): {result.stderr.strip()}\n--- sql ---\n{sql[:2000]}"
        )
    return result.stdout


def lit(value: str) -> str:
    """A SQL string literal (standard_conforming_strings is on: only quotes need doubling)."""
    return "'" + value.replace("'", "''") + "'"


def jsonb(value: Any) -> str:
    return f"{lit(json.dumps(value))}::jsonb"


def create_session(
    data_dir: str | Path,
    agent_id: str,
    *,
    title: str = "",
    status: str = "running",
    stopped_reason: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    age_seconds: float = 0.0,
    project_id: str = DEFAULT_PROJECT_ID,
) -> str:
    """Inserts a session row for `agent_id` (an agent **id**) and returns its id.

    `age_seconds` back-dates `created_at`, so that tests can control "newest first".
    """
    session_id = str(uuid.uuid4())
    backend = "docker" if status == "running" else ""
    psql(
        data_dir,
        "insert into sessions (id, project_id, agent_id, title, status, stopped_reason, backend, metadata, "
        "created_at, updated_at) "
        f"values ({lit(session_id)}, {lit(project_id)}, {lit(agent_id)}, {lit(title)}, {lit(status)}, "
        f"{lit(stopped_reason) if stopped_reason else 'null'}, "
        f"{lit(backend)}, {jsonb(dict(metadata or {}))}, "
        f"now() - make_interval(secs => {float(age_seconds)}), now() - make_interval(secs => {float(age_seconds)}));",
    )
    return session_id


def append_events(data_dir: str | Path, session_id: str, events: Iterable[Mapping[str, Any]]) -> list[int]:
    """Appends `events` (dicts with `type`, `payload` and optionally `run_id`) to the session's
    log in one transaction, as the server does, and returns their seqs in order."""
    rows = []
    for event in events:
        run_id = event.get("run_id")
        rows.append(
            f"({lit(session_id)}, {lit(run_id) + '::uuid' if run_id else 'null'}, "
            f"{lit(event['type'])}, {jsonb(dict(event.get('payload') or {}))})"
        )
    if not rows:
        return []
    sid = lit(session_id)
    sql = (
        "begin;\n"
        f"update sessions set last_event_at = now() where id = {sid};\n"
        "with ins as (\n"
        "  insert into events (session_id, run_id, type, payload) values\n  "
        + ",\n  ".join(rows)
        + "\n  returning seq\n"
        "), notified as (\n"
        f"  select pg_notify('sa_events', json_build_object('s', {sid}, 'q', (select max(seq) from ins))::text)\n"
        ")\n"
        "select ins.seq from ins, notified order by ins.seq;\n"
        "commit;\n"
    )
    out = psql(data_dir, sql)
    seqs = [int(line) for line in out.split() if line.strip()]
    if len(seqs) != len(rows):
        raise RuntimeError(f"expected {len(rows)} seqs from the insert, psql printed: {out[:500]!r}")
    return seqs


# -- realistic event batches --


def turn(prompt: str, answer: str, *, run_id: str | None = None) -> list[dict[str, Any]]:
    """The stored events of one completed turn: user.message, agent.message, session.status_idle."""
    run_id = run_id or str(uuid.uuid4())
    return [
        {"type": "user.message", "run_id": run_id, "payload": {"text": prompt}},
        {"type": "agent.message", "run_id": run_id, "payload": {"text": answer}},
        {
            "type": "session.status_idle",
            "run_id": run_id,
            "payload": {
                "final_output": answer,
                "stop_reason": "end_turn",
                "run_status": "completed",
                "turns": 1,
            },
        },
    ]


def conversation(count: int, *, tag: str = "m") -> list[dict[str, Any]]:
    """`count` stored events made of whole turns (the last one cut short if needed), each text
    unique (`<tag>-<index>`) so that a test can tell any two apart."""
    events: list[dict[str, Any]] = []
    i = 0
    while len(events) < count:
        events.extend(turn(f"{tag}-{i} question", f"{tag}-{i} answer"))
        i += 1
    return events[:count]


def messages(count: int, *, tag: str = "m", run_id: str | None = None) -> list[dict[str, Any]]:
    """`count` agent.message events with unique texts."""
    run_id = run_id or str(uuid.uuid4())
    return [{"type": "agent.message", "run_id": run_id, "payload": {"text": f"{tag}-{i}"}} for i in range(count)]
