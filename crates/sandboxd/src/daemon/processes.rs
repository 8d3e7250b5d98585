//! Background processes: started by one request, outliving it and the connection it came
//! on, listed with their state and recent output, signalled, killed and waited for. They
//! belong to the daemon, so they end with the sandbox (or with the daemon, if it dies).

use super::error::{Failure, Json};
use super::exec::{self, Io, Start};
use super::output::Tail;
use super::{kill, Daemon};
use crate::proto::{
    ErrorKind, ExecSpec, ProcessDetail, ProcessInfo, ProcessSpec, ProcessState, SignalRequest,
    CHUNK, MAX_PROCESSES, PROCESS_TAIL,
};
use axum::extract::{Path, Query, State};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

/// How long a kill waits between TERM and KILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// The longest a wait request waits.
const MAX_WAIT: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct Processes {
    table: Mutex<BTreeMap<String, Arc<Proc>>>,
}

struct Proc {
    pid: u32,
    mark: String,
    state: Mutex<ProcState>,
    ended: watch::Receiver<bool>,
}

struct ProcState {
    info: ProcessInfo,
    stdout: Tail,
    stderr: Tail,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

impl Proc {
    fn info(&self) -> ProcessInfo {
        self.lock().info.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProcState> {
        // A panic while holding it leaves plain data behind; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn detail(&self) -> ProcessDetail {
        let s = self.lock();
        ProcessDetail {
            info: s.info.clone(),
            stdout: s.stdout.text(),
            stderr: s.stderr.text(),
            stdout_dropped: s.stdout.dropped,
            stderr_dropped: s.stderr.dropped,
        }
    }

    async fn wait(&self, limit: Duration) -> ProcessInfo {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(limit, ended.wait_for(|e| *e)).await;
        self.info()
    }
}

impl Processes {
    fn get(&self, id: &str) -> Result<Arc<Proc>, Failure> {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| Failure::new(ErrorKind::NotFound, format!("no process {id}")))
    }

    /// Removes `proc` from the table, unless a concurrent kill already did.
    fn forget(&self, id: &str, proc: &Arc<Proc>) {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if table.get(id).is_some_and(|p| Arc::ptr_eq(p, proc)) {
            table.remove(id);
        }
    }

    /// Makes room for one more: the oldest exited processes are forgotten first; with
    /// [`MAX_PROCESSES`] running, none can start.
    fn admit(&self, id: String, proc: Arc<Proc>) -> Result<(), Failure> {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        while table.len() >= MAX_PROCESSES {
            let oldest = table
                .iter()
                .filter(|(_, p)| *p.ended.borrow())
                .min_by_key(|(_, p)| p.info().started_at_ms)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => {
                    table.remove(&id);
                }
                None => {
                    return Err(Failure::new(
                        ErrorKind::TooLarge,
                        format!("{MAX_PROCESSES} background processes are running: kill one first"),
                    ))
                }
            }
        }
        table.insert(id, proc);
        Ok(())
    }
}

pub async fn start(
    State(daemon): State<Arc<Daemon>>,
    Json(spec): Json<ProcessSpec>,
) -> Result<Json<ProcessInfo>, Failure> {
    let exec_spec = ExecSpec {
        argv: spec.argv.clone(),
        cwd: spec.cwd.clone(),
        env: spec.env,
        ..Default::default()
    };
    let started = match exec::start(&exec_spec).await {
        Ok(s) => s,
        Err(Start::Refused(f)) => return Err(f),
        Err(Start::CannotRun { message, .. }) => {
            return Err(Failure::new(ErrorKind::NotFound, message.trim_end()))
        }
    };
    let id = format!("proc_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let cwd = spec.cwd.unwrap_or_else(|| {
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    });
    let info = ProcessInfo {
        id: id.clone(),
        pid: started.pid,
        argv: spec.argv,
        cwd,
        state: ProcessState::Running,
        exit_code: None,
        signal: None,
        started_at_ms: now_ms(),
        ended_at_ms: None,
    };
    let (ended_tx, ended) = watch::channel(false);
    let proc = Arc::new(Proc {
        pid: started.pid,
        mark: started.mark.clone(),
        state: Mutex::new(ProcState {
            info: info.clone(),
            stdout: Tail::new(PROCESS_TAIL),
            stderr: Tail::new(PROCESS_TAIL),
        }),
        ended,
    });
    let mut child = started.child;
    if let Err(f) = daemon.processes.admit(id, proc.clone()) {
        kill::tree(started.pid, &started.mark, Signal::SIGKILL).await;
        let _ = child.wait().await;
        return Err(f);
    }
    let Io::Pipes { stdout, stderr, .. } = started.io else {
        unreachable!("background processes run on pipes");
    };
    tokio::spawn(collect(proc.clone(), stdout, true));
    tokio::spawn(collect(proc.clone(), stderr, false));
    tokio::spawn(async move {
        let status = child.wait().await;
        {
            let mut s = proc.lock();
            s.info.state = ProcessState::Exited;
            s.info.ended_at_ms = Some(now_ms());
            if let Ok(status) = status {
                let (code, signal) = exec::code_of(&status);
                s.info.exit_code = Some(code);
                s.info.signal = signal;
            }
        }
        let _ = ended_tx.send(true);
    });
    Ok(Json(info))
}

/// Keeps the tail of one of a process's streams, until its pipe closes.
async fn collect<R: AsyncRead + Unpin>(proc: Arc<Proc>, mut pipe: R, stdout: bool) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut s = proc.lock();
                let tail = if stdout { &mut s.stdout } else { &mut s.stderr };
                tail.push(&buf[..n]);
            }
        }
    }
}

pub async fn list(State(daemon): State<Arc<Daemon>>) -> Json<Vec<ProcessInfo>> {
    let table = daemon
        .processes
        .table
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut all: Vec<ProcessInfo> = table.values().map(|p| p.info()).collect();
    all.sort_by_key(|p| p.started_at_ms);
    Json(all)
}

pub async fn detail(
    State(daemon): State<Arc<Daemon>>,
    Path(id): Path<String>,
) -> Result<Json<ProcessDetail>, Failure> {
    Ok(Json(daemon.processes.get(&id)?.detail()))
}

/// TERM to the process's tree, KILL [`KILL_GRACE`] later; once it exited, it is forgotten
/// (a later request for it is NotFound, as for any deleted resource) and the answer is its
/// final state and output, the last anyone sees of it. One that will not die (a wait in the
/// kernel) stays listed, running.
pub async fn kill(
    State(daemon): State<Arc<Daemon>>,
    Path(id): Path<String>,
) -> Result<Json<ProcessDetail>, Failure> {
    let proc = daemon.processes.get(&id)?;
    if !*proc.ended.borrow() {
        kill::tree(proc.pid, &proc.mark, Signal::SIGTERM).await;
        let info = proc.wait(KILL_GRACE).await;
        if info.state == ProcessState::Running {
            kill::tree(proc.pid, &proc.mark, Signal::SIGKILL).await;
        }
    }
    // What it left behind goes too.
    kill::marked(&proc.mark, Signal::SIGKILL).await;
    proc.wait(KILL_GRACE).await;
    let last = proc.detail();
    if last.info.state == ProcessState::Exited {
        daemon.processes.forget(&id, &proc);
    }
    Ok(Json(last))
}

#[derive(serde::Deserialize)]
pub struct WaitQuery {
    #[serde(default)]
    timeout_ms: u64,
}

pub async fn wait(
    State(daemon): State<Arc<Daemon>>,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> Result<Json<ProcessInfo>, Failure> {
    let proc = daemon.processes.get(&id)?;
    let limit = Duration::from_millis(q.timeout_ms).min(MAX_WAIT);
    Ok(Json(proc.wait(limit).await))
}

pub async fn signal(
    State(daemon): State<Arc<Daemon>>,
    Path(id): Path<String>,
    Json(req): Json<SignalRequest>,
) -> Result<Json<ProcessInfo>, Failure> {
    let proc = daemon.processes.get(&id)?;
    let signal = Signal::try_from(req.signal)
        .map_err(|_| Failure::invalid(format!("{} is not a signal", req.signal)))?;
    if !*proc.ended.borrow() {
        kill::tree(proc.pid, &proc.mark, signal).await;
    }
    Ok(Json(proc.info()))
}
