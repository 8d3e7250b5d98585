"""Git deploy keys through the published client (API.md §2.7, §3.5, §8.5, §9.36): create,
list, test and delete as users do; the public key is a real OpenSSH ed25519 key whose
fingerprint the test computes itself; a failed test is `ok=False` with git's words, not an
error; a key an agent uses cannot be deleted until the agent lets go.
"""
from __future__ import annotations

import base64
import hashlib
import socket
import struct

import pytest
from sandbox_agents import ConflictError, GitKey, NotFoundError, UnprocessableEntityError


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ed25519_blob(public_key: str) -> bytes:
    """The key blob of an OpenSSH `ssh-ed25519 <base64> <comment>` line, checked field by field."""
    kind, b64, comment = public_key.split(" ", 2)
    assert kind == "ssh-ed25519" and comment
    blob = base64.b64decode(b64, validate=True)
    (n,) = struct.unpack(">I", blob[:4])
    assert blob[4 : 4 + n] == b"ssh-ed25519"
    (m,) = struct.unpack(">I", blob[4 + n : 8 + n])
    assert m == 32 and len(blob) == 8 + n + m, "an ed25519 public key is 32 bytes"
    return blob


def fingerprint(public_key: str) -> str:
    digest = hashlib.sha256(ed25519_blob(public_key)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def test_a_key_is_created_listed_tested_and_deleted(client, new_slug):
    name = new_slug("deploy")
    key = client.git_keys.create(name)
    assert isinstance(key, GitKey) and key.name == name
    assert key.public_key.startswith("ssh-ed25519 AAAA")
    assert key.fingerprint == fingerprint(key.public_key)
    assert key.created_at is not None and key.last_used_at is None
    assert not hasattr(key, "private_key")

    listed = {k.id: k for k in client.git_keys.list()}
    assert listed[key.id].public_key == key.public_key
    with pytest.raises(ConflictError):
        client.git_keys.create(name)

    # Nothing listens there: a failed read is a result, not an error.
    result = client.git_keys.test(key.id, "owner/repo", host=f"git@127.0.0.1:{closed_port()}")
    assert result.ok is False
    assert "Connection refused" in result.detail
    assert "PRIVATE KEY" not in result.detail
    assert {k.id: k for k in client.git_keys.list()}[key.id].last_used_at is None

    client.git_keys.delete(key.id)
    assert key.id not in {k.id for k in client.git_keys.list()}
    with pytest.raises(NotFoundError):
        client.git_keys.delete(key.id)
    with pytest.raises(NotFoundError):
        client.git_keys.test(key.id, "owner/repo")


def test_repos_and_hosts_that_look_like_options_are_refused(client, new_slug):
    key = client.git_keys.create(new_slug("strict"))
    try:
        with pytest.raises(UnprocessableEntityError) as e:
            client.git_keys.test(key.id, "owner/repo", host="-oProxyCommand=touch /tmp/sa-pwned")
        assert e.value.body["detail"][0]["loc"] == ["body", "host"]
        with pytest.raises(UnprocessableEntityError) as e:
            client.git_keys.test(key.id, "--upload-pack=touch /tmp/sa-pwned")
        assert e.value.body["detail"][0]["loc"] == ["body", "repo"]
    finally:
        client.git_keys.delete(key.id)


def test_a_key_an_agent_uses_is_a_409_until_the_agent_lets_go(client, new_slug):
    key = client.git_keys.create(new_slug("skills"))
    agent = client.agents.create(
        slug=new_slug("uses-key"),
        name="Uses a deploy key",
        skills_source={"kind": "git_repo", "repo": "o/r", "ssh_key_id": key.id},
    )
    assert agent.skills_source.ssh_key_id == key.id
    with pytest.raises(ConflictError) as e:
        client.git_keys.delete(key.id)
    assert agent.slug in str(e.value)

    client.agents.update(agent.slug, version=agent.version, skills_source=None)
    client.git_keys.delete(key.id)
    client.agents.delete(agent.slug)


def test_an_agent_cannot_name_a_key_that_does_not_exist(client, new_slug):
    with pytest.raises(UnprocessableEntityError) as e:
        client.agents.create(
            slug=new_slug("no-key"),
            name="No key",
            skills_source={
                "kind": "git_repo",
                "repo": "o/r",
                "ssh_key_id": "00000000-0000-7000-8000-00000000dead",
            },
        )
    assert e.value.body["detail"][0]["loc"] == ["body", "skills_source", "ssh_key_id"]
