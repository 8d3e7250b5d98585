"""Skill bundles and skills on agents, through the published client.

Bundles are pushed from a `.tgz` file and from bytes (gzip or plain tar, told apart by
content); an unsafe archive is refused and uses no version number; an agent on `latest`
sees a new push at its session's next boot; an agent pinned to a retired version, or on a
bundle with nothing pushed, fails the boot saying so; with the `skills` capability the
model is told about every skill (name and description from `SKILL.md`'s front matter, the
folder's name and "No description provided." without it) and loads one on demand with
`load_skill`, which stages it at `.agents/<skill>/`.
"""
from __future__ import annotations

import io
import json
import tarfile

import pytest
from sandbox_agents import BadRequestError, ConflictError, RunFailedError

from fakemodel import text, tool_calls
from sandboxes import Janitor


def tree(files: dict[str, str], *, gzip: bool) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gzip else "w") as t:
        for name, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


PDF = "---\nname: pdf\ndescription: Fill PDF forms.\n---\nUse scripts/fill.py.\n"


@pytest.fixture
def janitor(server):
    j = Janitor(server.base_url)
    yield j
    j.cleanup()


@pytest.fixture
def bundle(client, new_slug):
    b = client.skill_bundles.create(new_slug("kit"), description="Our skills")
    yield b
    # Agents naming it were deleted by the test; a bundle no agent names can go.
    try:
        client.skill_bundles.delete(b.slug)
    except ConflictError:
        pass


def test_pushes_from_a_tgz_file_and_from_bytes_are_numbered_and_described(client, bundle, tmp_path):
    path = tmp_path / "bundle.tgz"
    path.write_bytes(tree({"pdf/SKILL.md": PDF, "pdf/scripts/fill.py": "print(1)\n", "csv/SKILL.md": "# csv\n"}, gzip=True))
    v1 = client.skill_bundles.push(bundle.slug, path)
    assert (v1.version, v1.file_count, v1.skills) == (1, 3, ["csv", "pdf"])
    assert v1.size_bytes == path.stat().st_size
    plain = tree({"pdf/SKILL.md": PDF}, gzip=False)
    v2 = client.skill_bundles.push(bundle.slug, plain)
    assert (v2.version, v2.skills) == (2, ["pdf"])
    import hashlib
    assert v2.digest == hashlib.sha256(plain).hexdigest()
    assert [v.version for v in client.skill_bundles.versions(bundle.slug)] == [2, 1]
    assert client.skill_bundles.get(bundle.slug).latest_version == 2

    # A refused archive uses no number: the next push is 3.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        link = tarfile.TarInfo("pdf/escape")
        link.type = tarfile.SYMTYPE
        link.linkname = "../../etc/passwd"
        t.addfile(link)
    with pytest.raises(BadRequestError) as caught:
        client.skill_bundles.push(bundle.slug, buf.getvalue())
    assert "pdf/escape" in caught.value.detail
    assert client.skill_bundles.push(bundle.slug, plain).version == 3

    client.skill_bundles.delete_version(bundle.slug, 3)
    assert client.skill_bundles.get(bundle.slug).latest_version == 2


def test_an_agent_on_latest_sees_a_new_push_at_its_next_boot(client, bundle, janitor, new_slug):
    client.skill_bundles.push(bundle.slug, tree({"pdf/SKILL.md": PDF + "one\n"}, gzip=True))
    agent = client.agents.create(
        slug=new_slug("latest"), name="On latest",
        skills_source={"kind": "bundle", "bundle": bundle.slug, "version": "latest", "lazy": False},
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(client, agent.slug, title="latest")
    read = lambda: client.sessions.exec(session.id, "tail -n 1 .agents/pdf/SKILL.md").check().stdout  # noqa: E731
    assert read() == "one\n"
    client.skill_bundles.push(bundle.slug, tree({"pdf/SKILL.md": PDF + "two\n"}, gzip=False))
    assert read() == "one\n", "a running sandbox keeps what it booted with"
    client.sessions.stop(session.id)
    client.sessions.start(session.id)
    client.sessions.wait_until_running(session.id, timeout=120)
    assert read() == "two\n"
    client.sessions.delete(session.id)
    client.agents.delete(agent.slug)


def test_a_pinned_retired_version_and_an_empty_bundle_fail_the_boot_saying_so(client, bundle, janitor, new_slug):
    empty = client.agents.create(
        slug=new_slug("empty"), name="Empty", skills_source={"kind": "bundle", "bundle": bundle.slug},
    )
    janitor.track_agent(empty)
    with pytest.raises(RunFailedError) as caught:
        janitor.create_and_wait(client, empty.slug, title="empty")
    assert f"skill bundle '{bundle.slug}' has no versions yet" in caught.value.detail

    client.skill_bundles.push(bundle.slug, tree({"pdf/SKILL.md": PDF}, gzip=True))
    client.skill_bundles.push(bundle.slug, tree({"pdf/SKILL.md": PDF}, gzip=True))
    pinned = client.agents.create(
        slug=new_slug("pinned"), name="Pinned",
        skills_source={"kind": "bundle", "bundle": bundle.slug, "version": 1},
    )
    janitor.track_agent(pinned)
    client.skill_bundles.delete_version(bundle.slug, 1)
    with pytest.raises(RunFailedError) as caught:
        janitor.create_and_wait(client, pinned.slug, title="pinned")
    assert f"version 1 of skill bundle '{bundle.slug}' was retired" in caught.value.detail
    # The bundle cannot go while agents name it.
    with pytest.raises(ConflictError):
        client.skill_bundles.delete(bundle.slug)
    for a in (empty, pinned):
        for s in client.sessions.iterate(agent_id=a.id):
            client.sessions.delete(s.id)
        client.agents.delete(a.slug)


def test_skills_are_announced_and_a_lazy_one_is_loaded_when_the_model_asks(
    client, bundle, janitor, new_slug, fake_model
):
    client.skill_bundles.push(
        bundle.slug,
        tree({"pdf/SKILL.md": PDF, "pdf/scripts/fill.py": "print('filled')\n", "csv/SKILL.md": "# csv\n"}, gzip=True),
    )
    agent = client.agents.create(
        slug=new_slug("lazy"), name="Lazy", instructions="You fill forms.",
        capabilities=["shell", "filesystem", "skills"],
        skills_source={"kind": "bundle", "bundle": bundle.slug},
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(client, agent.slug, title="lazy")
    assert client.sessions.exec(session.id, "test -e .agents").exit_code != 0, "nothing staged before a load"
    fake_model.set_script([
        tool_calls([("shell", {"command": "python3 .agents/pdf/scripts/fill.py"})],
                   last_tool_result_contains='"status":"loaded"'),
        text("Filled.", last_tool_result_contains="filled"),
        tool_calls([("load_skill", {"skill_name": "pdf"})], last_user_contains="fill the form"),
    ])
    result = client.sessions.run(session.id, "fill the form", collect_events=True, timeout=120)
    assert result.text == "Filled."
    outputs = [e.payload["output"] for e in result.events if e.type == "agent.tool_result"]
    assert json.loads(outputs[0]) == {"status": "loaded", "skill_name": "pdf", "path": ".agents/pdf"}
    assert "filled" in outputs[1]
    assert client.sessions.exec(session.id, "ls .agents").check().stdout == "pdf\n"

    first = fake_model.chat_requests()[0]
    system = first["messages"][0]["content"]
    assert system.startswith("You fill forms.")
    assert "- pdf: Fill PDF forms. (file: .agents/pdf/SKILL.md)" in system
    assert "- csv: No description provided. (file: .agents/csv/SKILL.md)" in system
    assert "load_skill" in {t["function"]["name"] for t in first["tools"]}
    client.sessions.delete(session.id)
    client.agents.delete(agent.slug)
