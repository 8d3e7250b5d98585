//! Ending a command's whole process tree.
//!
//! Every command runs in a process group of its own (its pid is the group's id; on a terminal
//! also the session's) and carries `SA_EXEC=<mark>` in its environment, which its descendants
//! inherit. A process belongs to the command's tree when, in one reading of `/proc`, it is in
//! that group or session, carries the mark, or descends from a process that does. Each of
//! these alone misses something:
//! - the group misses a shell's background jobs on a terminal (job control gives each its own
//!   group) and anything that called `setsid`;
//! - the mark misses a program that cleared its environment (`env -i`, `env -u`), and, for a
//!   moment, a process in the middle of `execve`, whose environment reads as empty until the
//!   new program's is in place;
//! - the parent links miss what was orphaned before the reading (a daemonising server).
//!
//! The tree is read again after signalling it, as long as a reading finds a process not
//! signalled yet: a process of the tree may have forked, or finished an `execve`, between the
//! reading and its signal.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};

/// The variable that marks a command's processes.
pub const MARK: &str = "SA_EXEC";

/// Readings of `/proc` after the first, at most: each one finds only what the tree created
/// while the previous one was signalled, so a tree still growing after this many is forking
/// as fast as it is killed. A `SIGKILL` then goes to its group as a whole, if it still has
/// members (the kernel signals a group at once, faster than it forks); another signal stops
/// there, as a member already signalled must not get it twice (the callers that end a
/// command follow a `SIGTERM` with a `SIGKILL`).
const MAX_READINGS: usize = 8;

/// A fresh mark.
pub fn new_mark() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Signals the command whose process group (and, on a terminal, session) is `pgid` and every
/// process of its tree (see the module's comment). Processes gone already are fine. The
/// readings of `/proc` run on a blocking thread, off the daemon's runtime.
pub async fn tree(pgid: u32, mark: &str, signal: Signal) {
    let leader = i32::try_from(pgid).ok().filter(|&p| p > 1);
    let mark = mark.to_owned();
    let _ = tokio::task::spawn_blocking(move || signal_until_settled(&mark, leader, signal)).await;
}

/// Signals every process carrying `mark`, and their descendants.
pub async fn marked(mark: &str, signal: Signal) {
    let mark = mark.to_owned();
    let _ = tokio::task::spawn_blocking(move || signal_until_settled(&mark, None, signal)).await;
}

/// Each process is signalled once: a signal that does not end it (`SIGHUP`, `SIGINT`, chosen
/// through the processes API) must not arrive twice. The one exception is a `SIGKILL` to a
/// tree still growing after [`MAX_READINGS`], which cannot arrive twice in any way that
/// matters.
///
/// The group is never signalled by its id alone while `/proc` can be read: a reading finds
/// every member by its group, and a leader already reaped may have left an empty group whose
/// id the kernel is free to give to an unrelated process. A group with members keeps its id
/// reserved, so the group's own signal goes out only when a reading saw members (a tree that
/// kept growing, below) or when `/proc` cannot be read at all.
fn signal_until_settled(mark: &str, leader: Option<i32>, signal: Signal) {
    let needle = format!("{MARK}={mark}");
    let mut signalled = HashSet::new();
    let mut group_alive = false;
    for _ in 0..=MAX_READINGS {
        // Read before signalling: a parent killed first takes its children's link to it along.
        let Some(found) = members(&needle, leader) else {
            if let Some(leader) = leader {
                let _ = killpg(Pid::from_raw(leader), signal);
            }
            return;
        };
        let fresh: Vec<i32> = found
            .pids
            .into_iter()
            .filter(|pid| signalled.insert(*pid))
            .collect();
        if fresh.is_empty() {
            return;
        }
        for pid in fresh {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
        }
        group_alive = found.group_alive;
    }
    if let Some(leader) = leader.filter(|_| group_alive && signal == Signal::SIGKILL) {
        let _ = killpg(Pid::from_raw(leader), signal);
    }
    tracing::warn!(
        mark,
        "a command's process tree still grew after {MAX_READINGS} readings"
    );
}

/// One reading of `/proc`.
struct Reading {
    /// The processes of the tree, this daemon excluded.
    pids: Vec<i32>,
    /// Whether a process is in the leader's group (so its id cannot have been reused).
    group_alive: bool,
}

/// One process as `/proc/<pid>/stat` gives it.
struct Stat {
    ppid: i32,
    pgrp: i32,
    session: i32,
}

/// `/proc/<pid>/stat`'s parent, group and session. The command name (field 2) is in
/// parentheses and may hold spaces and parentheses itself, so fields are counted from the last
/// `)`.
fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_stat(text: &str) -> Option<Stat> {
    let mut rest = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let _state = rest.next()?;
    Some(Stat {
        ppid: rest.next()?.parse().ok()?,
        pgrp: rest.next()?.parse().ok()?,
        session: rest.next()?.parse().ok()?,
    })
}

/// One reading of `/proc`; `None` when it cannot be read.
fn members(needle: &str, leader: Option<i32>) -> Option<Reading> {
    let me = std::process::id() as i32;
    let dir = std::fs::read_dir("/proc").ok()?;
    let mut group_alive = false;
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut roots = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Some(stat) = stat(pid) else { continue };
        children.entry(stat.ppid).or_default().push(pid);
        group_alive |= leader == Some(stat.pgrp);
        let in_group = leader.is_some_and(|l| stat.pgrp == l || stat.session == l);
        // Another user's process is unreadable, and not ours to signal anyway.
        let marked = || {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        };
        if in_group || marked() {
            roots.push(pid);
        }
    }
    let mut found: HashSet<i32> = HashSet::new();
    while let Some(pid) = roots.pop() {
        if pid != me && found.insert(pid) {
            roots.extend(children.get(&pid).into_iter().flatten());
        }
    }
    Some(Reading {
        pids: found.into_iter().collect(),
        group_alive,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_stat;

    #[test]
    fn a_stat_line_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let s = parse_stat("4242 (a) 1 2 (b) S 17 4242 4240 34816 4242 4194560").unwrap();
        assert_eq!((s.ppid, s.pgrp, s.session), (17, 4242, 4240));
        assert!(parse_stat("4242 (truncated").is_none());
        let me = super::stat(std::process::id() as i32).expect("our own stat");
        assert_eq!(me.pgrp, nix::unistd::getpgrp().as_raw());
    }
}
