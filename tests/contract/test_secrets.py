"""Secrets through the published client: per project, write-only values that sandboxes get.

A secret's value reaches a session's sandbox as an environment variable through
`SecretBinding`s on the agent and the session (the session's winning per variable), and no
response, event or container configuration ever carries it. A rotation reaches the next boot;
a bound secret cannot be deleted (`ConflictError`); names are unique per project.
"""
from __future__ import annotations

import uuid

import pytest
from sandbox_agents import ConflictError, NotFoundError, SecretBinding, UnprocessableEntityError

import sandboxes
from sandboxes import Janitor


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10].upper()}"


@pytest.fixture
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


def test_a_secret_is_write_only_and_names_are_unique(client, raw):
    name = unique_name("API_TOKEN")
    value = f"value-{uuid.uuid4().hex}"
    created = client.secrets.create(name, value, description="for the CRM")
    assert created.name == name and created.description == "for the CRM"
    assert created.created_at is not None and created.last_used_at is None
    assert not hasattr(created, "value")
    assert client.secrets.get(created.id).name == name
    assert name in [s.name for s in client.secrets.list()]
    for path in ["/api/secrets", f"/api/secrets/{created.id}"]:
        assert value not in raw.get(path).text

    with pytest.raises(ConflictError):
        client.secrets.create(name, "another value")
    with pytest.raises(UnprocessableEntityError):
        client.secrets.create("not-an-identifier", "v")

    updated = client.secrets.update(created.id, description="rotated yearly")
    assert updated.description == "rotated yearly"
    client.secrets.delete(created.id)
    with pytest.raises(NotFoundError):
        client.secrets.get(created.id)


def test_bindings_become_the_sandbox_environment_and_rotation_reaches_the_next_boot(
    client, raw, janitor, new_slug
):
    agent_name, session_name = unique_name("AGENT_KEY"), unique_name("SESSION_KEY")
    agent_value, session_value = f"a-{uuid.uuid4().hex}", f"s-{uuid.uuid4().hex}"
    agent_secret = client.secrets.create(agent_name, agent_value)
    client.secrets.create(session_name, session_value)
    agent = client.agents.create(
        slug=new_slug("secrets"),
        name="Secrets",
        secret_bindings=[
            SecretBinding(secret=agent_name, env="SERVICE_KEY"),
            SecretBinding(secret=agent_name, env="WHICH"),
        ],
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(
        client, agent.slug, secret_bindings=[{"secret": session_name, "env": "WHICH"}]
    )
    result = client.sessions.exec(session.id, 'printf "%s|%s" "$SERVICE_KEY" "$WHICH"')
    assert result.stdout == f"{agent_value}|{session_value}"
    assert client.secrets.get(agent_secret.id).last_used_at is not None

    # Nothing the client can read shows a value: the session, its events, the agent.
    for path in [f"/api/sessions/{session.id}", f"/api/sessions/{session.id}/events", f"/api/agents/{agent.id}"]:
        body = raw.get(path).text
        assert agent_value not in body and session_value not in body, path
    # Nor the container's configuration (on Kubernetes, the pod's).
    for container in sandboxes.session_containers(session.id):
        inspected = sandboxes.configuration(container)
        assert agent_value not in inspected and session_value not in inspected

    # Bound: not deletable.
    with pytest.raises(ConflictError):
        client.secrets.delete(agent_secret.id)

    rotated = f"r-{uuid.uuid4().hex}"
    client.secrets.update(agent_secret.id, value=rotated)
    assert client.sessions.exec(session.id, 'printf %s "$SERVICE_KEY"').stdout == agent_value
    client.sessions.stop(session.id)
    client.sessions.start(session.id)
    client.sessions.wait_until_running(session.id, timeout=sandboxes.BOOT_DEADLINE)
    assert client.sessions.exec(session.id, 'printf %s "$SERVICE_KEY"').stdout == rotated


def test_a_session_bound_to_a_missing_secret_is_refused(client, new_slug, janitor):
    agent = client.agents.create(slug=new_slug("nosecret"), name="No secret")
    janitor.track_agent(agent)
    with pytest.raises(UnprocessableEntityError) as err:
        client.sessions.create(
            agent.slug, secret_bindings=[SecretBinding(secret=unique_name("MISSING"), env="X")]
        )
    assert "MISSING" in str(err.value)
    assert list(client.sessions.iterate(agent_id=agent.id)) == []
