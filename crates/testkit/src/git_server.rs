//! A real git server over https for tests: `git http-backend` (smart HTTP) behind a small
//! Python https server, in a container of the test's own made from the sandbox image (which
//! has git and python3), with a certificate issued by a CA the test generates (`openssl` on
//! the host). Give [`GitServer::ca_bundle`] to the server under test as `--extra-ca-certs`
//! (`--extra-ca-certs`, through `TestAppBuilder::with_config`) and its sandboxes can clone from [`GitServer::host`].
//!
//! Sandboxes reach the server by its address on the default Docker bridge (checked here:
//! containers on `docker0` reach each other); the certificate names that address in its
//! subjectAltName. The host itself never sends traffic to it.
//!
//! Repositories are bare repositories in a host directory mounted read-only into the
//! container, so a test can add branches and tags after the server started.

use crate::tls::TestCa;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The port the server listens on inside its container.
pub const PORT: u16 = 8443;

/// The https server (shared with the contract tests' twin, `tests/contract/gitserver.py`).
const SERVER_PY: &str = include_str!("git_https_server.py");

/// A running git server, removed (container and files) on drop.
pub struct GitServer {
    container: String,
    ip: String,
    dir: PathBuf,
    ca: TestCa,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `git` on the host with an identity and no configuration of the developer's.
fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    c
}

impl GitServer {
    /// Starts the server in a container of the sandbox image ([`crate::test_image`]) and
    /// waits (bounded) until it listens.
    pub async fn start() -> GitServer {
        let dir = std::env::temp_dir().join(format!("sa-gitsrv-{}", uuid::Uuid::new_v4().simple()));
        for sub in ["git", "tls", "run"] {
            std::fs::create_dir_all(dir.join(sub)).expect("the server's directories");
        }
        std::fs::write(dir.join("server.py"), SERVER_PY).expect("server.py");
        let name = format!("sa-test-gitsrv-{}", uuid::Uuid::new_v4().simple());
        run(Command::new("docker")
            .args(["run", "-d", "--rm", "--name", &name, "--user", "0:0"])
            .arg("-v")
            .arg(format!("{}:/srv/git:ro", dir.join("git").display()))
            .arg("-v")
            .arg(format!("{}:/srv/tls:ro", dir.join("tls").display()))
            .arg("-v")
            .arg(format!("{}:/srv/run", dir.join("run").display()))
            .arg("-v")
            .arg(format!(
                "{}:/srv/server.py:ro",
                dir.join("server.py").display()
            ))
            .args(["--entrypoint", "sleep", &crate::test_image(), "infinity"]));
        let mut server = GitServer {
            container: name.clone(),
            ip: String::new(),
            dir,
            ca: TestCa::new(),
        };
        let ip = run(Command::new("docker").args([
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &name,
        ]));
        assert!(!ip.is_empty(), "the git server's container has no address");
        server.ip = ip;
        server.issue_certificates();
        run(Command::new("docker").args([
            "exec",
            "-d",
            &name,
            "python3",
            "/srv/server.py",
            &PORT.to_string(),
        ]));
        let ready = server.dir.join("run/ready");
        crate::eventually(
            "the git server to listen",
            Duration::from_secs(30),
            async || ready.exists().then_some(()),
        )
        .await;
        server
    }

    /// The server's certificate for its address, and the bundle `--extra-ca-certs` gets.
    fn issue_certificates(&self) {
        // Read by root in the container; the CA's key never leaves the CA's directory.
        self.ca
            .issue(&format!("IP:{}", self.ip), &self.dir.join("tls"));
        let mut bundle = std::fs::read_to_string(self.ca.cert()).expect("the CA's certificate");
        if let Ok(system) = std::fs::read_to_string(HOST_BUNDLE) {
            bundle.push_str(&system);
        }
        std::fs::write(self.dir.join("ca-bundle.pem"), bundle).expect("ca-bundle.pem");
    }

    /// `<address>:<port>`: the `host` of a `git_repo` entry.
    pub fn host(&self) -> String {
        format!("{}:{PORT}", self.ip)
    }

    /// The test CA's certificate (PEM).
    pub fn ca_cert(&self) -> PathBuf {
        self.ca.cert()
    }

    /// The test CA followed by the host's system bundle (which, on a network that inspects
    /// TLS, holds the inspecting CA): what `--extra-ca-certs` is given, so sandboxes reach
    /// both this server and the package indexes.
    pub fn ca_bundle(&self) -> PathBuf {
        self.dir.join("ca-bundle.pem")
    }

    /// Creates the bare repository `repo` (`owner/name`) with one commit on `main` holding
    /// `files` (path, content); returns a [`Repo`] to add more with.
    pub fn repo(&self, repo: &str, files: &[(&str, &str)]) -> Repo {
        let bare = self.dir.join("git").join(format!("{repo}.git"));
        let work = self.dir.join("work").join(repo.replace('/', "_"));
        std::fs::create_dir_all(&bare).expect("the bare repository");
        std::fs::create_dir_all(&work).expect("the work tree");
        run(git(&bare).args(["init", "-q", "--bare"]));
        run(git(&work).args(["init", "-q"]));
        let r = Repo { bare, work };
        r.commit("first", files);
        r.push("main");
        r
    }

    /// The server's container name (for `docker logs` when a test fails).
    pub fn container(&self) -> &str {
        &self.container
    }
}

/// The host's system bundle.
pub const HOST_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.container])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A repository of a [`GitServer`]: a work tree on the host pushing to the bare repository
/// the server serves.
pub struct Repo {
    bare: PathBuf,
    work: PathBuf,
}

impl Repo {
    /// Writes `files` into the work tree and commits them on the current branch; returns
    /// the commit's id.
    pub fn commit(&self, message: &str, files: &[(&str, &str)]) -> String {
        for (path, content) in files {
            let p = self.work.join(path);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("directories");
            std::fs::write(&p, content).expect("a file");
        }
        run(git(&self.work).args(["add", "-A"]));
        run(git(&self.work).args(["commit", "-q", "--allow-empty", "-m", message]));
        self.head()
    }

    /// The id of the work tree's current commit.
    pub fn head(&self) -> String {
        run(git(&self.work).args(["rev-parse", "HEAD"]))
    }

    /// Switches the work tree to a new branch `name` from the current commit.
    pub fn branch(&self, name: &str) {
        run(git(&self.work).args(["checkout", "-q", "-b", name]));
    }

    /// Switches the work tree to `name`.
    pub fn switch(&self, name: &str) {
        run(git(&self.work).args(["checkout", "-q", name]));
    }

    /// Tags the current commit `name` (annotated) and pushes the tag.
    pub fn tag(&self, name: &str) {
        run(git(&self.work).args(["tag", "-a", "-m", name, name]));
        run(git(&self.work)
            .args(["push", "-q"])
            .arg(&self.bare)
            .arg(format!("refs/tags/{name}")));
    }

    /// Pushes the current commit to branch `name` of the bare repository.
    pub fn push(&self, name: &str) {
        run(git(&self.work)
            .args(["push", "-q", "-f"])
            .arg(&self.bare)
            .arg(format!("HEAD:refs/heads/{name}")));
    }

    /// Serves this repository like an old server: protocol v0 only, refusing to send a
    /// commit by id unless it is a ref's tip (clients must fetch the refs and look).
    pub fn speak_only_protocol_v0(&self) {
        std::fs::write(self.bare.join("sa-protocol-v0"), "").expect("the marker");
    }

    /// The bare repository's directory on the host (what an sshd can serve too).
    pub fn bare(&self) -> &Path {
        &self.bare
    }
}
