"""A real git server over https for contract tests: the twin of `testkit::git_server`
(`crates/testkit/src/git_server.rs`), running the same `git_https_server.py` in a container of
the sandbox image, with a certificate of a CA made here (`openssl`) for the container's address
on the Docker bridge, which sandboxes reach. `ca_bundle` (that CA, then the host's bundle) is
what the server under test gets as `SANDBOX_AGENTS_EXTRA_CA_CERTS`.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from harness import wait_until
import sandboxes

SCRIPT = Path(__file__).resolve().parents[2] / "crates" / "testkit" / "src" / "git_https_server.py"
PORT = 8443
HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def run(*args: str, cwd: Path | None = None) -> str:
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"{args} failed: {out.stdout}{out.stderr}"
    return out.stdout.strip()


def git(work: Path, *args: str) -> str:
    return run("git", "-C", str(work), "-c", "user.name=test", "-c", "user.email=test@example.com",
               "-c", "init.defaultBranch=main", *args)


class GitServer:
    def __init__(self, image: str = sandboxes.DEFAULT_IMAGE) -> None:
        self.image = image
        self.dir = Path(tempfile.mkdtemp(prefix="sa-gitsrv-"))
        self.name = f"sa-test-gitsrv-{uuid.uuid4().hex}"
        self.ip = ""

    def start(self) -> "GitServer":
        for sub in ("git", "tls", "run", "ca", "work"):
            (self.dir / sub).mkdir()
        shutil.copy(SCRIPT, self.dir / "server.py")
        sandboxes.docker(
            "run", "-d", "--rm", "--name", self.name, "--user", "0:0",
            "-v", f"{self.dir / 'git'}:/srv/git:ro", "-v", f"{self.dir / 'tls'}:/srv/tls:ro",
            "-v", f"{self.dir / 'run'}:/srv/run", "-v", f"{self.dir / 'server.py'}:/srv/server.py:ro",
            "--entrypoint", "sleep", self.image, "infinity",
        )
        self.ip = sandboxes.docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", self.name
        ).strip()
        ca, tls = self.dir / "ca", self.dir / "tls"
        run("openssl", "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=sandbox-agents contract CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=ca)
        run("openssl", "req", *EC, "-keyout", str(tls / "server.key"), "-out", str(ca / "server.csr"),
            "-subj", "/CN=sandbox-agents contract git server")
        (ca / "ext.cnf").write_text(f"subjectAltName=IP:{self.ip}\nextendedKeyUsage=serverAuth\n")
        run("openssl", "x509", "-req", "-days", "2", "-CAcreateserial", "-in", "server.csr",
            "-CA", "ca.crt", "-CAkey", "ca.key", "-out", str(tls / "server.crt"), "-extfile", "ext.cnf", cwd=ca)
        bundle = (ca / "ca.crt").read_text() + (HOST_BUNDLE.read_text() if HOST_BUNDLE.exists() else "")
        self.ca_bundle.write_text(bundle)
        sandboxes.docker("exec", "-d", self.name, "python3", "/srv/server.py", str(PORT))
        wait_until(lambda: (self.dir / "run" / "ready").exists(), timeout=30, what="the git server to listen")
        return self

    @property
    def host(self) -> str:
        return f"{self.ip}:{PORT}"

    @property
    def ca_bundle(self) -> Path:
        return self.dir / "ca-bundle.pem"

    def repo(self, name: str, files: dict[str, str]) -> str:
        """A bare repository `name` (owner/name) with one commit of `files` on main; its id."""
        bare = self.dir / "git" / f"{name}.git"
        work = self.dir / "work" / name.replace("/", "_")
        bare.mkdir(parents=True)
        work.mkdir()
        run("git", "init", "-q", "--bare", str(bare))
        git(work, "init", "-q")
        for path, content in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(content)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "first")
        git(work, "push", "-q", str(bare), "HEAD:refs/heads/main")
        return git(work, "rev-parse", "HEAD")

    def stop(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
