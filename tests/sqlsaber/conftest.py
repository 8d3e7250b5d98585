"""Fixtures of the sqlsaber-sandbox provider's tests.

The unit tests (`test_backend_unit.py`) need none of these but `anyio_backend`. The end-to-end
tests run the real thing: one `sandbox-agents serve` for the run (tests/contract's harness, on
a fresh data directory, no warm pool so that every container of its deployment belongs to a
test), the scripted fake model (crates/fake-model) that sqlsaber-sandbox's pydantic-ai agent
talks to directly, and one agent with the `python` capability whose sessions the backend
opens, in the server's built-in `analysis` environment.

* `SANDBOX_AGENTS_BIN`: the server binary (default target/debug/sandbox-agents).
* `SANDBOX_AGENTS_SANDBOXD_BIN`: the static sandbox daemon (required: processes and
  absolute-path files, which the backend needs, go through it).
* `SANDBOX_AGENTS_FAKE_MODEL_BIN`: the fake model (default target/debug/fake-model).
"""
from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sandbox_agents
from sqlsaber_sandbox.execution import _KERNEL_REQUIREMENTS

import fakemodel
import harness
import sandboxes

# The client reads these; a developer's shell must not point the tests somewhere else.
for _name in ("SANDBOX_AGENTS_BASE_URL", "SANDBOX_AGENTS_API_KEY", "SANDBOX_AGENTS_PROJECT"):
    os.environ.pop(_name, None)

#: This network inspects TLS: environment builds (pip and apt in Docker) trust the host's
#: bundle, which holds the inspecting CA, as an operator's --extra-ca-certs file would.
CA_ENV = {"SANDBOX_AGENTS_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt"}

#: sqlsaber-sandbox's check that the sandbox has its kernel's packages (and `packaging`), as its
#: open runs it, with `python` (an executable of that name must exist).
KERNEL_CHECK = (
    "import sys, ipykernel, jupyter_client, matplotlib; "
    "from importlib.metadata import version; "
    "from packaging.requirements import Requirement; "
    f"requirements = map(Requirement, {_KERNEL_REQUIREMENTS!r}); "
    "sys.exit(not all(version(req.name) in req.specifier for req in requirements))"
)

#: The first build downloads matplotlib, numpy, pandas and ipykernel's dependencies with pip.
BUILD_DEADLINE = 900.0


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Server:
    process: harness.ServerProcess
    deployment: str

    @property
    def base_url(self) -> str:
        return self.process.base_url


@pytest.fixture(scope="session")
def fake_model() -> Iterator[fakemodel.FakeModel]:
    model = fakemodel.FakeModel().start()
    try:
        yield model
    finally:
        model.stop()


@pytest.fixture(scope="session")
def server(fake_model: fakemodel.FakeModel) -> Iterator[Server]:
    """The server of the run. Its teardown fails when a container of its deployment is left:
    every test closes what it opened, and the backend's close deletes the session."""
    daemon = os.environ.get("SANDBOX_AGENTS_SANDBOXD_BIN", "")
    if not daemon or not Path(daemon).is_file():
        pytest.fail(
            "SANDBOX_AGENTS_SANDBOXD_BIN must name the static sandbox daemon (scripts/test-sqlsaber "
            "sets it; build it with scripts/build-sandboxd): the backend's files and controller "
            f"go through it. It is {daemon!r}."
        )
    env = {
        "LITELLM_PROXY_API_BASE": fake_model.url,
        "LITELLM_PROXY_API_KEY": "sqlsaber-tests",
        "SANDBOX_AGENTS_WARM_POOL_SIZE": "0",
        **CA_ENV,
    }
    process = harness.ServerProcess(harness.short_tmpdir(), name="sqlsaber server", env=env)
    deployment = None
    try:
        process.start()
        deployment = sandboxes.deployment_id(process.data_dir)
        yield Server(process, deployment)
        left = sandboxes.deployment_containers(deployment)
        assert not left, f"containers of the server's deployment remain after the run:\n{sandboxes.describe(left)}"
        code = process.stop()
        assert code == 0, f"the server exited with {code} on SIGTERM\n{process.log_tail(80)}"
    finally:
        if deployment:
            sandboxes.force_remove(sandboxes.deployment_containers(deployment))
            sandboxes.remove_deployment_images(deployment)
        process.cleanup()


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[sandbox_agents.Client]:
    with sandbox_agents.Client(base_url=server.base_url, timeout=60.0) as c:
        yield c


@pytest.fixture
async def aclient(server: Server) -> AsyncIterator[sandbox_agents.AsyncClient]:
    """The published async client, as a user of the backend builds it (and owns it)."""
    async with sandbox_agents.AsyncClient(base_url=server.base_url, timeout=60.0) as c:
        yield c


@pytest.fixture(scope="session")
def analyst(client: sandbox_agents.Client) -> Any:
    """The agent whose sessions the backend opens (its own model is never called). It has the
    `python` capability and no environment, so its sessions boot in the server's built-in
    `analysis` environment, which has what sqlsaber-sandbox's kernel needs."""
    slug = f"analyst-{uuid.uuid4().hex[:8]}"
    return client.agents.create(
        slug=slug, name="sqlsaber analyst", instructions="Runs sqlsaber-sandbox kernels.",
        capabilities=["python"],
    )


@pytest.fixture(scope="session")
def analysis_environment(client: sandbox_agents.Client, analyst: Any) -> Any:
    """The built-in `analysis` environment, built: the server makes it when the first session
    of a python agent is created, and that session waits for its image. Checked with
    sqlsaber-sandbox's own package check, which would otherwise pip-install the kernel's
    packages inside every sandbox and hide a wrong environment."""
    first = client.sessions.create(analyst.slug, title="builds the analysis environment")
    try:
        running = client.sessions.wait_until_running(first.id, timeout=BUILD_DEADLINE)
        assert running.status == "running"
    finally:
        client.sessions.delete(first.id)
    (env,) = [e for e in client.environments.list() if e.name == "analysis"]
    assert env.build.status == "ready", env.build
    check = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "python", env.build.image, "-c", KERNEL_CHECK],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert check.returncode == 0, f"{env.build.image} lacks sqlsaber-sandbox's kernel packages:\n{check.stderr}"
    return env


@pytest.fixture
def janitor(server: Server) -> Iterator[sandboxes.Janitor]:
    """Deletes the sessions a test hands it, whatever happened in it (a backend that failed
    to close must not leave a sandbox behind)."""
    j = sandboxes.Janitor(server.base_url)
    yield j
    j.cleanup()


# Server logs on failure, as tests/contract shows them.
pytest_plugins = ["server_logs"]
