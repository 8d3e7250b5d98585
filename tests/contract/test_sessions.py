"""Sessions without their sandboxes: the paged list with `X-Total-Count`, the detail with its
agent, and PATCH with merged metadata.

Session rows are seeded in PostgreSQL (see seed.py): `POST /api/sessions` needs the sandbox.
"""
from __future__ import annotations

import uuid

import pytest
from sandbox_agents import NotFoundError, UnprocessableEntityError

import seed


@pytest.fixture
def agent(client, new_slug):
    return client.agents.create(slug=new_slug("sessions"), name="Session owner", model="gpt-5.4")


@pytest.fixture
def three_sessions(server, agent):
    """Three running sessions of `agent`, oldest first (created 30 s, 20 s and 10 s ago)."""
    return [
        seed.create_session(server.data_dir, agent.id, title=f"session {age}", age_seconds=age)
        for age in (30, 20, 10)
    ]


def test_list_is_newest_first_with_x_total_count(raw, agent, three_sessions):
    oldest, middle, newest = three_sessions
    first = raw.get("/api/sessions", params={"agent_id": agent.id, "limit": 2, "offset": 0})
    assert first.status_code == 200
    assert first.headers.get("x-total-count") == "3", f"X-Total-Count: {first.headers.get('x-total-count')!r}"
    assert [s["id"] for s in first.json()] == [newest, middle]

    second = raw.get("/api/sessions", params={"agent_id": agent.id, "limit": 2, "offset": 2})
    assert second.status_code == 200
    assert second.headers.get("x-total-count") == "3"
    assert [s["id"] for s in second.json()] == [oldest]

    unfiltered = raw.get("/api/sessions", params={"limit": 1, "offset": 0})
    assert unfiltered.status_code == 200
    assert len(unfiltered.json()) == 1
    assert int(unfiltered.headers["x-total-count"]) >= 3


def test_client_pages_sessions(client, agent, three_sessions):
    oldest, middle, newest = three_sessions
    page = client.sessions.list(agent_id=agent.id, limit=2)
    assert [s.id for s in page.items] == [newest, middle]
    assert page.total == 3
    assert page.has_more
    assert page.next_offset == 2

    rest = client.sessions.list(agent_id=agent.id, limit=2, offset=2)
    assert [s.id for s in rest.items] == [oldest]
    assert rest.total == 3
    assert not rest.has_more

    assert [s.id for s in client.sessions.iterate(agent_id=agent.id, page_size=2)] == [newest, middle, oldest]
    listed = client.sessions.list(agent_id=agent.id)
    assert all(s.agent_id == agent.id for s in listed)
    assert [s.title for s in listed] == ["session 10", "session 20", "session 30"]


def test_list_filters_by_status(client, server, agent, three_sessions):
    stopped = seed.create_session(
        server.data_dir, agent.id, title="stopped one", status="stopped", stopped_reason="requested"
    )
    page = client.sessions.list(agent_id=agent.id, status="stopped")
    assert [s.id for s in page.items] == [stopped]
    assert page.total == 1
    assert page.items[0].status == "stopped"
    assert page.items[0].stopped_reason == "requested"

    running = client.sessions.list(agent_id=agent.id, status="running")
    assert {s.id for s in running.items} == set(three_sessions)
    assert running.total == 3
    assert client.sessions.list(agent_id=agent.id, status="error").total == 0
    assert client.sessions.list(agent_id=agent.id).total == 4


def test_list_filter_by_other_agent_excludes_these(client, new_slug, three_sessions):
    other = client.agents.create(slug=new_slug("other"), name="Other")
    page = client.sessions.list(agent_id=other.id)
    assert page.items == []
    assert page.total == 0


def test_detail_carries_the_agent(client, server, agent):
    sid = seed.create_session(server.data_dir, agent.id, title="detailed", metadata={"team": "risk"})
    detail = client.sessions.get(sid)
    assert detail.id == sid
    assert detail.agent_id == agent.id
    assert detail.title == "detailed"
    assert detail.status == "running"
    assert detail.activity == "idle"
    assert detail.metadata == {"team": "risk"}
    assert detail.agent is not None, "SessionDetail.agent is the agent the session resolves"
    assert detail.agent.id == agent.id
    assert detail.agent.slug == agent.slug
    assert detail.agent.model == "gpt-5.4"
    assert detail.runs == []
    assert isinstance(detail.sandbox_seconds, float) and detail.sandbox_seconds >= 0
    assert detail.created_at is not None and detail.created_at.utcoffset() is not None


def test_detail_still_resolves_an_archived_agent(client, server, agent):
    sid = seed.create_session(server.data_dir, agent.id)
    client.agents.archive(agent.id)
    detail = client.sessions.get(sid)
    assert detail.agent is not None and detail.agent.id == agent.id
    assert detail.agent.archived_at is not None


def test_unknown_session_is_not_found(client, raw):
    with pytest.raises(NotFoundError):
        client.sessions.get(str(uuid.uuid4()))
    with pytest.raises(NotFoundError):
        client.sessions.update(str(uuid.uuid4()), title="x")
    response = raw.get("/api/sessions/not-a-session-id")
    assert response.status_code == 404, "an unknown id is a 404 whatever its shape"
    assert isinstance(response.json().get("detail"), str)


def test_update_merges_metadata_and_null_deletes(client, server, agent):
    sid = seed.create_session(server.data_dir, agent.id, title="tagged", metadata={"keep": "me", "drop": 1})

    updated = client.sessions.update(sid, metadata={"surface": "copilot", "nested": {"a": [1, 2]}, "drop": None})
    assert updated.id == sid
    assert updated.metadata == {"keep": "me", "surface": "copilot", "nested": {"a": [1, 2]}}
    assert updated.title == "tagged", "title was not passed, so it is unchanged"

    updated = client.sessions.update(sid, metadata={"surface": "api", "count": 3, "flag": False})
    assert updated.metadata == {"keep": "me", "surface": "api", "nested": {"a": [1, 2]}, "count": 3, "flag": False}

    retitled = client.sessions.update(sid, title="renamed")
    assert retitled.title == "renamed"
    assert retitled.metadata == updated.metadata, "metadata was not passed, so it is unchanged"

    # Removing a key that is not there is harmless.
    cleared = client.sessions.update(sid, metadata={"never-set": None, "keep": None})
    assert cleared.metadata == {"surface": "api", "nested": {"a": [1, 2]}, "count": 3, "flag": False}

    detail = client.sessions.get(sid)
    assert detail.title == "renamed"
    assert detail.metadata == cleared.metadata


def test_update_title_null_is_422(client, server, agent):
    sid = seed.create_session(server.data_dir, agent.id, title="kept")
    with pytest.raises(UnprocessableEntityError) as info:
        client.sessions.update(sid, title=None)
    detail = info.value.body["detail"]
    assert isinstance(detail, list) and any("title" in err.get("loc", []) for err in detail), detail
    assert client.sessions.get(sid).title == "kept"
