"""`s3_mount` entries through the published client, on a server pointed at moto's S3 server
(`s3server.py`): a read-only prefix is staged at boot and cannot be changed by the sandbox
user, a writable one is written back at stop (new, changed and deleted files), neither leaves
a key in the sandbox, and a writable mount without the acknowledgement is a 422.
"""
from __future__ import annotations

import pytest
import sandbox_agents
from sandbox_agents import UnprocessableEntityError

import sandboxes
from s3server import ACCESS_KEY_ID, SECRET_ACCESS_KEY, MotoS3
from sandboxes import Janitor


@pytest.fixture(scope="module")
def moto():
    s3 = MotoS3().start()
    try:
        yield s3
    finally:
        s3.stop()


@pytest.fixture(scope="module")
def s3_server(moto):
    """A server of its own, with S3 credentials of its own."""
    with sandboxes.own_server("s3 server", moto.server_env()) as process:
        yield process


@pytest.fixture
def sclient(s3_server):
    with sandbox_agents.Client(base_url=s3_server.base_url) as c:
        yield c


@pytest.fixture
def janitor(s3_server):
    j = Janitor(s3_server.base_url)
    yield j
    j.cleanup()


@pytest.mark.docker_only("s3_mount entries are staged as root outside the workspace: the Kubernetes backend writes no system files")
def test_a_read_only_mount_is_staged_and_the_sandbox_user_cannot_change_it(moto, sclient, janitor, new_slug):
    moto.create_bucket("contract-in")
    moto.put("contract-in", "data/a.txt", "alpha\n")
    agent = sclient.agents.create(
        slug=new_slug("s3ro"), name="S3 reader",
        manifest={"entries": {"in": {"kind": "s3_mount", "bucket": "contract-in", "prefix": "data"}}},
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(sclient, agent.slug, title="s3")
    run = lambda cmd: sclient.sessions.exec(session.id, cmd)  # noqa: E731
    assert run("cat in/a.txt").check().stdout == "alpha\n"
    assert run("echo x >> in/a.txt").exit_code != 0
    assert run("rm -f in/a.txt").exit_code != 0
    for needle in (SECRET_ACCESS_KEY, ACCESS_KEY_ID):
        found = run(f"env | grep -c '{needle}'; grep -rlsI '{needle}' /workspace /home /tmp /etc | wc -l")
        assert found.stdout.split() == ["0", "0"], needle


@pytest.mark.docker_only("s3_mount entries are staged as root outside the workspace: the Kubernetes backend writes no system files")
def test_a_writable_mount_is_written_back_at_stop(moto, sclient, janitor, new_slug):
    moto.create_bucket("contract-out")
    moto.put("contract-out", "p/keep.txt", "keep\n")
    moto.put("contract-out", "p/change.txt", "before\n")
    moto.put("contract-out", "p/gone.txt", "gone\n")
    agent = sclient.agents.create(
        slug=new_slug("s3rw"), name="S3 writer",
        manifest={"entries": {"out": {
            "kind": "s3_mount", "bucket": "contract-out", "prefix": "p",
            "read_only": False, "acknowledge_credential_exposure": True,
        }}},
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(sclient, agent.slug, title="s3")
    sclient.sessions.exec(
        session.id, "echo after > out/change.txt && rm out/gone.txt && echo new > out/new.txt"
    ).check()
    sclient.sessions.stop(session.id)
    assert moto.keys("contract-out") == ["p/change.txt", "p/keep.txt", "p/new.txt"]
    assert moto.get("contract-out", "p/change.txt") == "after\n"
    assert moto.get("contract-out", "p/new.txt") == "new\n"
    assert moto.get("contract-out", "p/keep.txt") == "keep\n"


def test_a_writable_mount_without_the_acknowledgement_is_refused(sclient, new_slug):
    slug = new_slug("s3ack")
    with pytest.raises(UnprocessableEntityError) as caught:
        sclient.agents.create(
            slug=slug, name="No ack",
            manifest={"entries": {"out": {"kind": "s3_mount", "bucket": "b", "read_only": False}}},
        )
    assert caught.value.body["detail"][0]["loc"][-1] == "acknowledge_credential_exposure"
    assert slug not in {a.slug for a in sclient.agents.list()}
