//! The in-memory backend's command interpreter: `sh -c` scripts in the subset `parse`
//! reads, and the commands of `commands`, over the sandbox's in-memory filesystem.
//!
//! It runs on a blocking thread (`sleep` sleeps it), one command at a time: a pipeline's
//! commands run one after the other, each reading the whole output of the one before, and
//! a command put in the background (`&`) runs to its end at once, its `sleep`s skipped, so
//! nothing outlives the script (`pgrep` finds nothing). The deadline is checked before every
//! command and bounds every `sleep`: a script that reaches it stops there, keeping what it
//! wrote, as a killed process tree would.

mod commands;
mod files;
mod lex;
pub(crate) mod parse;

use super::fs::Fs;
use bytes::Bytes;
use parse::{AndOr, Connector, Part, Pipeline, Redir, Simple, Word};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A call of a command a test scripted with `MemoryBackend::on_command`.
#[derive(Clone, Debug)]
pub struct CommandCall {
    /// The command and its arguments, expanded.
    pub argv: Vec<String>,
    /// Everything written to its stdin.
    pub stdin: Bytes,
    /// The working directory it ran in.
    pub cwd: String,
    /// Its environment.
    pub env: BTreeMap<String, String>,
}

/// What a scripted command does: its exit code and output (`exit_code`, `stdout`, `stderr`
/// of the answer are used; the rest is the backend's to set).
pub type CommandHandler = Arc<dyn Fn(&CommandCall) -> crate::ExecOutput + Send + Sync>;

/// How a script stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// `exit N`: the shell ends with N.
    Exit(i32),
    /// The request's deadline passed.
    TimedOut,
}

pub(crate) type Status = Result<i32, Flow>;

/// What every command of one exec shares.
pub(crate) struct Ctx {
    pub fs: Arc<Mutex<Fs>>,
    /// Scripted commands, the last installed first.
    pub handlers: Vec<(Vec<String>, CommandHandler)>,
    pub deadline: Instant,
}

impl Ctx {
    pub fn fs(&self) -> std::sync::MutexGuard<'_, Fs> {
        super::lock(&self.fs)
    }
}

/// A command's standard streams: stdin whole, output collected.
pub(crate) struct Io<'a> {
    pub stdin: Bytes,
    pub out: &'a mut Vec<u8>,
    pub err: &'a mut Vec<u8>,
}

/// One shell: its variables (all exported), working directory and positional arguments.
pub(crate) struct Shell<'c> {
    pub ctx: &'c Ctx,
    pub env: BTreeMap<String, String>,
    pub cwd: String,
    /// `$0`, `$1`, ...
    args: Vec<String>,
    status: i32,
    /// Running a command put in the background: `sleep` returns at once.
    pub background: bool,
}

impl<'c> Shell<'c> {
    pub fn new(ctx: &'c Ctx, env: BTreeMap<String, String>, cwd: String) -> Self {
        Shell {
            ctx,
            env,
            cwd,
            args: vec!["sh".into()],
            status: 0,
            background: false,
        }
    }

    /// A child shell (`sh -c`), with a copy of this one's variables and directory.
    fn child(&self, args: Vec<String>) -> Shell<'c> {
        Shell {
            ctx: self.ctx,
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            args,
            status: 0,
            background: self.background,
        }
    }

    /// Runs `script` (a child shell's), ending with `exit`'s status where it exits.
    pub fn run_script(&mut self, script: &str, args: Vec<String>, io: &mut Io<'_>) -> Status {
        let lists = match parse::parse(script) {
            Ok(lists) => lists,
            Err(e) => {
                io.err.extend_from_slice(format!("sh: {e}\n").as_bytes());
                return Ok(2);
            }
        };
        let mut child = self.child(args);
        match child.run_lists(&lists, io) {
            Err(Flow::Exit(code)) => Ok(code),
            other => other,
        }
    }

    fn run_lists(&mut self, lists: &[AndOr], io: &mut Io<'_>) -> Status {
        for list in lists {
            if list.background {
                let was = std::mem::replace(&mut self.background, true);
                let ran = self.run_and_or(list, io);
                self.background = was;
                match ran {
                    Err(Flow::TimedOut) => return Err(Flow::TimedOut),
                    _ => self.status = 0,
                }
            } else {
                self.status = self.run_and_or(list, io)?;
            }
        }
        Ok(self.status)
    }

    fn run_and_or(&mut self, list: &AndOr, io: &mut Io<'_>) -> Status {
        let mut status = self.run_pipeline(&list.first, io)?;
        for (connector, pipeline) in &list.rest {
            let run = match connector {
                Connector::And => status == 0,
                Connector::Or => status != 0,
            };
            if run {
                self.status = status;
                status = self.run_pipeline(pipeline, io)?;
            }
        }
        Ok(status)
    }

    fn run_pipeline(&mut self, p: &Pipeline, io: &mut Io<'_>) -> Status {
        let last = p.commands.len() - 1;
        let mut stdin = io.stdin.clone();
        let mut status = 0;
        for (i, cmd) in p.commands.iter().enumerate() {
            if i == last {
                status = self.run_simple(cmd, stdin.clone(), io.out, io.err)?;
                break;
            }
            // Each command but the last runs as a subshell would: `exit` ends only it.
            let mut piped = Vec::new();
            match self.run_simple(cmd, stdin, &mut piped, io.err) {
                Err(Flow::TimedOut) => return Err(Flow::TimedOut),
                _ => stdin = piped.into(),
            }
        }
        if p.negate {
            status = i32::from(status == 0);
        }
        Ok(status)
    }

    fn run_simple(
        &mut self,
        cmd: &Simple,
        stdin: Bytes,
        out: &mut Vec<u8>,
        err: &mut Vec<u8>,
    ) -> Status {
        if Instant::now() >= self.ctx.deadline {
            return Err(Flow::TimedOut);
        }
        let argv: Vec<String> = cmd.words.iter().flat_map(|w| self.expand(w)).collect();
        let assigns: Vec<(String, String)> = cmd
            .assigns
            .iter()
            .map(|(k, w)| (k.clone(), self.expand(w).join(" ")))
            .collect();
        let redirected = match self.redirections(&cmd.redirs, stdin) {
            Ok(r) => r,
            Err(e) => {
                err.extend_from_slice(format!("sh: {e}\n").as_bytes());
                return Ok(1);
            }
        };
        let (mut cmd_out, mut cmd_err) = (Vec::new(), Vec::new());
        let status = if argv.is_empty() {
            self.env.extend(assigns);
            Ok(0)
        } else {
            let saved: Vec<(String, Option<String>)> = assigns
                .into_iter()
                .map(|(k, v)| {
                    let old = self.env.insert(k.clone(), v);
                    (k, old)
                })
                .collect();
            let mut io = Io {
                stdin: redirected.stdin,
                out: &mut cmd_out,
                err: &mut cmd_err,
            };
            let status = self.run_argv(&argv, &mut io);
            for (k, old) in saved {
                match old {
                    Some(v) => self.env.insert(k, v),
                    None => self.env.remove(&k),
                };
            }
            status
        };
        // Output goes where the redirections said, also when the command stopped the script.
        for (data, target) in [
            (cmd_out, &redirected.targets[0]),
            (cmd_err, &redirected.targets[1]),
        ] {
            match target {
                Target::Stdout => out.extend_from_slice(&data),
                Target::Stderr => err.extend_from_slice(&data),
                Target::File(path) => {
                    if let Err(e) = files::append(&mut self.ctx.fs(), path, &data) {
                        err.extend_from_slice(format!("sh: {path}: {e}\n").as_bytes());
                    }
                }
            }
        }
        status
    }

    /// Runs one command by its argv: a scripted one, a built-in one, or none (127).
    pub fn run_argv(&mut self, argv: &[String], io: &mut Io<'_>) -> Status {
        if let Some((_, handler)) = self
            .ctx
            .handlers
            .iter()
            .find(|(prefix, _)| argv.starts_with(prefix))
        {
            let answer = handler(&CommandCall {
                argv: argv.to_vec(),
                stdin: io.stdin.clone(),
                cwd: self.cwd.clone(),
                env: self.env.clone(),
            });
            io.out.extend_from_slice(&answer.stdout);
            io.err.extend_from_slice(&answer.stderr);
            return Ok(answer.exit_code as i32);
        }
        let name = argv[0]
            .strip_prefix("/usr/bin/")
            .or_else(|| argv[0].strip_prefix("/bin/"))
            .unwrap_or(&argv[0]);
        match commands::find(name) {
            Some(builtin) => builtin(self, argv, io),
            None => {
                io.err
                    .extend_from_slice(format!("sh: {}: not found\n", argv[0]).as_bytes());
                Ok(127)
            }
        }
    }

    /// A word's fields: unquoted variables split on blanks, and vanish when empty.
    fn expand(&self, word: &Word) -> Vec<String> {
        let mut fields = Vec::new();
        let (mut cur, mut any) = (String::new(), false);
        for part in word {
            match part {
                Part::Lit { text, .. } => {
                    cur.push_str(text);
                    any = true;
                }
                Part::Var { name, quoted: true } => {
                    cur.push_str(&self.var(name));
                    any = true;
                }
                Part::Var {
                    name,
                    quoted: false,
                } => {
                    for (i, piece) in self.var(name).split_whitespace().enumerate() {
                        if i > 0 {
                            fields.push(std::mem::take(&mut cur));
                        }
                        cur.push_str(piece);
                        any = true;
                    }
                }
            }
        }
        if any {
            fields.push(cur);
        }
        fields
    }

    fn var(&self, name: &str) -> String {
        match name {
            "?" => self.status.to_string(),
            "#" => (self.args.len() - 1).to_string(),
            "@" => self.args[1..].join(" "),
            n if n.chars().all(|c| c.is_ascii_digit()) => n
                .parse::<usize>()
                .ok()
                .and_then(|i| self.args.get(i).cloned())
                .unwrap_or_default(),
            n => self.env.get(n).cloned().unwrap_or_default(),
        }
    }

    /// Where a command's stdout (0) and stderr (1) go, and its stdin; output files are
    /// created (or emptied) now, as the shell opens them before the command runs.
    fn redirections(&self, redirs: &[Redir], stdin: Bytes) -> Result<Redirected, String> {
        let mut r = Redirected {
            stdin,
            targets: [Target::Stdout, Target::Stderr],
        };
        let slot = |fd: u32| match fd {
            1 => Ok(0),
            2 => Ok(1),
            fd => Err(format!("file descriptor {fd} is not supported")),
        };
        for redir in redirs {
            match redir {
                Redir::In { target } => {
                    let path = self.path_of(target)?;
                    r.stdin = files::read(&self.ctx.fs(), &path, None)
                        .map_err(|e| format!("{}: {e}", self.expand(target).join(" ")))?;
                }
                Redir::Out { fd, target, append } => {
                    let path = self.open(target, *append)?;
                    r.targets[slot(*fd)?] = Target::File(path);
                }
                Redir::Both { target } => {
                    let path = self.open(target, false)?;
                    r.targets = [Target::File(path.clone()), Target::File(path)];
                }
                Redir::Dup { from, to } => {
                    let to = r.targets[slot(*to)?].clone();
                    r.targets[slot(*from)?] = to;
                }
            }
        }
        Ok(r)
    }

    fn path_of(&self, target: &Word) -> Result<String, String> {
        match self.expand(target).as_slice() {
            [one] => Ok(super::fs::normalize(&self.cwd, one)),
            _ => Err("ambiguous redirect".into()),
        }
    }

    fn open(&self, target: &Word, append: bool) -> Result<String, String> {
        let path = self.path_of(target)?;
        files::open_for_writing(&mut self.ctx.fs(), &path, append)
            .map_err(|e| format!("cannot create {}: {e}", self.expand(target).join(" ")))?;
        Ok(path)
    }
}

#[derive(Clone, Debug)]
enum Target {
    Stdout,
    Stderr,
    File(String),
}

struct Redirected {
    stdin: Bytes,
    targets: [Target; 2],
}
