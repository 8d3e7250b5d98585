"""Fixtures shared by the contract tests.

* `server`: one `sandbox-agents serve` for the whole run, on a fresh data directory (its own
  embedded PostgreSQL). Exposes `base_url` and `data_dir`. Stopped with SIGTERM at the end,
  which must exit 0 and leave no PostgreSQL running.
* `client`: the published `sandbox_agents.Client` pointed at it, exactly as a user builds it.
* `recorded`: the same client over an `httpx.Client` that records every exchange, for the
  few things the client does not surface (status codes, headers sent).
* `raw`: plain httpx, for what the client never does (unknown routes, wrong methods, SSE
  frames as bytes on the wire).
* `new_slug`: unique agent slugs, so tests never depend on each other's data.

Set `SANDBOX_AGENTS_BIN` to test another binary; `SA_CONTRACT_KEEP_DATA=1` keeps data dirs.
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sandbox_agents

import fakemodel
import harness
import kube
import sandboxes

# The client reads these; a developer's shell must not point the tests somewhere else.
for _name in ("SANDBOX_AGENTS_BASE_URL", "SANDBOX_AGENTS_API_KEY", "SANDBOX_AGENTS_PROJECT"):
    os.environ.pop(_name, None)


#: Webhook receivers in these tests listen on 127.0.0.1, and retries should come quickly.
WEBHOOK_ENV = {
    "SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE": "true",
    "SANDBOX_AGENTS_WEBHOOK_RETRY_BASE_SECONDS": "0.2",
    "SANDBOX_AGENTS_WEBHOOK_RETRY_MAX_SECONDS": "1",
}

#: This network inspects TLS: builds (and sandboxes) trust the host's bundle, which holds the
#: inspecting CA, as an operator's --extra-ca-certs file would. Not on Kubernetes: that backend
#: writes no system files into a sandbox (no extra CA trust), and builds no images.
CA_ENV = {} if kube.ENABLED else {"SANDBOX_AGENTS_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt"}


@dataclass
class Server:
    process: harness.ServerProcess

    @property
    def base_url(self) -> str:
        return self.process.base_url

    @property
    def data_dir(self) -> Path:
        return self.process.data_dir


@pytest.fixture(scope="session")
def fake_model():
    """The scripted model every server of the run talks to (as its LiteLLM proxy)."""
    model = fakemodel.FakeModel().start()
    try:
        yield model
    finally:
        model.stop()


def model_env(model: fakemodel.FakeModel) -> dict[str, str]:
    """What points a server at the fake model."""
    return {"LITELLM_PROXY_API_BASE": model.url, "LITELLM_PROXY_API_KEY": "contract-tests"}


@pytest.fixture(scope="session")
def server(fake_model):
    process = harness.ServerProcess(
        harness.short_tmpdir(), name="shared server", env={**model_env(fake_model), **WEBHOOK_ENV, **CA_ENV}
    )
    deployment = None
    try:
        process.start()
        deployment = sandboxes.deployment_id(process.data_dir)
        yield Server(process)
        code = process.stop()
        assert code == 0, f"the server exited with {code} on SIGTERM\n{process.log_tail(80)}"
        harness.wait_until(
            lambda: not harness.postgres_pids(process.data_dir),
            timeout=10,
            what="the embedded PostgreSQL to be stopped by the server's shutdown",
        )
        # Every test deletes the sessions it created: no sandbox of this deployment may remain
        # but the warm pool's unclaimed ones.
        left = sandboxes.leftover_containers(deployment)
        assert not left, f"containers of the shared server remain after the run:\n{sandboxes.describe(left)}"
    finally:
        if deployment:
            sandboxes.force_remove(sandboxes.deployment_containers(deployment))
            sandboxes.remove_deployment_images(deployment)
        process.cleanup()


@pytest.fixture
def client(server):
    with sandbox_agents.Client(base_url=server.base_url) as c:
        yield c


@dataclass
class Exchange:
    method: str
    url: httpx.URL
    request_headers: httpx.Headers
    request_body: bytes
    status: int
    response_headers: httpx.Headers


@dataclass
class Recorder:
    exchanges: list[Exchange] = field(default_factory=list)

    def hook(self, response: httpx.Response) -> None:
        request = response.request
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = b""
        self.exchanges.append(
            Exchange(request.method, request.url, request.headers, body, response.status_code, response.headers)
        )

    def last(self, method: str | None = None, path_suffix: str = "") -> Exchange:
        for ex in reversed(self.exchanges):
            if (method is None or ex.method == method) and ex.url.path.endswith(path_suffix):
                return ex
        raise AssertionError(f"no {method or ''} request to …{path_suffix} was recorded")

    def clear(self) -> None:
        self.exchanges.clear()


@pytest.fixture
def recorded(server):
    """`(client, recorder)`: the published client over an httpx.Client that records exchanges."""
    recorder = Recorder()
    http = httpx.Client(follow_redirects=True, event_hooks={"response": [recorder.hook]})
    c = sandbox_agents.Client(base_url=server.base_url, http_client=http)
    try:
        yield c, recorder
    finally:
        c.close()
        http.close()


@pytest.fixture
def raw(server):
    with httpx.Client(base_url=server.base_url, timeout=30.0) as h:
        yield h


def unique_slug(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def new_slug():
    return unique_slug


# Server logs on failure: `server_logs` (shared with tests/sqlsaber).
pytest_plugins = ["server_logs"]
