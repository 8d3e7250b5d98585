//! The end-to-end test: a key the server generated reads a repository from a real OpenSSH
//! server (a private `sshd` on 127.0.0.1 with its own host key, trusting only that key).
//! Needs /usr/sbin/sshd (openssh-server) and git; `scripts/test` installs them. Without them
//! the test fails, saying so: it must not pass by skipping.

use super::{create_key, list_keys, private_pem, test_key};
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SSHD: &str = "/usr/sbin/sshd";

/// A private sshd, stopped and cleaned up on drop.
struct Sshd {
    child: Child,
    dir: PathBuf,
    port: u16,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Sshd {
    /// Starts sshd on a free port of 127.0.0.1, letting in `root` with `authorized_key` only,
    /// and waits (bounded) until it accepts connections.
    async fn start(authorized_key: &str) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is not installed: the end-to-end deploy key test needs the OpenSSH server \
             (apt-get install openssh-server, or run scripts/test, which installs it)"
        );
        let dir = std::env::temp_dir().join(format!("sa-sshd-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let host_key = dir.join("host_key");
        run(Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&host_key));
        std::fs::write(dir.join("authorized_keys"), format!("{authorized_key}\n")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {pid}\n\
                 AuthorizedKeysFile {ak}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\n",
                hk = host_key.display(),
                pid = dir.join("sshd.pid").display(),
                ak = dir.join("authorized_keys").display(),
            ),
        )
        .unwrap();
        // sshd refuses to start without its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {SSHD}: {e}"));
        let mut sshd = Sshd { child, dir, port };
        sshd.wait_until_listening(Duration::from_secs(15)).await;
        sshd
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }

    async fn wait_until_listening(&mut self, within: Duration) {
        let port = self.port;
        eventually(
            &format!("sshd to listen on 127.0.0.1:{port}"),
            within,
            async || {
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    return Ok(());
                }
                if let Ok(Some(status)) = self.child.try_wait() {
                    panic!("sshd exited ({status}) before listening:\n{}", self.log());
                }
                Err(format!("its log:\n{}", self.log()))
            },
        )
        .await
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A bare repository with one commit on `main`, in a temp dir removed on drop.
struct Repo(PathBuf);

impl Repo {
    fn new() -> Repo {
        let dir = std::env::temp_dir().join(format!("sa-repo-{}", uuid::Uuid::new_v4().simple()));
        let (bare, work) = (dir.join("skills.git"), dir.join("work"));
        run(Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&bare));
        run(Command::new("git").args(["init", "-q"]).arg(&work));
        std::fs::write(work.join("SKILL.md"), "# a skill\n").unwrap();
        let git = |args: &[&str]| {
            let mut c = Command::new("git");
            c.arg("-C")
                .arg(&work)
                .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
                .args(args);
            c
        };
        run(&mut git(&["add", "SKILL.md"]));
        run(&mut git(&["commit", "-q", "-m", "first"]));
        run(git(&["push", "-q"]).arg(&bare).arg("HEAD:refs/heads/main"));
        Repo(dir)
    }

    fn bare(&self) -> String {
        self.0.join("skills.git").display().to_string()
    }

    /// `git <args>` in the work tree, with an identity.
    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.0.join("work"))
            .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn a_generated_key_reads_a_repository_from_a_real_sshd_and_another_key_does_not() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "e2e").await;
    let stranger = create_key(&app, "not-registered").await;
    let sshd = Sshd::start(key["public_key"].as_str().unwrap()).await;
    let repo = Repo::new();
    let body = json!({"repo": repo.bare(), "host": format!("root@127.0.0.1:{}", sshd.port)});

    let (status, t) = test_key(&app, key["id"].as_str().unwrap(), body.clone()).await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["ok"], true, "{t}\nsshd log:\n{}", sshd.log());
    let url = format!("ssh://root@127.0.0.1:{}{}", sshd.port, repo.bare());
    assert!(t["detail"].as_str().unwrap().contains(&url), "{t}");
    let listed = list_keys(&app).await;
    assert!(listed[0]["last_used_at"].is_string(), "{listed:?}");

    // The host key is now known; a key the host does not trust is refused, with ssh's words.
    let (status, t) = test_key(&app, stranger["id"].as_str().unwrap(), body).await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["ok"], false, "{t}");
    assert!(
        t["detail"].as_str().unwrap().contains("Permission denied"),
        "{t}"
    );
    assert!(list_keys(&app).await[1]["last_used_at"].is_null());
    drop(sshd);
    app.stop().await;
}

#[tokio::test]
async fn a_deploy_key_clones_a_branch_a_tag_and_a_commit_without_git_and_leaves_no_key_behind() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "cloner").await;
    let id = GitKeyId::parse(key["id"].as_str().unwrap()).unwrap();
    let sshd = Sshd::start(key["public_key"].as_str().unwrap()).await;
    let repo = Repo::new();
    let first = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["tag", "v1"]);
    std::fs::write(repo.0.join("work/SKILL.md"), "# v2\n").unwrap();
    repo.git(&["commit", "-q", "-am", "second"]);
    let bare = repo.bare();
    repo.git(&["push", "-q", &bare, "HEAD:refs/heads/main", "refs/tags/v1"]);
    let host = format!("root@127.0.0.1:{}", sshd.port);
    let credentials = app.sessions.credentials();

    for (git_ref, want) in [
        ("main", "# v2\n"),
        ("v1", "# a skill\n"),
        (&first, "# a skill\n"),
    ] {
        let checkout = credentials
            .clone_with_key(DEFAULT_PROJECT, id, &host, &bare, git_ref)
            .await
            .unwrap_or_else(|e| panic!("{git_ref}: {e}\nsshd log:\n{}", sshd.log()));
        let tree = checkout.path();
        assert_eq!(
            std::fs::read_to_string(tree.join("SKILL.md")).unwrap(),
            want,
            "{git_ref}"
        );
        assert!(
            !tree.join(".git").exists(),
            "{git_ref}: .git is still there"
        );
        drop(checkout);
        assert!(
            !tree.exists(),
            "{git_ref}: the checkout outlived its handle"
        );
    }
    assert!(list_keys(&app).await[0]["last_used_at"].is_string());

    let e = credentials
        .clone_with_key(DEFAULT_PROJECT, id, &host, &bare, "no-such-branch")
        .await
        .unwrap_err();
    let said = e.for_user().detail.to_string();
    assert!(
        said.contains(&bare) && said.contains("no-such-branch"),
        "{said}"
    );
    let e = credentials
        .clone_with_key(
            DEFAULT_PROJECT,
            id,
            &host,
            &bare,
            "--upload-pack=touch /tmp/x",
        )
        .await
        .unwrap_err();
    assert!(
        e.for_user()
            .detail
            .to_string()
            .starts_with("ref is a branch or tag name"),
        "{e}"
    );

    // No copy of the private key is left in any key directory.
    let pem = private_pem(&app, key["id"].as_str().unwrap()).await;
    for dir in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if dir.file_name().to_string_lossy().starts_with("sa-git-") {
            let left = std::fs::read_to_string(dir.path().join("id_ed25519")).unwrap_or_default();
            assert_ne!(left, pem, "the key was left in {}", dir.path().display());
        }
    }
    drop(sshd);
    app.stop().await;
}

#[tokio::test]
async fn a_skills_source_with_a_deploy_key_is_cloned_by_the_control_plane_and_the_key_stays_out() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "skills").await;
    let sshd = Sshd::start(key["public_key"].as_str().unwrap()).await;
    let repo = Repo::new();
    let host = format!("root@127.0.0.1:{}", sshd.port);
    app.create_agent(
        "keyed",
        json!({"skills_source": {
            "kind": "git_repo", "repo": repo.bare(), "host": host, "ref": "main",
            "ssh_key_id": key["id"]
        }}),
    )
    .await;
    let s = app.create_session(json!({"agent_id": "keyed"})).await;
    let id = s["id"].as_str().unwrap().to_owned();
    let s = sandbox_agents_testkit::eventually(
        "the boot to end",
        sandbox_agents_testkit::BOOT,
        async || {
            let s = app.session(&id).await;
            (s["status"] != "provisioning").then_some(s)
        },
    )
    .await;
    assert_eq!(
        s["status"],
        "running",
        "{}\nsshd log:\n{}",
        s["error"],
        sshd.log()
    );
    // The repository is the skill: staged at .agents/<its name>, without .git.
    let (code, out, err) = app
        .exec(
            &id,
            "cat .agents/*/SKILL.md; ls -a /tmp/sandbox-agents-skills/tree",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("# a skill\n"), "{out}");
    assert!(!out.contains(".git"), "{out}");
    // No trace of the private key anywhere the sandbox user can read.
    let (_, found, _) = app
        .exec(
            &id,
            "grep -rl 'PRIVATE KEY' /workspace /tmp /home 2>/dev/null | head -n 3",
        )
        .await;
    assert_eq!(found, "", "the deploy key reached the sandbox");
    drop(sshd);
    app.stop().await;
}
