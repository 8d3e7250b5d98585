"""Conventions every endpoint shares: public and identity endpoints, `X-Project`, JSON 404/405
bodies, body-less POSTs, and the generated API reference."""
from __future__ import annotations

import re

import httpx
import pytest
import sandbox_agents
from sandbox_agents import NotFoundError

import kube

DEFAULT_PROJECT_ID = "00000000-0000-7000-8000-000000000001"


def test_health_is_a_json_object(client, raw):
    assert isinstance(client.health(), dict)
    response = raw.get("/api/health")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert isinstance(response.json(), dict)


def test_auth_check_in_open_mode(client, raw):
    assert client.check_auth() is True
    response = raw.get("/api/auth/check")
    assert response.status_code == 200
    assert isinstance(response.json(), dict)


def test_me_reports_open_mode(client):
    me = client.me()
    assert me.auth_required is False


def test_me_answers_with_a_credential_it_does_not_know(server):
    """`/api/me` is the call users make when a 401 surprises them: it must answer 200."""
    with sandbox_agents.Client(base_url=server.base_url, api_key="ak_not_a_real_key") as c:
        assert c.me().auth_required is False


def test_backends_list_default_first(client):
    backends = client.backends.list()
    assert backends, "at least one compute plane"
    assert backends[0].default is True, "the default backend comes first"
    assert sum(1 for b in backends if b.default) == 1
    # The one this server runs its sandboxes on (SA_CONTRACT_BACKEND, docker by default).
    assert kube.BACKEND in {b.name for b in backends}


@pytest.mark.parametrize("project", ["default", DEFAULT_PROJECT_ID], ids=["slug", "id"])
def test_x_project_naming_the_default_project_is_accepted(server, client, new_slug, project):
    with sandbox_agents.Client(base_url=server.base_url, project=project) as scoped:
        assert scoped.project == project
        # Routes that are not project-scoped ignore the header.
        assert isinstance(scoped.health(), dict)
        assert scoped.me().auth_required is False
        assert scoped.backends.list()
        # Project-scoped routes act in that project: the same one a header-less client sees.
        agent = scoped.agents.create(slug=new_slug("scoped"), name="Scoped")
        assert agent.id in {a.id for a in scoped.agents.list()}
    assert client.agents.get(agent.id).id == agent.id


def test_unknown_project_is_not_found_but_ignored_off_project_routes(server):
    with sandbox_agents.Client(base_url=server.base_url, project="no-such-project", max_retries=0) as c:
        assert isinstance(c.health(), dict), "/api/health must ignore X-Project"
        assert c.me().auth_required is False, "/api/me must ignore X-Project"
        assert c.backends.list(), "/api/backends must ignore X-Project"
        with pytest.raises(NotFoundError):
            c.agents.list()
        with pytest.raises(NotFoundError):
            c.sessions.list()


@pytest.mark.parametrize("path", ["/api/no-such-thing", "/api/agents/x/y/z", "/nothing-here"])
def test_unknown_route_is_json_404(raw, path):
    response = raw.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"detail": "Not Found"}


@pytest.mark.parametrize(
    "method,path",
    [("DELETE", "/api/health"), ("PUT", "/api/agents"), ("POST", "/api/backends"), ("PUT", "/api/sessions")],
)
def test_wrong_method_is_json_405(raw, method, path):
    response = raw.request(method, path)
    assert response.status_code == 405
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"detail": "Method Not Allowed"}


def test_body_less_post_is_accepted(recorded, raw, new_slug):
    client, recorder = recorded
    agent = client.agents.create(slug=new_slug("bodyless"), name="Body-less")

    archived = client.agents.archive(agent.id)
    assert archived.archived_at is not None
    sent = recorder.last("POST", f"/api/agents/{agent.id}/archive")
    assert sent.request_body == b""
    assert "content-type" not in sent.request_headers, "the client sends no Content-Type here"
    assert sent.status < 300

    # The same on the wire with plain httpx, and with an explicit Content-Length: 0.
    response = raw.post(f"/api/agents/{agent.id}/unarchive", headers={"Content-Length": "0"})
    assert response.status_code == 200, response.text
    assert response.json()["archived_at"] is None


def test_error_bodies_are_detail_sentences(client, raw, new_slug):
    missing = new_slug("missing")
    with pytest.raises(NotFoundError) as info:
        client.agents.get(missing)
    assert isinstance(info.value.body, dict)
    assert isinstance(info.value.body.get("detail"), str) and info.value.body["detail"]
    response = raw.get(f"/api/agents/{missing}")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")


def test_unknown_request_fields_are_ignored(raw, new_slug):
    """Fields a request body does not know are ignored, not refused: callers pass plain dicts
    that may carry extra keys."""
    slug = new_slug("extra")
    response = raw.post("/api/agents", json={"slug": slug, "name": "Extra", "favourite_colour": "teal"})
    assert response.status_code == 201, response.text
    assert response.json()["slug"] == slug


def test_openapi_document(raw):
    response = raw.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    document = response.json()
    assert "openapi" in document
    paths = document.get("paths")
    assert isinstance(paths, dict)
    assert "/api/agents" in paths
    assert "/api/sessions/{session_id}/events" in paths


def test_docs_page_uses_same_origin_assets_only(raw):
    response = raw.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    refs = re.findall(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']""", html, flags=re.IGNORECASE)
    scripts = re.findall(r"""<script[^>]*\ssrc\s*=\s*["']([^"']+)["']""", html, flags=re.IGNORECASE)
    assert scripts, "the page should load its renderer from a script"
    external = [ref for ref in refs if re.match(r"^(https?:)?//", ref, flags=re.IGNORECASE)]
    assert not external, f"/docs must not load anything from another origin: {external}"
    # And the same-origin assets it names are actually served.
    for ref in set(refs):
        if ref.startswith(("#", "data:", "mailto:")):
            continue
        asset = raw.get(httpx.URL(str(response.url)).join(ref))
        assert asset.status_code == 200, f"/docs references {ref}, which answers {asset.status_code}"
        assert asset.content, f"{ref} is empty"
