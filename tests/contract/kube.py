"""The suite on `--backend kubernetes`: `SA_CONTRACT_BACKEND=kubernetes` (default `docker`).

Every server process then gets a namespace of its own on the test cluster
(`scripts/kube-test-cluster`; its admin kubeconfig is `SANDBOX_AGENTS_TEST_KUBECONFIG`), with a
service account bound to the Role of `deploy/kubernetes/role.yaml` and nothing else, and is
started with `--backend kubernetes` and a kubeconfig holding that account's token, as
`crates/testkit/src/kube.rs` does for the Rust tests: the server runs with exactly the
permissions a deployment grants it. The init container's image is
`SANDBOX_AGENTS_TEST_SANDBOXD_IMAGE` (`ensure_sandboxd_image` in scripts/lib.sh).

The cluster is asked with its own `kubectl` (built beside kube-apiserver by
`scripts/kube-test-cluster build`), as the admin, what pods a session or a deployment has:
the tests check the server's claims against the API server, as on Docker they check them
against dockerd. Tests that are Docker-only by nature carry `@pytest.mark.docker_only(reason)`
and are deselected with `-m "not docker_only"` (README.md lists them).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

BACKEND = os.environ.get("SA_CONTRACT_BACKEND", "docker")
if BACKEND not in ("docker", "kubernetes"):
    raise RuntimeError(f"SA_CONTRACT_BACKEND is docker or kubernetes, not {BACKEND!r}")
ENABLED = BACKEND == "kubernetes"

REPO_ROOT = Path(__file__).resolve().parents[2]

#: The labels the backend puts on every sandbox pod (crates/sandbox/src/kubernetes/pod.rs).
LABEL_SESSION = "sandbox-agents.io/session"
LABEL_DEPLOYMENT = "sandbox-agents.io/deployment"
#: The label of a pooled pod no session has claimed yet (where the backend has a warm pool).
LABEL_POOL = "sandbox-agents.io/pool"
#: The name of the service account (and of the Role's binding) in each namespace.
ACCOUNT = "sandbox-agents"
#: The service account's token outlives any run of the suite.
TOKEN_DURATION = "12h"


def _required(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(
            f"SA_CONTRACT_BACKEND=kubernetes needs {name}: {what} "
            "(scripts/test sets it; by hand: scripts/kube-test-cluster up DIR prints the kubeconfig, "
            "and `. scripts/lib.sh; ensure_sandboxd_image | tail -1` the image)"
        )
    return value


def admin_kubeconfig() -> str:
    return _required("SANDBOX_AGENTS_TEST_KUBECONFIG", "the test cluster's admin kubeconfig")


def sandboxd_image() -> str:
    return _required("SANDBOX_AGENTS_TEST_SANDBOXD_IMAGE", "the image the init container copies the daemon from")


@functools.cache
def kubectl_binary() -> str:
    """The test cluster's kubectl: `scripts/kube-test-cluster build` prints the directory that
    holds it, last (a no-op once built)."""
    out = subprocess.run(
        [str(REPO_ROOT / "scripts" / "kube-test-cluster"), "build"],
        capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL,
    )
    if out.returncode != 0:
        raise RuntimeError(f"scripts/kube-test-cluster build failed:\n{out.stderr[-3000:]}")
    return str(Path(out.stdout.strip().splitlines()[-1]) / "kubectl")


def kubectl(*args: str, stdin: str | None = None, timeout: float = 60.0, check: bool = True) -> str:
    """Runs the test cluster's kubectl as its admin; its stdout, or an error with its stderr."""
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", admin_kubeconfig(), *args],
        input=stdin, capture_output=True, text=True, timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


class Namespace:
    """A namespace of one server process, with the deployment's Role bound to a service
    account whose token `kubeconfig` holds."""

    def __init__(self) -> None:
        self.name = f"sa-contract-{uuid.uuid4().hex[:12]}"
        self.dir = Path(tempfile.mkdtemp(prefix="sa-kube-", dir="/tmp"))
        self.kubeconfig = self.dir / "kubeconfig"
        kubectl("create", "namespace", self.name)
        kubectl("label", "namespace", self.name, "sandbox-agents.io/test=true")
        kubectl("-n", self.name, "create", "serviceaccount", ACCOUNT)
        # The file names a deployment's sandboxes' namespace; this server's is its own.
        role = json.loads(
            kubectl("create", "--dry-run=client", "-o", "json", "-f", str(REPO_ROOT / "deploy/kubernetes/role.yaml"))
        )
        role["metadata"]["namespace"] = self.name
        kubectl("create", "-f", "-", stdin=json.dumps(role))
        kubectl(
            "-n", self.name, "create", "rolebinding", ACCOUNT,
            f"--role={role['metadata']['name']}", f"--serviceaccount={self.name}:{ACCOUNT}",
        )
        token = kubectl("-n", self.name, "create", "token", ACCOUNT, f"--duration={TOKEN_DURATION}").strip()
        admin = json.loads(kubectl("config", "view", "--raw", "-o", "json"))
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": admin["clusters"][0]["cluster"]}],
            "users": [{"name": ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": ACCOUNT, "namespace": self.name}}],
            "current-context": "test",
        }
        self.kubeconfig.write_text(json.dumps(config))
        self.kubeconfig.chmod(0o600)

    def server_args(self) -> list[str]:
        """The flags that put a server's sandboxes in this namespace."""
        return [
            "--backend", "kubernetes",
            "--kubernetes-namespace", self.name,
            "--kubernetes-kubeconfig", str(self.kubeconfig),
            "--kubernetes-sandboxd-image", sandboxd_image(),
        ]

    def remove(self) -> None:
        """Deletes the namespace's pods at once (the node removes their containers), then the
        namespace (no controller-manager runs to finalize it: it stays Terminating, empty)."""
        kubectl("-n", self.name, "delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false", check=False)
        kubectl("delete", "namespace", self.name, "--wait=false", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


# -- pods, as sandboxes.py asks for containers --


def pods(selector: str) -> list[dict]:
    """Every pod, in any namespace, that `selector` (a label selector) matches and that is not
    being deleted."""
    listed = json.loads(kubectl("get", "pods", "--all-namespaces", "-l", selector, "-o", "json"))
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


def running(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") == "Running"


def pod_line(pod: dict) -> str:
    """namespace/name, phase, labels; for failure messages."""
    meta = pod["metadata"]
    return f"{meta['namespace']}/{meta['name']} {pod.get('status', {}).get('phase')} {json.dumps(meta.get('labels', {}))}"


def find(names: list[str]) -> list[dict]:
    """The pods named `names`, in any namespace (the backend's pod names carry the session id
    and a nonce, so a name is one pod)."""
    wanted = set(names)
    listed = json.loads(kubectl("get", "pods", "--all-namespaces", "-o", "json"))
    return [p for p in listed["items"] if p["metadata"]["name"] in wanted]


def delete(names: list[str]) -> None:
    """Force-deletes the pods named `names`."""
    for pod in find(names):
        meta = pod["metadata"]
        kubectl(
            "-n", meta["namespace"], "delete", "pod", meta["name"], "--grace-period=0", "--force", "--wait=false",
            check=False,
        )
