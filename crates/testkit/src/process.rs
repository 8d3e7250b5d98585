//! A `sandbox-agents serve` process, for tests about several processes or a crash.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// The `sandbox-agents` binary of this build: the one the test runner names
/// (`NEXTEST_BIN_EXE_sandbox-agents`, `CARGO_BIN_EXE_sandbox-agents`), else the one in the
/// directory above the test executable's (`target/<profile>/deps/..`), where cargo builds a
/// package's binaries for its integration tests.
pub fn server_binary() -> PathBuf {
    for var in [
        "NEXTEST_BIN_EXE_sandbox-agents",
        "CARGO_BIN_EXE_sandbox-agents",
    ] {
        if let Some(p) = std::env::var_os(var) {
            return PathBuf::from(p);
        }
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable is under target/<profile>/deps");
    profile_dir.join("sandbox-agents")
}

/// What the processes of a multi-process test leave outside themselves: the deployment's
/// containers and a shared directory (a blob store), removed when dropped, so that a failing
/// run leaves nothing behind (the processes, killed on drop, do not remove them).
pub struct Leftovers {
    pub deployment: String,
    pub dir: std::path::PathBuf,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let deployment = self.deployment.clone();
        crate::on_own_runtime(async move { crate::remove_deployment_sandboxes(&deployment).await });
    }
}

/// A server process on `url`, killed when dropped.
pub struct ServerProcess {
    child: tokio::process::Child,
    pub base: String,
    /// This process's own data directory (unless the caller named one), removed on drop.
    data_dir: std::path::PathBuf,
    /// What it was started with, for [`ServerProcess::restart`]: the database, the port and
    /// the caller's environment.
    url: String,
    port: u16,
    env: Vec<(String, String)>,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// A key every process on the database at `url` shares, as the processes of one deployment
/// share theirs: derived from the URL and `what`.
fn shared_key(url: &str, what: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        format!("test {what} key {url}").as_bytes(),
    ))
}

/// Runs `sandbox-agents <args>` on the database at `url` with the keys its servers share, to
/// the end; returns its exit status and what it logged.
pub async fn run_command(url: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let data_dir = std::env::temp_dir().join(format!("sa-cmd-{}", uuid::Uuid::new_v4().simple()));
    let out = tokio::process::Command::new(server_binary())
        .args(args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env("SANDBOX_AGENTS_DATA_DIR", &data_dir)
        .env("SANDBOX_AGENTS_MASTER_KEY", shared_key(url, "master"))
        .env("SANDBOX_AGENTS_PREVIEW_KEY", shared_key(url, "preview"))
        .envs(env.iter().copied())
        .output()
        .await
        .expect("running the server binary");
    let _ = std::fs::remove_dir_all(&data_dir);
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), log)
}

impl ServerProcess {
    /// Starts the binary with extra environment variables and waits until it is healthy
    /// (its event listener included).
    pub async fn start(url: &str, env: &[(&str, &str)]) -> Self {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        // Never the default ./data: key files must not land in the source tree. The caller's
        // environment (its own data directory or keys) wins.
        let data_dir =
            std::env::temp_dir().join(format!("sa-proc-{}", uuid::Uuid::new_v4().simple()));
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let child = spawn(url, port, &data_dir, &env);
        let process = ServerProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
            data_dir,
            url: url.to_owned(),
            port,
            env,
        };
        process.wait_healthy().await;
        process
    }

    async fn wait_healthy(&self) {
        let base = &self.base;
        crate::eventually(
            "the server process to become healthy",
            Duration::from_secs(30),
            async || {
                let r = reqwest::get(format!("{base}/api/health")).await.ok()?;
                if r.status() != 200 {
                    return None;
                }
                let body: serde_json::Value = r.json().await.unwrap();
                (body["event_listener"] == true).then_some(())
            },
        )
        .await;
    }

    /// SIGKILL, as [`ServerProcess::kill9`], keeping what it needs to come back: returns once
    /// the process is gone (its sockets closed, its database connections with them).
    pub async fn crash(&mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    /// Starts the binary again after [`ServerProcess::crash`]: the same database, port, data
    /// directory and environment, as a supervisor restarts a server; waits until healthy.
    pub async fn restart(&mut self) {
        assert!(
            self.child.try_wait().expect("the child's status").is_some(),
            "restart a process that was stopped first"
        );
        self.child = spawn(&self.url, self.port, &self.data_dir, &self.env);
        self.wait_healthy().await;
    }

    /// SIGTERM, and the process must exit cleanly.
    pub async fn terminate(mut self) {
        let pid = self.child.id().expect("running") as i32;
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("exited in time")
            .unwrap();
        assert!(status.success(), "{status}");
    }

    /// SIGKILL: no shutdown, no cleanup, as in a crash or an OOM kill.
    pub async fn kill9(mut self) {
        self.crash().await;
    }
}

/// `sandbox-agents serve` on 127.0.0.1:`port`, killed when its handle is dropped.
fn spawn(
    url: &str,
    port: u16,
    data_dir: &std::path::Path,
    env: &[(String, String)],
) -> tokio::process::Child {
    tokio::process::Command::new(server_binary())
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", url)
        // `TEST_LOG=<filter>` shows what the process logs, as it shows the test servers'.
        .env(
            "RUST_LOG",
            std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .env("SANDBOX_AGENTS_DATA_DIR", data_dir)
        .env("SANDBOX_AGENTS_PREVIEW_BIND", "127.0.0.1:0")
        // A warm pool outlives its server by design; a test that wants one asks for it
        // and removes it.
        .env("SANDBOX_AGENTS_WARM_POOL_SIZE", "0")
        .env("SANDBOX_AGENTS_MASTER_KEY", shared_key(url, "master"))
        .env("SANDBOX_AGENTS_PREVIEW_KEY", shared_key(url, "preview"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(match std::env::var_os("TEST_LOG") {
            Some(_) => Stdio::inherit(),
            None => Stdio::null(),
        })
        .kill_on_drop(true)
        .spawn()
        .expect("starting the server binary")
}
