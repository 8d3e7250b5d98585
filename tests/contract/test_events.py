"""The event log (pages after a cursor, in `seq` order) and its SSE stream (the backlog after
the cursor, then live events, heartbeats during silence), read through the client's
`history()`, `events()` and `stream()`.

Sessions and events are seeded straight into PostgreSQL (see seed.py): `POST /api/sessions`
needs the Docker sandbox, which does not exist yet. Appends are done the way the server does
them (row lock, insert, pg_notify, commit), so live streams see them.
"""
from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx
import pytest
import sandbox_agents
from sandbox_agents import NotFoundError, UnprocessableEntityError

import seed
from streams import StreamCollector


def stop_marker(token: str) -> dict:
    """A real terminal event that a collector can recognise as "stop reading here"."""
    return {
        "type": "session.status_idle",
        "run_id": str(uuid.uuid4()),
        "payload": {"final_output": token, "stop_reason": "end_turn", "run_status": "completed"},
    }


def is_marker(token: str):
    return lambda event: event.type == "session.status_idle" and event.payload.get("final_output") == token


def as_tuples(events):
    return [(e.seq, e.type, e.run_id, e.payload) for e in events]


def expected_tuples(seqs, batch):
    return [(s, e["type"], e.get("run_id"), e["payload"]) for s, e in zip(seqs, batch)]


@pytest.fixture
def agent(client, new_slug):
    return client.agents.create(slug=new_slug("events"), name="Event source")


@pytest.fixture
def session_id(server, agent):
    return seed.create_session(server.data_dir, agent.id, title="event log")


@pytest.fixture(scope="module")
def big_session(server):
    """A session with 2500 stored events (more than two full pages). Read-only for its users."""
    with sandbox_agents.Client(base_url=server.base_url) as c:
        agent = c.agents.create(slug=f"big-{uuid.uuid4().hex[:10]}", name="Big log")
    sid = seed.create_session(server.data_dir, agent.id, title="2500 events")
    batch = seed.conversation(2500, tag="big")
    seqs = seed.append_events(server.data_dir, sid, batch)
    assert len(seqs) == 2500
    return sid, seqs, batch


# -- GET .../events and history() ----------------------------------------------


def test_history_returns_all_2500_events_in_order(client, big_session):
    sid, seqs, batch = big_session
    history = list(client.sessions.history(sid))
    got = [e.seq for e in history]
    assert len(got) == 2500, f"history() returned {len(got)} of 2500 events"
    assert len(set(got)) == len(got), "history() returned duplicates"
    assert got == sorted(got), "history() is not in ascending seq order"
    assert got == seqs
    assert as_tuples(history) == expected_tuples(seqs, batch)
    assert all(e.session_id == sid for e in history)
    assert client.sessions.cursor(sid) == seqs[-1]


def test_full_pages_of_1000(client, big_session):
    sid, seqs, _ = big_session
    first = client.sessions.events(sid, limit=1000)
    assert [e.seq for e in first] == seqs[:1000], "a page of limit=1000 must be full when 1000 events follow"
    second = client.sessions.events(sid, after=first[-1].seq, limit=1000)
    assert [e.seq for e in second] == seqs[1000:2000]
    third = client.sessions.events(sid, after=second[-1].seq, limit=1000)
    assert [e.seq for e in third] == seqs[2000:]
    assert client.sessions.events(sid, after=third[-1].seq, limit=1000) == []
    # Default limit (500) from the middle of the log.
    middle = client.sessions.events(sid, after=seqs[99])
    assert [e.seq for e in middle] == seqs[100:600]


def test_events_paging_semantics(client, raw, server, session_id):
    batch = seed.conversation(10, tag="page")
    seqs = seed.append_events(server.data_dir, session_id, batch)

    assert [e.seq for e in client.sessions.events(session_id)] == seqs
    assert [e.seq for e in client.sessions.events(session_id, after=0)] == seqs
    # `after` is exclusive.
    assert [e.seq for e in client.sessions.events(session_id, after=seqs[3], limit=3)] == seqs[4:7]
    assert [e.seq for e in client.sessions.events(session_id, after=seqs[0], limit=1)] == [seqs[1]]
    assert [e.seq for e in client.sessions.events(session_id, limit=1)] == [seqs[0]]
    # At and beyond the end: an empty page.
    assert client.sessions.events(session_id, after=seqs[-1]) == []
    assert client.sessions.events(session_id, after=seqs[-1] + 1_000_000) == []

    ok = raw.get(f"/api/sessions/{session_id}/events", params={"limit": 1000})
    assert ok.status_code == 200
    assert [e["seq"] for e in ok.json()] == seqs

    for bad in (1001, 0, -1):
        response = raw.get(f"/api/sessions/{session_id}/events", params={"limit": bad})
        assert response.status_code == 422, f"limit={bad} answered {response.status_code}"
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail
        assert any("limit" in err.get("loc", []) for err in detail), detail
    with pytest.raises(UnprocessableEntityError):
        client.sessions.events(session_id, limit=1001)


def test_event_json_shape(raw, server, session_id):
    run_id = str(uuid.uuid4())
    batch = [
        {"type": "user.message", "run_id": run_id, "payload": {"text": "héllo \"world\"\nline two"}},
        {"type": "session.status_stopped", "payload": {"reason": "requested"}},
        {"type": "agent.tool_use", "run_id": run_id, "payload": {"tool": "shell", "arguments": '{"cmd": "ls"}', "nested": {"a": [1, None, True]}}},
    ]
    seqs = seed.append_events(server.data_dir, session_id, batch)
    response = raw.get(f"/api/sessions/{session_id}/events")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert [e["seq"] for e in body] == seqs
    for event, sent in zip(body, batch):
        assert isinstance(event["seq"], int) and event["seq"] > 0
        assert event["session_id"] == session_id
        assert event["run_id"] == sent.get("run_id")
        assert event["type"] == sent["type"]
        assert event["payload"] == sent["payload"]
        created = datetime.fromisoformat(event["created_at"].replace("Z", "+00:00"))
        assert created.utcoffset() is not None, f"created_at has no timezone: {event['created_at']}"


def test_logs_are_per_session(client, server, agent):
    first = seed.create_session(server.data_dir, agent.id)
    second = seed.create_session(server.data_dir, agent.id)
    a1 = seed.append_events(server.data_dir, first, seed.messages(3, tag="first"))
    b1 = seed.append_events(server.data_dir, second, seed.messages(2, tag="second"))
    a2 = seed.append_events(server.data_dir, first, seed.messages(2, tag="first-again"))
    assert [e.seq for e in client.sessions.history(first)] == a1 + a2
    assert [e.seq for e in client.sessions.history(second)] == b1
    # A cursor from another session's numbering still means "seq greater than".
    assert [e.seq for e in client.sessions.events(first, after=b1[-1])] == a2


def test_unknown_session_is_not_found(client):
    missing = str(uuid.uuid4())
    with pytest.raises(NotFoundError):
        client.sessions.events(missing)
    with pytest.raises(NotFoundError):
        list(client.sessions.history(missing))
    with pytest.raises(NotFoundError):
        next(iter(client.sessions.stream(missing)))


# -- the SSE stream ---------------------------------------------------------------


def test_stream_replays_then_follows_live_then_resumes(client, server, session_id):
    data_dir = server.data_dir
    backlog = seed.conversation(6, tag="backlog")
    backlog_seqs = seed.append_events(data_dir, session_id, backlog)
    cursor = backlog_seqs[2]

    # 1. From a cursor: the stored events after it, then live ones, in order, nothing twice.
    with StreamCollector(server.base_url, session_id, after=cursor, until=is_marker("stop-1")) as reader:
        replayed = reader.wait_for(3)
        assert [e.seq for e in replayed] == backlog_seqs[3:], "the backlog after the cursor, exactly"

        live_batches = [seed.messages(1, tag="live-a"), seed.messages(3, tag="live-b"), seed.messages(2, tag="live-c")]
        live_seqs: list[int] = []
        live_events: list[dict] = []
        for batch in live_batches:  # separate transactions, separate notifications
            live_seqs += seed.append_events(data_dir, session_id, batch)
            live_events += batch
        marker = stop_marker("stop-1")
        marker_seq = seed.append_events(data_dir, session_id, [marker])[0]

        seen = reader.join()
        assert reader.outcome == "until", f"the stream ended early: {reader.outcome} {reader.error!r}"
    assert as_tuples(seen) == (
        expected_tuples(backlog_seqs[3:], backlog[3:])
        + expected_tuples(live_seqs, live_events)
        + expected_tuples([marker_seq], [marker])
    )
    assert all(e.session_id == session_id for e in seen)

    # 2. Written while nobody was connected, then resumed from the last seq seen.
    last_seen = seen[-1].seq
    offline = seed.messages(2, tag="offline")
    offline_seqs = seed.append_events(data_dir, session_id, offline)
    with StreamCollector(server.base_url, session_id, after=last_seen, until=is_marker("stop-2")) as reader:
        assert [e.seq for e in reader.wait_for(2)] == offline_seqs
        more = seed.messages(3, tag="after-resume")
        more_seqs = seed.append_events(data_dir, session_id, more)
        marker2 = stop_marker("stop-2")
        marker2_seq = seed.append_events(data_dir, session_id, [marker2])[0]
        resumed = reader.join()
        assert reader.outcome == "until", f"the stream ended early: {reader.outcome} {reader.error!r}"
    assert as_tuples(resumed) == (
        expected_tuples(offline_seqs, offline) + expected_tuples(more_seqs, more) + expected_tuples([marker2_seq], [marker2])
    )

    # 3. From the start (`after=0`, which the client sends as no cursor at all): everything,
    #    in the order history() gives.
    everything = [e.seq for e in client.sessions.history(session_id)]
    with StreamCollector(server.base_url, session_id, after=0, until=lambda e: e.seq == everything[-1]) as reader:
        from_start = reader.join()
        assert reader.outcome == "until", f"{reader.outcome} {reader.error!r}"
    assert [e.seq for e in from_start] == everything
    assert everything == backlog_seqs + live_seqs + [marker_seq] + offline_seqs + more_seqs + [marker2_seq]


def test_stream_backlog_longer_than_a_page(server, big_session):
    sid, seqs, _ = big_session
    cursor = seqs[10]
    with StreamCollector(server.base_url, sid, after=cursor, until=lambda e: e.seq == seqs[-1]) as reader:
        got = reader.join(timeout=30)
        assert reader.outcome == "until", f"{reader.outcome} {reader.error!r}"
    assert [e.seq for e in got] == seqs[11:]


def test_stream_delivers_a_concurrent_burst_in_seq_order(server, session_id):
    data_dir = server.data_dir
    first = seed.append_events(data_dir, session_id, seed.messages(1, tag="first"))
    with StreamCollector(server.base_url, session_id, until=is_marker("burst-done")) as reader:
        assert [e.seq for e in reader.wait_for(1)] == first

        def writer(w: int) -> list[int]:
            out: list[int] = []
            for t in range(10):
                out += seed.append_events(data_dir, session_id, seed.messages(10, tag=f"w{w}-t{t}"))
            return out

        with ThreadPoolExecutor(max_workers=3) as pool:
            written = [seq for seqs in pool.map(writer, range(3)) for seq in seqs]
        marker_seq = seed.append_events(data_dir, session_id, [stop_marker("burst-done")])[0]
        got = reader.join(timeout=30)
        assert reader.outcome == "until", f"{reader.outcome} {reader.error!r}"
    got_seqs = [e.seq for e in got]
    assert len(written) == 300
    assert len(set(got_seqs)) == len(got_seqs), "the stream repeated events"
    assert got_seqs == first + sorted(written) + [marker_seq], "every event once, in ascending seq order"


def test_sse_frames_carry_id_event_and_data(server, session_id):
    batch = seed.conversation(3, tag="wire")
    seqs = seed.append_events(server.data_dir, session_id, batch)
    url = f"{server.base_url}/api/sessions/{session_id}/events/stream"
    timeout = httpx.Timeout(10.0, read=20.0)

    def frames(params):
        """The first two data frames, as {field: value} dicts, read line by line."""
        out: list[dict] = []
        with httpx.stream("GET", url, params=params, headers={"Accept": "text/event-stream"}, timeout=timeout) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            current: dict[str, str] = {}
            for line in response.iter_lines():
                if line.startswith(":"):
                    continue
                if line == "":
                    if "data" in current:
                        out.append(current)
                        if len(out) == 2:
                            return out
                    current = {}
                    continue
                name, _, value = line.partition(":")
                current[name] = value[1:] if value.startswith(" ") else value
        raise AssertionError(f"the stream ended after {len(out)} frames")

    for params, expected in (({"after": 0}, seqs[:2]), ({"after": seqs[0]}, seqs[1:3])):
        got = frames(params)
        for frame, seq in zip(got, expected):
            assert frame.get("id") == str(seq), f"frame without `id: {seq}`: {frame}"
            data = json.loads(frame["data"])
            assert data["seq"] == seq
            assert data["session_id"] == session_id
            assert frame.get("event") == data["type"], f"`event:` should name the type: {frame}"
            assert isinstance(data["payload"], dict)


def test_heartbeat_comment_during_silence(server, session_id):
    """A stream writes `: ping` after 15 s without a frame, well inside the client's 60 s read
    timeout."""
    seqs = seed.append_events(server.data_dir, session_id, seed.messages(1, tag="before-silence"))
    url = f"{server.base_url}/api/sessions/{session_id}/events/stream"
    with httpx.stream(
        "GET", url, headers={"Accept": "text/event-stream"}, timeout=httpx.Timeout(10.0, read=25.0)
    ) as response:
        assert response.status_code == 200
        saw_event = False
        silence_started = None
        for line in response.iter_lines():
            if line.startswith("id:"):
                assert line.partition(":")[2].strip() == str(seqs[0])
                saw_event = True
            elif line == "" and saw_event and silence_started is None:
                silence_started = time.monotonic()
            elif line.startswith(":"):
                assert saw_event and silence_started is not None, "a ping before the backlog was sent"
                assert line[1:].strip() == "ping", f"heartbeat comment {line!r}"
                waited = time.monotonic() - silence_started
                assert waited < 20.0, f"the first heartbeat came after {waited:.1f}s of silence"
                return
        raise AssertionError("the stream ended instead of sending a heartbeat")
