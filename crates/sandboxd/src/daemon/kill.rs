//! Ending a command's whole process tree.
//!
//! Every command runs in a process group of its own (its pid is the group's id) and carries
//! `SA_EXEC=<mark>` in its environment, which its descendants inherit. Signalling the group
//! reaches what stayed in it; the mark reaches what left it (`setsid`, a daemonising
//! server), found by reading the environment of every process of ours under `/proc`.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// The variable that marks a command's processes.
pub const MARK: &str = "SA_EXEC";

/// A fresh mark.
pub fn new_mark() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Signals the group `pgid` and every process carrying `mark`. Processes gone already are
/// fine.
pub fn tree(pgid: u32, mark: &str, signal: Signal) {
    if let Ok(pgid) = i32::try_from(pgid) {
        if pgid > 1 {
            let _ = killpg(Pid::from_raw(pgid), signal);
        }
    }
    marked(mark, signal);
}

/// Signals every process whose environment holds `SA_EXEC=<mark>`.
pub fn marked(mark: &str, signal: Signal) {
    let needle = format!("{MARK}={mark}");
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid as u32 == me {
            continue;
        }
        // Another user's process, or gone: unreadable, and not ours to signal anyway.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
        }
    }
}
