"""Credentials and projects through the published client (who a caller is, which project a request
is in, what each credential reaches): the shared token as operator, API keys bound to a project
(`Client(api_key=...)`), `Client(project=...)`, the 400 when several projects are possible, and
isolation: one project's key sees nothing of another's.

A server of its own with `SANDBOX_AGENTS_TOKEN` set: the shared server is in open mode and must
stay so (its first key would close it for every other test).
"""
from __future__ import annotations

import datetime as dt

import pytest
import sandbox_agents
from sandbox_agents import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)

import harness

TOKEN = "contract-operator-token-0123456789abcdef"


@pytest.fixture(scope="module")
def closed(fake_model):
    from conftest import model_env

    process = harness.ServerProcess(
        harness.short_tmpdir(prefix="sa-auth-"), name="server with a token",
        env={**model_env(fake_model), "SANDBOX_AGENTS_TOKEN": TOKEN},
    )
    try:
        process.start()
        yield process
        assert process.stop() == 0
    finally:
        process.cleanup()


def client(process, **kw) -> sandbox_agents.Client:
    return sandbox_agents.Client(base_url=process.base_url, max_retries=0, **kw)


def test_without_a_credential_only_health_and_me_answer(closed):
    with client(closed) as anon:
        assert anon.health()
        me = anon.me()
        assert me.auth_required and not me.authenticated and me.kind is None
        with pytest.raises(AuthenticationError):
            anon.agents.list()
    with client(closed, api_key="not-the-token") as wrong:
        with pytest.raises(AuthenticationError):
            wrong.agents.list()
    with client(closed, api_key=TOKEN) as op:
        me = op.me()
        assert me.authenticated and me.kind == "token"


def test_keys_are_bound_to_their_project_and_isolated(closed, new_slug):
    with client(closed, api_key=TOKEN) as op:
        a = op.projects.create("Contract A", slug=new_slug("a"))
        b = op.projects.create("Contract B")
        assert b.slug.startswith("contract-b")
        with pytest.raises(ConflictError):
            op.projects.create("again", slug=a.slug)
        # Several projects and no header: refused, never guessed.
        with pytest.raises(BadRequestError):
            op.agents.list()
    with client(closed, api_key=TOKEN, project=a.slug) as op_a:
        key_a = op_a.api_keys.create("service-a", description="for A")
    with client(closed, api_key=TOKEN, project=b.id) as op_b:
        key_b = op_b.api_keys.create("service-b", expires_at=dt.datetime(2099, 1, 1))
    assert key_a.key.startswith("ak_") and key_a.project_id == a.id
    assert key_b.project_id == b.id and key_b.expires_at.year == 2099

    with client(closed, api_key=key_a.key) as svc_a, client(closed, api_key=key_b.key) as svc_b:
        agent = svc_a.agents.create(slug=new_slug("private"), name="Private")
        assert [x.id for x in svc_a.agents.list()] == [agent.id]
        assert svc_b.agents.list() == []
        for ref in (agent.id, agent.slug):
            with pytest.raises(NotFoundError):
                svc_b.agents.get(ref)
        with pytest.raises(NotFoundError):
            svc_b.agents.update(agent.id, version=agent.version, name="stolen")
        # Naming the other project does not help: it is not reachable, so it is not there.
        with client(closed, api_key=key_b.key, project=a.slug) as sneaky:
            with pytest.raises(NotFoundError):
                sneaky.agents.list()
        assert [p.id for p in svc_b.projects.list()] == [b.id]
        with pytest.raises(NotFoundError):
            svc_b.projects.get(a.slug)
        # Keys do not manage keys or projects where the shared token exists.
        with pytest.raises(PermissionDeniedError):
            svc_a.api_keys.list()
        with pytest.raises(PermissionDeniedError):
            svc_a.projects.delete(a.slug)
        assert svc_a.agents.get(agent.slug).name == "Private"

    with client(closed, api_key=TOKEN, project=a.slug) as op_a:
        listed = {k.id: k for k in op_a.api_keys.list()}
        assert key_a.id in listed and key_b.id not in listed
        assert listed[key_a.id].prefix == key_a.key[:11]
        revoked = op_a.api_keys.revoke(key_a.id)
        assert revoked.revoked_at is not None
    with client(closed, api_key=key_a.key) as svc_a:
        with pytest.raises(AuthenticationError):
            svc_a.agents.list()
    with client(closed, api_key=TOKEN) as op:
        op.projects.update(a.slug, name="Contract A, renamed")
        assert op.projects.get(a.id).name == "Contract A, renamed"
        op.projects.delete(a.slug)
        op.projects.delete(b.slug)
        with pytest.raises(NotFoundError):
            op.projects.get(a.slug)


def test_operators_manage_people_and_memberships(closed, new_slug):
    email = f"{new_slug('person')}@example.com"
    with client(closed, api_key=TOKEN) as op:
        project = op.projects.create("People", slug=new_slug("people"))
        created = op.users.create(email, name="Person")
        assert created.recovery_url and created.recovery_url.endswith(created.recovery_code)
        assert created.email == email and created.state == "active"
        assert email in [u.email for u in op.users.list()]
        fresh = op.users.recovery(created.id)
        assert fresh.recovery_code and fresh.recovery_code != created.recovery_code
        with pytest.raises(ConflictError):
            op.users.create(email.upper())
        member = op.projects.add_member(project.slug, email, role="admin")
        assert member.subject == created.id and member.label == email and member.role == "admin"
        with pytest.raises(NotFoundError):
            op.projects.add_member(project.slug, "nobody@example.com")
        assert [m.id for m in op.projects.members(project.slug)] == [member.id]
        with pytest.raises(ConflictError):
            op.projects.remove_member(project.slug, member.id)  # the last admin
        # A credential is not a person: no profile.
        with pytest.raises(ConflictError):
            op.profile()
        with pytest.raises(AuthenticationError):
            with client(closed) as anon:
                anon.users.list()
        op.users.delete(created.id)
        assert op.projects.members(project.slug) == []
        op.projects.delete(project.slug)
