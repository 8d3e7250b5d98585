//! The embedded cluster, for real: initdb, restart, recovery from a stale pid file, adoption of a
//! running cluster and, as root, reaching a data directory under a directory only root may enter.

use sandbox_agents_store::embedded::{find_binaries, EmbeddedPostgres};
use sqlx::{Connection, PgConnection};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A short-named scratch directory (the socket path must fit in 107 bytes). On drop it stops a
/// cluster a failed test left running, then removes everything.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let path = PathBuf::from(format!("/tmp/sa-emb-{}", &id[..10]));
        std::fs::create_dir(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut pending = vec![self.0.clone()];
        while let Some(dir) = pending.pop() {
            // (Never "stop" the fake pid file naming this test process.)
            let pid = std::fs::read_to_string(dir.join("postmaster.pid")).unwrap_or_default();
            if !pid.is_empty() && !pid.starts_with(&format!("{}\n", std::process::id())) {
                let owner = std::fs::metadata(&dir).unwrap();
                let mut stop = std::process::Command::new(find_binaries().unwrap().pg_ctl);
                stop.args(["stop", "-m", "immediate", "-w", "-D"])
                    .arg(&dir)
                    .current_dir("/");
                if owner.uid() != current_euid() {
                    std::os::unix::process::CommandExt::uid(&mut stop, owner.uid());
                    std::os::unix::process::CommandExt::gid(&mut stop, owner.gid());
                }
                let _ = stop.output();
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            pending.extend(
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_dir() && !p.is_symlink()),
            );
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn current_euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn postmaster_pid(dir: &Path) -> u32 {
    let text = std::fs::read_to_string(dir.join("data/postmaster.pid")).unwrap();
    text.lines().next().unwrap().trim().parse().unwrap()
}

async fn connect(pg: &EmbeddedPostgres) -> PgConnection {
    PgConnection::connect_with(&pg.connect_options())
        .await
        .unwrap()
}

async fn system_identifier(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("select system_identifier from pg_control_system()")
        .fetch_one(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn restarts_reuse_the_cluster_and_survive_a_stale_pid_file() {
    let scratch = Scratch::new();
    let dir = scratch.0.join("postgres");

    // First run: initdb, start, create the database.
    let pg = EmbeddedPostgres::start(&dir).await.unwrap();
    let mut conn = connect(&pg).await;
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    let listen: String = sqlx::query_scalar("show listen_addresses")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        listen, "",
        "the cluster must listen on the unix socket only"
    );
    let fsync: String = sqlx::query_scalar("show fsync")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(fsync, "on");
    let system_id = system_identifier(&mut conn).await;
    sqlx::query("create table marker (note text)")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("insert into marker values ('first run')")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    let dir = dir.canonicalize().unwrap();
    assert!(dir.join("data/PG_VERSION").is_file());
    assert!(dir.join("postgres.log").is_file());
    assert_eq!(
        std::fs::metadata(dir.join("run")).unwrap().mode() & 0o777,
        0o700
    );
    assert_eq!(pg.socket_dir(), dir.join("run"));
    let settings = std::fs::read_to_string(dir.join("data/sandbox_agents.conf")).unwrap();
    assert!(settings.contains("listen_addresses = ''"), "{settings}");
    let conf = std::fs::read_to_string(dir.join("data/postgresql.conf")).unwrap();
    assert_eq!(
        conf.matches("include_if_exists 'sandbox_agents.conf'")
            .count(),
        1
    );
    assert!(pg
        .database_url()
        .starts_with("postgres://sandbox_agents@localhost/sandbox_agents?host=/"));

    pg.stop().await.unwrap();
    assert!(!dir.join("data/postmaster.pid").exists());

    // Second run: the same cluster, not a new one.
    let pg = EmbeddedPostgres::start(&dir).await.unwrap();
    let mut conn = connect(&pg).await;
    assert_eq!(
        system_identifier(&mut conn).await,
        system_id,
        "initdb must not run again"
    );
    let note: String = sqlx::query_scalar("select note from marker")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(note, "first run");
    conn.close().await.unwrap();
    pg.stop().await.unwrap();
    let conf = std::fs::read_to_string(dir.join("data/postgresql.conf")).unwrap();
    assert_eq!(
        conf.matches("include_if_exists 'sandbox_agents.conf'")
            .count(),
        1
    );

    // A crash: postmaster.pid and the socket lock survive and name a live process that is not
    // postgres (the PID was reused), and an interrupted first run left a staging directory.
    let me = std::process::id();
    std::fs::write(
        dir.join("data/postmaster.pid"),
        format!("{me}\n{}\n", dir.join("data").display()),
    )
    .unwrap();
    std::fs::write(dir.join("run/.s.PGSQL.5432.lock"), format!("{me}\n")).unwrap();
    std::fs::create_dir(dir.join("data.init-0123456789ab")).unwrap();

    let pg = EmbeddedPostgres::start(&dir).await.unwrap();
    assert_ne!(postmaster_pid(&dir), me);
    assert!(!dir.join("data.init-0123456789ab").exists());
    let mut conn = connect(&pg).await;
    let note: String = sqlx::query_scalar("select note from marker")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(note, "first run");
    assert_eq!(system_identifier(&mut conn).await, system_id);
    conn.close().await.unwrap();
    pg.stop().await.unwrap();
}

#[tokio::test]
async fn start_adopts_a_cluster_that_is_already_running() {
    let scratch = Scratch::new();
    let dir = scratch.0.join("postgres");

    let first = EmbeddedPostgres::start(&dir).await.unwrap();
    let pid = postmaster_pid(&dir);
    // The server "crashes": nothing stops the cluster.
    std::mem::forget(first);

    let pg = EmbeddedPostgres::start(&dir).await.unwrap();
    assert_eq!(
        postmaster_pid(&dir),
        pid,
        "the running postmaster must be adopted, not replaced"
    );
    let mut conn = connect(&pg).await;
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);

    // Another database in the same cluster, as tests use them.
    sqlx::query("create database other_db")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let mut other = PgConnection::connect_with(&pg.connect_options_for("other_db"))
        .await
        .unwrap();
    let name: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(name, "other_db");
    other.close().await.unwrap();

    // The URL works for libpq tools.
    if let Ok(psql) = std::process::Command::new("psql")
        .arg(pg.database_url())
        .args(["-XAtc", "select current_user"])
        .output()
    {
        assert!(
            psql.status.success(),
            "{}",
            String::from_utf8_lossy(&psql.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&psql.stdout).trim(),
            "sandbox_agents"
        );
    }

    pg.stop().await.unwrap();
    assert!(!dir.join("data/postmaster.pid").exists());
}

/// As root the cluster runs as an unprivileged user, who must be able to reach the data
/// directory even below a directory that only root may enter (a checkout in /root).
#[tokio::test]
async fn as_root_the_cluster_reaches_a_data_dir_below_a_private_directory() {
    if current_euid() != 0 {
        return;
    }
    let scratch = Scratch::new();
    let private = scratch.0.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let dir = private.join("postgres");

    let pg = EmbeddedPostgres::start(&dir).await.unwrap();
    let mut conn = connect(&pg).await;
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    conn.close().await.unwrap();

    let owner = std::fs::metadata(dir.join("data")).unwrap().uid();
    assert_ne!(owner, 0, "the cluster must not belong to root");
    let mode = std::fs::metadata(&private).unwrap().mode() & 0o777;
    assert_eq!(
        mode & 0o044,
        0,
        "only search permission may be granted, got {mode:o}"
    );
    pg.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_start_reports_the_server_log() {
    let scratch = Scratch::new();
    let dir = scratch.0.join("postgres");
    EmbeddedPostgres::start(&dir)
        .await
        .unwrap()
        .stop()
        .await
        .unwrap();

    let conf = dir.join("data/postgresql.conf");
    let original = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, format!("{original}no_such_setting = 1\n")).unwrap();
    let err = format!("{:#}", EmbeddedPostgres::start(&dir).await.unwrap_err());
    assert!(err.contains("pg_ctl"), "{err}");
    assert!(err.contains("last lines of"), "{err}");
    assert!(
        err.contains("no_such_setting"),
        "the log tail must say what is wrong: {err}"
    );

    std::fs::write(&conf, original).unwrap();
    EmbeddedPostgres::start(&dir)
        .await
        .unwrap()
        .stop()
        .await
        .unwrap();
}
