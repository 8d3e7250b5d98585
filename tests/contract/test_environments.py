"""Environments through the published client: named sandbox configurations a session starts in.

CRUD by id or name; `config` and `metadata` replaced whole on update; archive is one-way and
refuses new sessions (`ConflictError`) while listing hides it unless asked; delete is refused
while an agent defaults to it or a session ran in it; a backend the server cannot run and
`limited` networking are `BadRequestError`s. On Docker, packages are baked into an image when
the environment is saved (`build.status` `building` → `ready`), and a session in it can use
them (the shared server trusts the host's CA bundle, as this network inspects TLS).
"""
from __future__ import annotations

import time
import uuid

import pytest
from sandbox_agents import BadRequestError, ConflictError, NotFoundError, UnprocessableEntityError

import kube
from sandboxes import Janitor

BUILD_TIMEOUT = 300


def unique_name(prefix: str = "env") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


def wait_for_build(client, ref: str):
    deadline = time.monotonic() + BUILD_TIMEOUT
    while True:
        env = client.environments.get(ref)
        if env.build.status != "building":
            return env
        assert time.monotonic() < deadline, f"the build of {ref} did not end: {env.build}"
        time.sleep(1)


def test_environments_are_created_read_updated_and_listed(client):
    name = unique_name()
    env = client.environments.create(
        name, description="for data work", config={"image": "python:3.12-slim"}, metadata={"team": "data"}
    )
    assert env.name == name and env.description == "for data work"
    assert env.config.image == "python:3.12-slim"
    assert env.config.networking == {"type": "unrestricted"}
    assert env.build.status == "none", "no packages, nothing to build"
    assert env.metadata == {"team": "data"}
    assert env.created_at is not None and not env.is_archived
    assert client.environments.get(env.id) == client.environments.get(name)
    assert name in [e.name for e in client.environments.list()]

    # config and metadata are replaced whole; what is left out of the patch stays.
    updated = client.environments.update(name, metadata={"owner": "ana"}, config={"backend": kube.BACKEND})
    assert updated.metadata == {"owner": "ana"}
    assert updated.config.image is None and updated.config.backend == kube.BACKEND
    assert updated.description == "for data work"
    renamed = client.environments.update(env.id, name=name + "-2")
    assert client.environments.get(name + "-2").id == env.id
    with pytest.raises(NotFoundError):
        client.environments.get(name)
    assert renamed.name == name + "-2"

    client.environments.delete(env.id)
    with pytest.raises(NotFoundError):
        client.environments.get(env.id)


def test_refusals_are_the_documented_errors(client):
    name = unique_name()
    client.environments.create(name)
    with pytest.raises(ConflictError):
        client.environments.create(name)
    with pytest.raises(BadRequestError):
        client.environments.create(unique_name(), config={"backend": "e2b"})
    with pytest.raises(BadRequestError):
        client.environments.create(unique_name(), config={"networking": {"type": "limited"}})
    with pytest.raises(BadRequestError):
        client.environments.update(name, config={"networking": {"type": "limited"}})
    with pytest.raises(UnprocessableEntityError):
        client.environments.create(unique_name(), config={"packages": {"pip": ["six; rm -rf /"]}})
    with pytest.raises(NotFoundError):
        client.environments.get(unique_name("missing"))


def test_archive_is_one_way_and_refuses_new_sessions(client, new_slug):
    env = client.environments.create(unique_name())
    agent = client.agents.create(slug=new_slug("env"), name="env")
    archived = client.environments.archive(env.id)
    assert archived.is_archived
    assert env.id not in [e.id for e in client.environments.list()]
    assert env.id in [e.id for e in client.environments.list(include_archived=True)]
    with pytest.raises(ConflictError):
        client.sessions.create(agent.id, environment_id=env.id)
    with pytest.raises(NotFoundError):
        client.sessions.create(agent.id, environment_id=str(uuid.uuid4()))
    # Delete refused while an agent defaults to it.
    other = client.environments.create(unique_name())
    defaulting = client.agents.create(slug=new_slug("dflt"), name="d", environment_id=other.id)
    assert defaulting.environment_id == other.id
    with pytest.raises(ConflictError):
        client.environments.delete(other.id)
    client.agents.delete(defaulting.slug)
    client.environments.delete(other.id)
    client.environments.delete(env.id)


@pytest.mark.docker_only("packages are baked into an image by an image build: the Kubernetes backend builds no images")
def test_a_session_uses_the_packages_of_a_built_environment(client, janitor, new_slug):
    env = client.environments.create(unique_name("tools"), config={"packages": {"apt": ["jq"], "pip": ["six"]}})
    assert env.build.status in ("building", "ready")
    agent = client.agents.create(slug=new_slug("tools"), name="tools", environment_id=env.id)
    janitor.track_agent(agent)
    # Created while the image may still build: it waits in provisioning, then boots.
    session = janitor.create(client, agent.id)
    built = wait_for_build(client, env.id)
    assert built.build.status == "ready", built.build
    assert built.build.image
    client.sessions.wait_until_running(session.id, timeout=BUILD_TIMEOUT)
    out = client.sessions.exec(
        session.id, "echo '{\"n\": 2}' | jq .n && python3 -c 'import six; print(six.__name__)'"
    ).check().stdout
    assert out == "2\nsix\n"
    # A session ran in it: delete is refused, archive is the way out.
    with pytest.raises(ConflictError):
        client.environments.delete(env.id)
    client.environments.archive(env.id)
    assert client.sessions.get(session.id).status == "running", "running sessions go on"
