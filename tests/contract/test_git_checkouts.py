"""`git_repo` manifest entries through the published client, on a server given a CA of the
test's own as `SANDBOX_AGENTS_EXTRA_CA_CERTS`: the entry is checked out at boot (branch or
commit, subpath alone, no `.git`), a ref that does not exist fails the boot naming the
repository and the ref, and a malformed entry is a 422 before anything is stored.
"""
from __future__ import annotations

import pytest
import sandbox_agents
from sandbox_agents import RunFailedError, UnprocessableEntityError

import sandboxes
from gitserver import GitServer
from sandboxes import Janitor


@pytest.fixture(scope="module")
def git():
    server = GitServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def trusting(git):
    """A server of its own, trusting the git server's CA."""
    with sandboxes.own_server("extra-CA server", {"SANDBOX_AGENTS_EXTRA_CA_CERTS": str(git.ca_bundle)}) as process:
        yield process


@pytest.fixture
def tclient(trusting):
    with sandbox_agents.Client(base_url=trusting.base_url) as c:
        yield c


@pytest.fixture
def janitor(trusting):
    j = Janitor(trusting.base_url)
    yield j
    j.cleanup()


def entry(git: GitServer, repo: str, ref: str, subpath: str | None = None) -> dict:
    e = {"kind": "git_repo", "host": git.host, "repo": repo, "ref": ref}
    if subpath is not None:
        e["subpath"] = subpath
    return e


@pytest.mark.docker_only("the sandbox must trust the git server's CA (SANDBOX_AGENTS_EXTRA_CA_CERTS): the Kubernetes backend writes no system files, so no extra CA")
def test_a_git_entry_is_checked_out_at_boot_without_its_git(git, tclient, janitor, new_slug):
    first = git.repo("acme/kit", {"README.md": "kit\n", "docs/guide.md": "the guide\n"})
    agent = tclient.agents.create(
        slug=new_slug("git"), name="Git checkout",
        manifest={"entries": {
            "kit": entry(git, "acme/kit", "main"),
            "pinned": entry(git, "acme/kit", first),
            "guide": entry(git, "acme/kit", "main", "docs"),
        }},
    )
    janitor.track_agent(agent)
    session = janitor.create_and_wait(tclient, agent.slug, title="git")
    run = lambda cmd: tclient.sessions.exec(session.id, cmd).check().stdout  # noqa: E731
    assert run("cat kit/README.md pinned/README.md") == "kit\nkit\n"
    assert run("ls -A guide") == "guide.md\n"
    assert run("find . -name .git | wc -l").strip() == "0"
    assert run("printenv GIT_SSL_CAINFO") == "/etc/ssl/certs/ca-certificates.crt\n"


@pytest.mark.docker_only("the sandbox must trust the git server's CA (SANDBOX_AGENTS_EXTRA_CA_CERTS): the Kubernetes backend writes no system files, so no extra CA")
def test_an_unknown_ref_fails_the_boot_naming_the_repository_and_the_ref(git, tclient, janitor, new_slug):
    git.repo("acme/other", {"README.md": "x\n"})
    agent = tclient.agents.create(
        slug=new_slug("gitbad"), name="Bad ref",
        manifest={"entries": {"r": entry(git, "acme/other", "no-such-branch")}},
    )
    janitor.track_agent(agent)
    with pytest.raises(RunFailedError) as caught:
        janitor.create_and_wait(tclient, agent.slug, title="doomed")
    assert "acme/other" in caught.value.detail and "no-such-branch" in caught.value.detail


@pytest.mark.parametrize("bad", [
    {"ref": "--upload-pack=touch /tmp/sa-pwned"},
    {"repo": "-o/r"},
    {"host": "-oProxyCommand=id"},
    {"subpath": "../../etc"},
])
def test_a_malformed_git_entry_is_refused(tclient, new_slug, bad):
    e = {"kind": "git_repo", "host": "github.com", "repo": "o/r", "ref": "main", **bad}
    slug = new_slug("gitmal")
    with pytest.raises(UnprocessableEntityError) as caught:
        tclient.agents.create(slug=slug, name="Malformed", manifest={"entries": {"r": e}})
    assert caught.value.body["detail"][0]["loc"][-1] == next(iter(bad))
    assert slug not in {a.slug for a in tclient.agents.list()}
