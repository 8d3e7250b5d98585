//! The facts a result needs beside it: the machine, PostgreSQL, and the commit.

use sandbox_agents_store::Db;
use serde_json::{json, Value};
use std::process::Command;

#[derive(Debug)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory: String,
    pub kernel: String,
    pub postgres: String,
    /// `fsync`, `synchronous_commit`, `shared_buffers`, `max_connections`.
    pub pg_settings: Vec<(String, String)>,
    pub commit: String,
    pub date: String,
    /// `/proc/loadavg` when the run started: other work on the machine skews every number.
    pub load_start: String,
    /// The same when it ended (filled in by the caller).
    pub load_end: String,
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

fn command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn commit() -> String {
    // For a build from an exported tree (no .git): the caller says what it was.
    if let Ok(c) = std::env::var("SANDBOX_AGENTS_BENCH_COMMIT") {
        return c;
    }
    let Some(head) = command("git", &["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    // Tracked files changed since HEAD: the numbers are of a tree that is not that commit.
    match command("git", &["status", "--porcelain", "--untracked-files=no"]) {
        Some(_) => format!("{head} (with uncommitted changes)"),
        None => head,
    }
}

pub async fn collect(db: &Db) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".into(), |(_, v)| v.trim().to_owned());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or_else(
            || "unknown".into(),
            |kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0),
        );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_owned());
    let postgres = sqlx::query_scalar::<_, String>("select version()")
        .fetch_one(db)
        .await
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let pg_settings = sqlx::query_as::<_, (String, String)>(
        "select name, setting || coalesce(unit, '') from pg_settings
         where name in ('fsync', 'synchronous_commit', 'shared_buffers', 'max_connections', 'wal_level')
         order by name",
    )
    .fetch_all(db)
    .await
    .unwrap_or_default();
    Machine {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        memory,
        kernel,
        postgres,
        pg_settings,
        commit: commit(),
        date: command("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "unknown".into()),
        load_start: loadavg(),
        load_end: String::new(),
    }
}

impl Machine {
    pub fn json(&self) -> Value {
        json!({
            "nproc": self.cpus,
            "cpu_model": self.cpu_model,
            "memory": self.memory,
            "kernel": self.kernel,
            "postgres": self.postgres,
            "postgres_settings": self.pg_settings.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "commit": self.commit,
            "date": self.date,
            "loadavg_start": self.load_start,
            "loadavg_end": self.load_end,
        })
    }
}
