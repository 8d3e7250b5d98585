"""Agents: the seven endpoints of `/api/agents`, driven through `client.agents`.

Contract points covered: what a minimal create fills in (a `null` model shown as the server's
default, empty tools and manifest), the optimistic lock (a PATCH naming a stale `version` is a
409), absent vs null on PATCH (absent keeps a field, null clears it), archive/unarchive, delete
and its 409 while a session refers to the agent, and 422 bodies shaped like FastAPI's
(`detail` a list of `{type, loc, msg, input}`).
"""
from __future__ import annotations

import uuid

import pytest
from sandbox_agents import ConflictError, NotFoundError, UnprocessableEntityError
from sandbox_agents.models import ClientTool, DirEntry, FileEntry

import seed

DEFAULT_MODEL = "gpt-5.4-mini"


def assert_aware(dt, what):
    assert dt is not None, f"{what} is missing"
    assert dt.tzinfo is not None and dt.utcoffset() is not None, f"{what} has no timezone: {dt!r}"


def assert_validation_error(exc: UnprocessableEntityError, field: str) -> None:
    """A FastAPI-style 422: `{"detail": [{"loc": [...], "msg": ..., ...}, ...]}`, with an
    error about `field`."""
    assert exc.status_code == 422
    assert isinstance(exc.body, dict), f"422 body is not a JSON object: {exc.body!r}"
    detail = exc.body.get("detail")
    assert isinstance(detail, list) and detail, f"422 detail must be a non-empty list, got {detail!r}"
    for error in detail:
        assert isinstance(error, dict), f"each 422 error must be an object: {error!r}"
        assert isinstance(error.get("loc"), list) and error["loc"], f"error without a loc: {error!r}"
        assert isinstance(error.get("msg"), str) and error["msg"], f"error without a msg: {error!r}"
    locs = [error["loc"] for error in detail]
    assert any(loc[0] == "body" and field in loc for loc in locs), (
        f"no error located at body/…/{field}: {locs!r}"
    )


# -- create ----------------------------------------------------------------


def test_create_minimal_fills_in_the_defaults(recorded, new_slug):
    client, recorder = recorded
    slug = new_slug("minimal")
    agent = client.agents.create(slug=slug, name="Minimal")

    ex = recorder.last("POST", "/api/agents")
    assert ex.status == 201, f"POST /api/agents answered {ex.status}; a create answers 201"

    assert isinstance(agent.id, str) and agent.id
    assert agent.id != slug
    assert agent.slug == slug
    assert agent.name == "Minimal"
    assert agent.description == ""
    assert agent.instructions == ""
    assert agent.transport == "proxy"
    assert agent.model == DEFAULT_MODEL, "a null model must resolve to the server default"
    assert agent.reasoning_effort is None
    assert agent.image is None
    assert agent.version == 1
    assert agent.manifest.model_dump() == {"entries": {}, "environment": {}}
    assert agent.exposed_ports == []
    assert agent.client_tools == []
    assert agent.secret_bindings == []
    assert agent.subagents == []
    assert agent.idle_ttl_seconds is None
    assert agent.archived_at is None
    assert_aware(agent.created_at, "created_at")
    assert_aware(agent.updated_at, "updated_at")


def test_create_with_full_manifest_and_client_tools_round_trips(client, new_slug):
    slug = new_slug("full")
    manifest = {
        "entries": {
            "README.md": {"kind": "file", "content": "# Hello\nIt's \"quoted\" and ünïcode ✓\n"},
            "output": {"kind": "dir"},
            "data/input.json": {"kind": "file", "content": '{"a": [1, 2]}'},
        },
        "environment": {"REPORT_DIR": "output", "EMPTY": ""},
    }
    lookup_params = {
        "type": "object",
        "properties": {"id": {"type": "string", "description": "account id"}},
        "required": ["id"],
    }
    tools = [
        ClientTool(name="lookup_account", description="Look an account up", parameters=lookup_params, timeout_seconds=30),
        ClientTool(name="ask_user", description="Ask a person", deferrable=True),
    ]
    created = client.agents.create(
        slug=slug,
        name="Full",
        description="An agent with everything",
        instructions="Write output/report.md",
        model="gpt-5.4",
        reasoning_effort="low",
        image="python:3.12-slim",
        capabilities=["shell", "filesystem"],
        manifest=manifest,
        exposed_ports=[8080, 3000],
        client_tools=tools,
        idle_ttl_seconds=600,
    )

    assert created.version == 1
    assert created.model == "gpt-5.4"
    assert created.reasoning_effort == "low"
    assert created.image == "python:3.12-slim"
    assert created.capabilities == ["shell", "filesystem"]
    # The contract does not say whether the order of ports is kept; their set is.
    assert sorted(created.exposed_ports) == [3000, 8080]
    assert created.idle_ttl_seconds == 600
    assert created.description == "An agent with everything"
    assert created.instructions == "Write output/report.md"

    entries = created.manifest.entries
    assert set(entries) == {"README.md", "output", "data/input.json"}
    assert isinstance(entries["README.md"], FileEntry)
    assert entries["README.md"].content == manifest["entries"]["README.md"]["content"]
    assert isinstance(entries["output"], DirEntry)
    assert entries["data/input.json"].content == '{"a": [1, 2]}'
    assert created.manifest.environment == {"REPORT_DIR": "output", "EMPTY": ""}

    by_name = {tool.name: tool for tool in created.client_tools}
    assert [tool.name for tool in created.client_tools] == ["lookup_account", "ask_user"]
    assert by_name["lookup_account"].parameters == lookup_params
    assert by_name["lookup_account"].description == "Look an account up"
    assert by_name["lookup_account"].deferrable is False
    assert by_name["lookup_account"].timeout_seconds == 30
    assert by_name["ask_user"].deferrable is True
    assert by_name["ask_user"].timeout_seconds is None
    assert by_name["ask_user"].parameters == {}

    # The same agent by id and by slug.
    by_id = client.agents.get(created.id)
    by_slug = client.agents.get(slug)
    assert by_id.model_dump() == created.model_dump()
    assert by_slug.model_dump() == created.model_dump()


def test_get_unknown_agent_is_not_found(client, new_slug):
    with pytest.raises(NotFoundError) as by_slug:
        client.agents.get(new_slug("missing"))
    assert isinstance(by_slug.value.detail, str) and by_slug.value.detail
    with pytest.raises(NotFoundError):
        client.agents.get(str(uuid.uuid4()))


def test_duplicate_slug_is_a_conflict(client, new_slug):
    slug = new_slug("dup")
    first = client.agents.create(slug=slug, name="First")
    with pytest.raises(ConflictError) as info:
        client.agents.create(slug=slug, name="Second")
    assert isinstance(info.value.detail, str) and info.value.detail
    assert client.agents.get(slug).model_dump() == first.model_dump()
    assert [a.id for a in client.agents.list(include_archived=True) if a.slug == slug] == [first.id]


def test_list_contains_created_agents(client, new_slug):
    slugs = {new_slug("listed") for _ in range(3)}
    ids = {client.agents.create(slug=s, name=s).id for s in slugs}
    listed = client.agents.list()
    assert ids <= {a.id for a in listed}
    assert all(a.archived_at is None for a in listed)


# -- update under the optimistic lock ----------------------------------------


def test_update_with_current_version_bumps_it(client, new_slug):
    slug = new_slug("upd")
    agent = client.agents.create(slug=slug, name="Before", instructions="keep me", description="old")
    updated = client.agents.update(agent.id, version=agent.version, name="After", description="new")
    assert updated.version == agent.version + 1
    assert updated.name == "After"
    assert updated.description == "new"
    assert updated.instructions == "keep me", "a field absent from the PATCH must stay unchanged"
    assert updated.slug == slug
    assert updated.id == agent.id

    # By slug, with the version just read.
    again = client.agents.update(slug, version=updated.version, instructions="changed")
    assert again.version == agent.version + 2
    assert again.instructions == "changed"
    assert again.name == "After"
    assert client.agents.get(agent.id).model_dump() == again.model_dump()


def test_update_with_stale_version_conflicts_and_changes_nothing(client, new_slug):
    agent = client.agents.create(slug=new_slug("stale"), name="Original")
    current = client.agents.update(agent.id, version=agent.version, name="Edited once")
    assert current.version == agent.version + 1

    with pytest.raises(ConflictError) as info:
        client.agents.update(agent.id, version=agent.version, name="Lost update", instructions="nope")
    assert isinstance(info.value.detail, str) and info.value.detail

    reread = client.agents.get(agent.id)
    assert reread.version == current.version
    assert reread.name == "Edited once"
    assert reread.instructions == ""
    assert reread.model_dump() == current.model_dump()

    # A version from the future is just as stale.
    with pytest.raises(ConflictError):
        client.agents.update(agent.id, version=current.version + 5, name="Future")
    assert client.agents.get(agent.id).model_dump() == current.model_dump()


def test_null_clears_a_field_and_absent_leaves_it(client, new_slug):
    tools = [ClientTool(name="lookup", description="d")]
    agent = client.agents.create(
        slug=new_slug("clear"),
        name="Clearable",
        instructions="stay",
        model="custom-model",
        image="custom:image",
        reasoning_effort="high",
        exposed_ports=[9000],
        client_tools=tools,
    )
    assert agent.model == "custom-model"

    cleared = client.agents.update(agent.id, version=agent.version, image=None, model=None)
    assert cleared.version == agent.version + 1
    assert cleared.image is None, "image=None must clear the image override"
    assert isinstance(cleared.model, str)
    assert cleared.model == DEFAULT_MODEL, "model=None puts the agent back on the default model"
    # Not mentioned: unchanged.
    assert cleared.reasoning_effort == "high"
    assert cleared.instructions == "stay"
    assert cleared.exposed_ports == [9000]
    assert [t.name for t in cleared.client_tools] == ["lookup"]
    assert cleared.name == "Clearable"

    # Lists given as null become [] (never null in the response).
    emptied = client.agents.update(agent.id, version=cleared.version, client_tools=None, reasoning_effort=None)
    assert emptied.client_tools == []
    assert emptied.reasoning_effort is None
    assert emptied.image is None
    assert emptied.model == DEFAULT_MODEL
    assert client.agents.get(agent.id).model_dump() == emptied.model_dump()


def test_update_replaces_lists_and_manifest_whole(client, new_slug):
    agent = client.agents.create(
        slug=new_slug("replace"),
        name="Replace",
        manifest={"entries": {"a.txt": {"kind": "file", "content": "a"}}, "environment": {"A": "1"}},
        client_tools=[ClientTool(name="one"), ClientTool(name="two")],
    )
    updated = client.agents.update(
        agent.id,
        version=agent.version,
        manifest={"entries": {"b": {"kind": "dir"}}},
        client_tools=[ClientTool(name="three", deferrable=True)],
    )
    assert set(updated.manifest.entries) == {"b"}
    assert updated.manifest.environment == {}
    assert [(t.name, t.deferrable) for t in updated.client_tools] == [("three", True)]


def test_null_for_a_non_nullable_field_is_422(client, new_slug):
    agent = client.agents.create(slug=new_slug("nonnull"), name="Named")
    with pytest.raises(UnprocessableEntityError) as info:
        client.agents.update(agent.id, version=agent.version, name=None)
    assert_validation_error(info.value, "name")
    with pytest.raises(UnprocessableEntityError) as info:
        client.agents.update(agent.id, version=agent.version, manifest=None)
    assert_validation_error(info.value, "manifest")
    reread = client.agents.get(agent.id)
    assert reread.name == "Named"
    assert reread.version == agent.version


def test_update_unknown_agent_is_not_found(client, new_slug):
    with pytest.raises(NotFoundError):
        client.agents.update(new_slug("ghost"), version=1, name="x")


# -- archive / unarchive ------------------------------------------------------


def test_archive_hides_from_list_but_get_still_works(client, new_slug):
    slug = new_slug("arch")
    agent = client.agents.create(slug=slug, name="Archivable")

    archived = client.agents.archive(agent.id)
    assert archived.id == agent.id
    assert_aware(archived.archived_at, "archived_at")
    assert archived.archived

    assert agent.id not in {a.id for a in client.agents.list()}
    assert agent.id not in {a.id for a in client.agents.list(include_archived=False)}
    with_archived = {a.id: a for a in client.agents.list(include_archived=True)}
    assert agent.id in with_archived
    assert with_archived[agent.id].archived_at is not None

    fetched = client.agents.get(slug)
    assert fetched.archived_at is not None, "archived agents are still readable, and say so"

    restored = client.agents.unarchive(slug)
    assert restored.archived_at is None
    assert agent.id in {a.id for a in client.agents.list()}
    assert client.agents.get(agent.id).archived_at is None


def test_archive_unknown_agent_is_not_found(client, new_slug):
    with pytest.raises(NotFoundError):
        client.agents.archive(new_slug("ghost"))
    with pytest.raises(NotFoundError):
        client.agents.unarchive(new_slug("ghost"))


# -- delete -------------------------------------------------------------------


def test_delete_then_get_is_not_found(recorded, new_slug):
    client, recorder = recorded
    slug = new_slug("del")
    agent = client.agents.create(slug=slug, name="Doomed")
    assert client.agents.delete(slug) is None
    assert recorder.last("DELETE", f"/api/agents/{slug}").status == 204

    with pytest.raises(NotFoundError):
        client.agents.get(agent.id)
    with pytest.raises(NotFoundError):
        client.agents.get(slug)
    assert agent.id not in {a.id for a in client.agents.list(include_archived=True)}
    with pytest.raises(NotFoundError):
        client.agents.delete(agent.id)
    # The slug is free again.
    again = client.agents.create(slug=slug, name="Reborn")
    assert again.id != agent.id
    assert again.version == 1


def test_delete_while_a_session_references_it_is_a_conflict(client, server, new_slug):
    agent = client.agents.create(slug=new_slug("busy"), name="Referenced")
    seed.create_session(server.data_dir, agent.id, title="holds the agent")

    with pytest.raises(ConflictError) as info:
        client.agents.delete(agent.id)
    assert isinstance(info.value.detail, str) and info.value.detail
    assert client.agents.get(agent.id).model_dump() == agent.model_dump()

    # Archiving is the way out, and it is allowed.
    assert client.agents.archive(agent.id).archived_at is not None


# -- validation -----------------------------------------------------------------


INVALID_CREATES = {
    "slug with a space and capitals": ({"slug": "Bad Slug"}, "slug"),
    "unknown transport": ({"transport": "carrier-pigeon"}, "transport"),
    "unknown capability": ({"capabilities": ["shell", "teleport"]}, "capabilities"),
    "unknown manifest entry kind": ({"manifest": {"entries": {"x": {"kind": "floppy_disk"}}}}, "manifest"),
    "file entry without content": ({"manifest": {"entries": {"x": {"kind": "file"}}}}, "manifest"),
    "timeout_seconds on a deferrable tool": (
        {"client_tools": [ClientTool(name="ask", deferrable=True, timeout_seconds=30)]},
        "client_tools",
    ),
}


@pytest.mark.parametrize("overrides,field", list(INVALID_CREATES.values()), ids=list(INVALID_CREATES))
def test_invalid_create_is_422_with_field_errors(client, new_slug, overrides, field):
    slug = overrides.get("slug") or new_slug("invalid")
    kwargs = {"slug": slug, "name": "Invalid", **overrides}
    with pytest.raises(UnprocessableEntityError) as info:
        client.agents.create(**kwargs)
    assert_validation_error(info.value, field)
    if "slug" not in overrides:
        with pytest.raises(NotFoundError):
            client.agents.get(slug)


def test_invalid_update_is_422_and_changes_nothing(client, new_slug):
    agent = client.agents.create(slug=new_slug("badupd"), name="Valid")
    with pytest.raises(UnprocessableEntityError) as info:
        client.agents.update(agent.id, version=agent.version, transport="smoke-signals")
    assert_validation_error(info.value, "transport")
    assert client.agents.get(agent.id).model_dump() == agent.model_dump()
