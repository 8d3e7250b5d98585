//! The embedded default database: a private PostgreSQL cluster the server runs itself, from the
//! system's PostgreSQL server binaries, when no `DATABASE_URL` is given.
//!
//! Layout under the directory given to [`EmbeddedPostgres::start`]:
//!
//! * `data/`: the cluster (PGDATA). It only ever exists complete: `initdb` writes into a
//!   temporary sibling `data.init-<random>` that is renamed to `data` once it succeeded, so a
//!   crash during the first run leaves debris that the next start deletes, never a
//!   half-initialised cluster that every later start would fail on.
//! * `run/`: the unix socket directory, mode 0700. The cluster listens on nothing else (no TCP
//!   port, so clusters never collide and nothing outside the owning user and root can reach it).
//!   Local connections are trusted and TCP is rejected, so the socket directory's mode *is* the
//!   access control.
//! * `postgres.log`: the server log.
//!
//! Per-start settings live in `data/sandbox_agents.conf`, rewritten at every start so that a
//! moved data directory still points at its own socket directory; `postgresql.conf` includes it
//! through an `include_if_exists` line appended when the cluster is created.
//!
//! The cluster runs detached from the server (`pg_ctl` starts it in its own session), so it
//! survives a crash of the server, and the next [`EmbeddedPostgres::start`] adopts it instead of
//! starting a second postmaster (see `postmaster`). For the same reason dropping an
//! [`EmbeddedPostgres`] does not stop the cluster; call [`EmbeddedPostgres::stop`].
//!
//! One server at a time may use a given directory.

mod account;
mod binaries;
mod postmaster;

pub use binaries::{find_binaries, PgBinaries};

use account::RunAs;
use anyhow::{anyhow, bail, Context};
use postmaster::PidFile;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgSslMode};
use sqlx::Connection;
use std::ffi::OsStr;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The superuser `initdb` creates, and the role the server connects as.
const ROLE: &str = "sandbox_agents";
/// The server's database, created on first start.
const DATABASE: &str = "sandbox_agents";
/// Only names the socket file (`.s.PGSQL.5432`): the cluster opens no TCP port.
const PORT: u16 = 5432;
const SETTINGS_FILE: &str = "sandbox_agents.conf";
const INCLUDE_LINE: &str = "include_if_exists 'sandbox_agents.conf'";
/// `sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
/// How long `pg_ctl` may wait for the server to start or stop (crash recovery can be slow).
const PG_CTL_TIMEOUT_SECS: &str = "60";
/// How long a started or adopted cluster has to accept connections.
const CONNECT_DEADLINE: Duration = Duration::from_secs(60);
const INIT_DIR_PREFIX: &str = "data.init-";
const LOG_TAIL_LINES: usize = 20;

/// A running embedded cluster. See the module documentation.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    /// Canonical: the settings and the adoption check compare absolute paths.
    dir: PathBuf,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    binaries: PgBinaries,
    /// The user the cluster runs as when the server is root; `None` runs it as ourselves.
    run_as: Option<RunAs>,
    /// Whether the cluster was already running when this process came (another process's).
    adopted: bool,
}

impl EmbeddedPostgres {
    /// Initialises on first run, then starts (or adopts an already running) cluster under `dir`
    /// (the server passes `<data-dir>/postgres`). Creates database `sandbox_agents` if missing.
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .with_context(|| format!("resolving {}", dir.display()))?;
        let data_dir = dir.join("data");
        let socket_dir = dir.join("run");
        check_socket_path(&socket_dir)?;
        let binaries = match std::fs::read_to_string(data_dir.join("PG_VERSION")) {
            Ok(major) => binaries::find_for_major(major.trim(), &data_dir).await?,
            Err(e) if e.kind() == ErrorKind::NotFound => find_binaries()?,
            Err(e) => return Err(e).context(format!("reading {}/PG_VERSION", data_dir.display())),
        };
        let run_as = account::service_account().await?;
        let mut pg = EmbeddedPostgres {
            dir,
            data_dir,
            socket_dir,
            binaries,
            run_as,
            adopted: false,
        };
        pg.prepare_dirs().await?;
        pg.remove_stale_init_dirs()?;
        if !pg.data_dir.exists() {
            pg.init().await?;
        }
        match postmaster::inspect(&pg.data_dir)? {
            PidFile::Running(pid) => {
                pg.adopted = true;
                tracing::info!(pid, data_dir = %pg.data_dir.display(), "adopting the embedded PostgreSQL that is already running");
            }
            PidFile::Missing => {
                postmaster::clear_stale_files(&pg.data_dir, &pg.socket_dir, false)?;
                pg.start_cluster().await?;
            }
            PidFile::Stale(reason) => {
                tracing::warn!(data_dir = %pg.data_dir.display(), %reason, "removing a stale postmaster.pid left by a crash");
                postmaster::clear_stale_files(&pg.data_dir, &pg.socket_dir, true)?;
                pg.start_cluster().await?;
            }
        }
        pg.ensure_database().await?;
        Ok(pg)
    }

    /// Whether the cluster was already running when [`EmbeddedPostgres::start`] came: another
    /// process's (a server's), which a one-off command must leave running.
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// Options to connect to database `sandbox_agents` as role `sandbox_agents` over the unix socket.
    pub fn connect_options(&self) -> PgConnectOptions {
        self.connect_options_for(DATABASE)
    }

    /// Same for another database name (tests create one database per test in a shared cluster).
    pub fn connect_options_for(&self, database: &str) -> PgConnectOptions {
        // Pinned so that PGHOST, PGPORT, PGUSER, PGDATABASE or PGSSLMODE in the environment
        // cannot point the server elsewhere (or ask for TLS, which a unix socket does not offer).
        PgConnectOptions::new_without_pgpass()
            .host(&self.socket_dir.to_string_lossy())
            .socket(&self.socket_dir)
            .port(PORT)
            .username(ROLE)
            .database(database)
            .ssl_mode(PgSslMode::Disable)
    }

    /// A URL for the same (`postgres://sandbox_agents@localhost/sandbox_agents?host=<socket
    /// dir>`) that psql and sqlx both accept: the `host` parameter names the socket directory.
    pub fn database_url(&self) -> String {
        format!(
            // `localhost` is a placeholder that both libpq and sqlx replace with the `host`
            // parameter (a socket directory); sqlx refuses an empty host.
            "postgres://{ROLE}@localhost/{DATABASE}?host={}",
            percent_encode(&self.socket_dir.to_string_lossy())
        )
    }

    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// Stops the cluster (`pg_ctl stop -m fast`: disconnects clients, checkpoints), waiting for it.
    pub async fn stop(self) -> anyhow::Result<()> {
        if !self.data_dir.join("postmaster.pid").exists() {
            tracing::warn!(data_dir = %self.data_dir.display(), "the embedded PostgreSQL was already stopped");
            return Ok(());
        }
        let args = [
            os("stop"),
            os("-D"),
            self.data_dir.as_os_str(),
            os("-m"),
            os("fast"),
            os("-w"),
            os("-t"),
            os(PG_CTL_TIMEOUT_SECS),
        ];
        self.run(&self.binaries.pg_ctl, &args)
            .await
            .map_err(|e| self.with_log_tail(e))?;
        tracing::info!(data_dir = %self.data_dir.display(), "stopped the embedded PostgreSQL");
        Ok(())
    }

    /// Creates `run/`, keeps `dir` and `run/` private (0700), and, when running as root, hands
    /// the tree to the cluster's user and makes sure that user can reach it.
    async fn prepare_dirs(&self) -> anyhow::Result<()> {
        if !self.socket_dir.exists() {
            std::fs::create_dir(&self.socket_dir)
                .with_context(|| format!("creating {}", self.socket_dir.display()))?;
        }
        for dir in [&self.dir, &self.socket_dir] {
            let mode = std::fs::metadata(dir)
                .with_context(|| format!("inspecting {}", dir.display()))?
                .mode();
            if mode & 0o777 != 0o700 {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .with_context(|| format!("making {} private (mode 0700)", dir.display()))?;
            }
        }
        let Some(user) = self.run_as.clone() else {
            return Ok(());
        };
        let meta = std::fs::metadata(&self.dir)?;
        if meta.uid() != user.uid || meta.gid() != user.gid {
            let (dir, for_user) = (self.dir.clone(), user.clone());
            tokio::task::spawn_blocking(move || account::chown_tree(&dir, &for_user))
                .await?
                .with_context(|| format!("giving {} to user {}", self.dir.display(), user.name))?;
        } else {
            // The tree is already theirs; only what root may just have created is not.
            account::chown_tree(&self.socket_dir, &user).with_context(|| {
                format!("giving {} to user {}", self.socket_dir.display(), user.name)
            })?;
        }
        account::ensure_search_access(&self.dir, &user).await
    }

    /// Deletes what crashed first runs left: initdb output that never became `data`.
    fn remove_stale_init_dirs(&self) -> anyhow::Result<()> {
        for entry in std::fs::read_dir(&self.dir)
            .with_context(|| format!("listing {}", self.dir.display()))?
        {
            let path = entry?.path();
            if path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(INIT_DIR_PREFIX))
            {
                tracing::warn!(path = %path.display(), "removing an unfinished cluster left by an interrupted first run");
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        Ok(())
    }

    /// Creates the cluster: `initdb` into a temporary directory that is renamed to `data` only
    /// once complete, so `data` existing means the cluster is whole (see the module docs).
    async fn init(&self) -> anyhow::Result<()> {
        let staging = self.dir.join(format!(
            "{INIT_DIR_PREFIX}{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        tracing::info!(data_dir = %self.data_dir.display(), "creating the embedded PostgreSQL cluster (first run)");
        let args = [
            os("-D"),
            staging.as_os_str(),
            os("-U"),
            os(ROLE),
            os("--auth-local=trust"),
            os("--auth-host=reject"),
            os("--encoding=UTF8"),
            os("--no-locale"),
        ];
        let result = async {
            self.run(&self.binaries.initdb, &args).await?;
            ensure_include_line(&staging)
        }
        .await;
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e.context("initialising the embedded PostgreSQL cluster failed"));
        }
        std::fs::rename(&staging, &self.data_dir).with_context(|| {
            format!(
                "renaming {} to {}",
                staging.display(),
                self.data_dir.display()
            )
        })?;
        // Make the rename itself durable, so a power loss cannot bring the staging name back.
        std::fs::File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .with_context(|| format!("syncing {}", self.dir.display()))?;
        Ok(())
    }

    /// Writes this start's settings and runs `pg_ctl start`, waiting until the server is ready.
    async fn start_cluster(&self) -> anyhow::Result<()> {
        ensure_include_line(&self.data_dir)?;
        self.write_settings()?;
        let log = self.dir.join("postgres.log");
        let args = [
            os("start"),
            os("-D"),
            self.data_dir.as_os_str(),
            os("-l"),
            log.as_os_str(),
            os("-w"),
            os("-t"),
            os(PG_CTL_TIMEOUT_SECS),
        ];
        self.run(&self.binaries.pg_ctl, &args)
            .await
            .map_err(|e| self.with_log_tail(e))?;
        tracing::info!(data_dir = %self.data_dir.display(), "started the embedded PostgreSQL");
        Ok(())
    }

    /// `data/sandbox_agents.conf`: only the unix socket in `run/`, and sizes for a server.
    /// fsync stays on: the event log is the product, losing commits on a power cut is not ok.
    fn write_settings(&self) -> anyhow::Result<()> {
        let socket_dir = self
            .socket_dir
            .to_str()
            .context("the data directory path is not valid UTF-8")?;
        let settings = format!(
            "# Written by Sandbox Agents at every start of the embedded cluster: edits are overwritten.\n\
             listen_addresses = ''\n\
             port = {PORT}\n\
             unix_socket_directories = {}\n\
             unix_socket_permissions = 0700\n\
             max_connections = 200\n\
             shared_buffers = 128MB\n\
             fsync = on\n",
            conf_string(&list_element(socket_dir)),
        );
        let path = self.data_dir.join(SETTINGS_FILE);
        std::fs::write(&path, settings).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        if let Some(user) = &self.run_as {
            std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid))?;
        }
        Ok(())
    }

    /// Connects to `postgres` (retrying while the server comes up, e.g. an adopted cluster still
    /// in crash recovery) and creates the server's database if it is missing.
    async fn ensure_database(&self) -> anyhow::Result<()> {
        let options = self.connect_options_for("postgres");
        let deadline = Instant::now() + CONNECT_DEADLINE;
        let mut conn = loop {
            match PgConnection::connect_with(&options).await {
                Ok(conn) => break conn,
                Err(e) if Instant::now() >= deadline => {
                    let e = anyhow!(e).context(format!(
                        "the embedded PostgreSQL did not accept connections on {}",
                        self.socket_dir.display()
                    ));
                    return Err(self.with_log_tail(e));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let exists = sqlx::query_scalar!(
            r#"select exists (select from pg_database where datname = $1) as "exists!""#,
            DATABASE
        )
        .fetch_one(&mut conn)
        .await
        .context("looking up the embedded database")?;
        if !exists {
            match sqlx::query!("create database sandbox_agents")
                .execute(&mut conn)
                .await
            {
                Ok(_) => tracing::info!(database = DATABASE, "created the embedded database"),
                // Someone else created it between our check and now: fine.
                Err(sqlx::Error::Database(e))
                    if matches!(e.code().as_deref(), Some("42P04" | "23505")) => {}
                Err(e) => return Err(e).context("creating the embedded database"),
            }
        }
        conn.close().await.ok();
        Ok(())
    }

    /// Runs a PostgreSQL program as the cluster's user, returning its output, or an error that
    /// carries it.
    async fn run(&self, program: &Path, args: &[&OsStr]) -> anyhow::Result<String> {
        let mut command = tokio::process::Command::new(program);
        command.args(args).current_dir(&self.dir);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(user) = &self.run_as {
            user.apply(&mut command);
        }
        let output = command
            .output()
            .await
            .with_context(|| format!("running {}", program.display()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            let args: Vec<_> = args.iter().map(|arg| arg.to_string_lossy()).collect();
            bail!(
                "`{} {}` failed ({}):\n{}",
                program.display(),
                args.join(" "),
                output.status,
                text.trim()
            );
        }
        Ok(text)
    }

    /// `error` with the last lines of `postgres.log`, where the server says what went wrong.
    fn with_log_tail(&self, error: anyhow::Error) -> anyhow::Error {
        let log = self.dir.join("postgres.log");
        match log_tail(&log, LOG_TAIL_LINES) {
            Some(tail) if !tail.is_empty() => {
                anyhow!("{error:#}\nlast lines of {}:\n{tail}", log.display())
            }
            _ => error,
        }
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn check_socket_path(socket_dir: &Path) -> anyhow::Result<()> {
    let socket = socket_dir.join(format!(".s.PGSQL.{PORT}"));
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        bail!(
            "the embedded PostgreSQL socket path {} is {} bytes, longer than the {MAX_SOCKET_PATH} \
             bytes a unix socket path may have; choose a shorter --data-dir or set DATABASE_URL.",
            socket.display(),
            socket.as_os_str().len()
        );
    }
    Ok(())
}

/// Appends the line including `sandbox_agents.conf` to `postgresql.conf` unless it is there.
fn ensure_include_line(data_dir: &Path) -> anyhow::Result<()> {
    let path = data_dir.join("postgresql.conf");
    let conf =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    if conf.lines().any(|line| line.trim() == INCLUDE_LINE) {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let separator = if conf.ends_with('\n') || conf.is_empty() {
        ""
    } else {
        "\n"
    };
    write!(
        file,
        "{separator}\n# Settings written by Sandbox Agents at every start.\n{INCLUDE_LINE}\n"
    )
    .and_then(|()| file.sync_all())
    .with_context(|| format!("writing {}", path.display()))
}

/// A postgresql.conf string literal.
fn conf_string(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// One element of a list setting such as `unix_socket_directories`, whose elements are split at
/// commas unless double-quoted.
fn list_element(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}

/// Percent-encodes everything but unreserved characters and `/`, for a URL query value.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The last `lines` lines of a log file, reading at most its last 64 KiB.
fn log_tail(path: &Path, lines: usize) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))
        .ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    Some(all[all.len().saturating_sub(lines)..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_values_are_quoted() {
        assert_eq!(conf_string(&list_element("/tmp/a")), "'\"/tmp/a\"'");
        assert_eq!(
            conf_string(&list_element("/tmp/it's,\"x\"\\")),
            "'\"/tmp/it''s,\"\"x\"\"\\\\\"'"
        );
    }

    #[test]
    fn urls_encode_the_socket_dir() {
        assert_eq!(percent_encode("/tmp/sa emb/run"), "/tmp/sa%20emb/run");
        assert_eq!(percent_encode("/a&b=c"), "/a%26b%3Dc");
    }

    #[test]
    fn socket_paths_must_fit_sun_path() {
        assert!(check_socket_path(Path::new("/tmp/x/run")).is_ok());
        let long = format!(
            "/{}",
            "d".repeat(MAX_SOCKET_PATH - "/.s.PGSQL.5432".len() - 1)
        );
        assert!(check_socket_path(Path::new(&long)).is_ok());
        let too_long = format!("/{}", "d".repeat(MAX_SOCKET_PATH - "/.s.PGSQL.5432".len()));
        let err = check_socket_path(Path::new(&too_long))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--data-dir"), "{err}");
    }
}
