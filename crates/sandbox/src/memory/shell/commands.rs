//! The commands the interpreter knows besides those over files (`files.rs`): output, flow,
//! `sleep`, `test`, the environment and identity, and `sh` itself. Each takes its argv
//! (`argv[0]` its name) and writes to its streams; an unknown command is the caller's 127.

use super::files::{self, flags};
use super::{Flow, Io, Shell, Status};
use crate::memory::fs::{normalize, Kind};
use std::time::{Duration, Instant};

pub(super) type Builtin = fn(&mut Shell<'_>, &[String], &mut Io<'_>) -> Status;

pub(super) fn find(name: &str) -> Option<Builtin> {
    Some(match name {
        "sh" | "bash" => sh,
        ":" | "true" | "trap" => |_, _, _| Ok(0),
        "false" => |_, _, _| Ok(1),
        // Nothing outlives the command that started it (see the module docs of `shell`).
        "pgrep" => |_, _, _| Ok(1),
        "exit" => exit,
        "echo" => echo,
        "printf" => printf,
        "cat" => cat,
        "head" => head_or_tail,
        "tail" => head_or_tail,
        "wc" => wc,
        "sleep" => sleep,
        "test" | "[" => test,
        "env" => env,
        "export" => export,
        "unset" => unset,
        "id" => id,
        "whoami" => |_, _, io| {
            io.out.extend_from_slice(b"sandbox\n");
            Ok(0)
        },
        "command" => command,
        "pwd" => files::pwd,
        "cd" => files::cd,
        "ls" => files::ls,
        "mkdir" => files::mkdir,
        "rm" => files::rm,
        "mv" => files::mv,
        "cp" => files::cp,
        "touch" => files::touch,
        "chmod" => files::chmod,
        "stat" => files::stat,
        _ => return None,
    })
}

fn say(io: &mut Io<'_>, status: i32, msg: String) -> Status {
    io.err.extend_from_slice(msg.as_bytes());
    io.err.push(b'\n');
    Ok(status)
}

/// `sh -c SCRIPT [NAME [ARGS...]]`, `sh FILE [ARGS...]`, or `sh` reading its script from stdin.
fn sh(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let mut rest = &argv[1..];
    while rest
        .first()
        .is_some_and(|a| a.starts_with('-') && a != "-c" && !a.contains('c'))
    {
        rest = &rest[1..]; // -e, -x, -l: nothing to change here
    }
    match rest {
        [c, script, args @ ..] if c.starts_with('-') && c.contains('c') => {
            let mut positional = vec![args.first().cloned().unwrap_or_else(|| "sh".into())];
            positional.extend(args.iter().skip(1).cloned());
            shell.run_script(script, positional, io)
        }
        [file, args @ ..] => {
            let path = normalize(&shell.cwd, file);
            let script = match files::read(&shell.ctx.fs(), &path, None) {
                Ok(data) => String::from_utf8_lossy(&data).into_owned(),
                Err(e) => return say(io, 127, format!("sh: {file}: {e}")),
            };
            let mut positional = vec![file.clone()];
            positional.extend(args.iter().cloned());
            shell.run_script(&script, positional, io)
        }
        [] => {
            let script = String::from_utf8_lossy(&io.stdin).into_owned();
            shell.run_script(&script, vec!["sh".into()], io)
        }
    }
}

fn exit(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    match argv.get(1).map(|a| a.parse::<i32>()) {
        None => Err(Flow::Exit(shell.var("?").parse().unwrap_or(0))),
        Some(Ok(code)) => Err(Flow::Exit(code & 0xff)),
        Some(Err(_)) => {
            say(io, 2, format!("sh: exit: Illegal number: {}", argv[1]))?;
            Err(Flow::Exit(2))
        }
    }
}

fn echo(_: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let newline = argv.get(1).is_none_or(|a| a != "-n");
    let words = &argv[if newline { 1 } else { 2 }..];
    io.out.extend_from_slice(words.join(" ").as_bytes());
    if newline {
        io.out.push(b'\n');
    }
    Ok(0)
}

/// `printf FORMAT ARGS...`: `%s`, `%d`, `%%`, `\n`, `\t`, `\\`; the format is reused while
/// arguments remain, as printf(1) does.
fn printf(_: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let Some(format) = argv.get(1) else {
        return say(io, 1, "printf: usage: printf format [arguments]".into());
    };
    let mut args = argv[2..].iter();
    loop {
        let mut used = false;
        let mut chars = format.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, chars.peek().copied()) {
                ('\\', Some(e)) => {
                    chars.next();
                    let s = match e {
                        'n' => "\n".to_owned(),
                        't' => "\t".to_owned(),
                        '\\' => "\\".to_owned(),
                        other => format!("\\{other}"),
                    };
                    io.out.extend_from_slice(s.as_bytes());
                }
                ('%', Some('%')) => {
                    chars.next();
                    io.out.push(b'%');
                }
                ('%', Some(spec @ ('s' | 'd' | 'b'))) => {
                    chars.next();
                    used = true;
                    let arg = args.next().cloned().unwrap_or_default();
                    let arg = if spec == 'd' && arg.is_empty() {
                        "0".into()
                    } else {
                        arg
                    };
                    io.out.extend_from_slice(arg.as_bytes());
                }
                (c, _) => {
                    let mut buf = [0u8; 4];
                    io.out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        if !used || args.len() == 0 {
            return Ok(0);
        }
    }
}

/// The files named (stdin for none or `-`), in order; `limit` bounds endless devices.
fn inputs(
    shell: &Shell<'_>,
    name: &str,
    paths: &[String],
    io: &mut Io<'_>,
    limit: Option<usize>,
) -> (Vec<u8>, i32) {
    if paths.is_empty() {
        return (io.stdin.to_vec(), 0);
    }
    let (mut all, mut status) = (Vec::new(), 0);
    for p in paths {
        if p == "-" {
            all.extend_from_slice(&io.stdin);
            continue;
        }
        let path = normalize(&shell.cwd, p);
        match files::read(&shell.ctx.fs(), &path, limit) {
            Ok(data) => all.extend_from_slice(&data),
            Err(e) => {
                io.err
                    .extend_from_slice(format!("{name}: {p}: {e}\n").as_bytes());
                status = 1;
            }
        }
    }
    (all, status)
}

fn cat(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (_, paths) = flags(&argv[1..]);
    let fs = shell.ctx.fs();
    if let Some(p) = paths.iter().find(|p| {
        let path = normalize(&shell.cwd, p);
        matches!(fs.get(&path).map(|e| &e.kind), Some(Kind::Device(d)) if *d != crate::memory::fs::Device::Null)
    }) {
        return say(io, 1, format!("cat: {p}: an endless device; read it with head -c"));
    }
    drop(fs);
    let (data, status) = inputs(shell, "cat", &paths, io, None);
    io.out.extend_from_slice(&data);
    Ok(status)
}

/// `head`/`tail` with `-c N` (bytes) or `-n N` (lines, 10 by default).
fn head_or_tail(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let head = argv[0] == "head";
    let (mut bytes, mut lines, mut paths) = (None, None, Vec::new());
    let mut args = argv[1..].iter();
    while let Some(a) = args.next() {
        let number =
            |v: Option<&String>| v.and_then(|v| v.trim_start_matches('+').parse::<usize>().ok());
        match a.as_str() {
            "-c" => bytes = number(args.next()),
            "-n" => lines = number(args.next()),
            a if a.starts_with("-c") => bytes = number(Some(&a[2..].to_owned())),
            a if a.starts_with("-n") => lines = number(Some(&a[2..].to_owned())),
            a => paths.push(a.to_owned()),
        }
    }
    let (data, status) = inputs(shell, &argv[0], &paths, io, bytes);
    let out: &[u8] = match (bytes, head) {
        (Some(n), true) => &data[..n.min(data.len())],
        (Some(n), false) => &data[data.len().saturating_sub(n)..],
        (None, _) => {
            let n = lines.unwrap_or(10);
            let pieces: Vec<&[u8]> = data.split_inclusive(|b| *b == b'\n').collect();
            let keep = if head {
                &pieces[..n.min(pieces.len())]
            } else {
                &pieces[pieces.len().saturating_sub(n)..]
            };
            let len: usize = keep.iter().map(|p| p.len()).sum();
            if head {
                &data[..len]
            } else {
                &data[data.len() - len..]
            }
        }
    };
    io.out.extend_from_slice(out);
    Ok(status)
}

fn wc(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (flags, paths) = flags(&argv[1..]);
    let (data, status) = inputs(shell, "wc", &paths, io, None);
    let lines = data.iter().filter(|b| **b == b'\n').count();
    let words = String::from_utf8_lossy(&data).split_whitespace().count();
    let counts: Vec<String> = match flags.as_str() {
        "c" => vec![data.len().to_string()],
        "l" => vec![lines.to_string()],
        "w" => vec![words.to_string()],
        _ => vec![lines.to_string(), words.to_string(), data.len().to_string()],
    };
    let mut line = counts.join(" ");
    if let [one] = paths.as_slice() {
        line = format!("{line} {one}");
    }
    io.out.extend_from_slice(format!("{line}\n").as_bytes());
    Ok(status)
}

/// Sleeps, never past the deadline: reaching it stops the script (see the module docs).
fn sleep(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let Some(secs) = argv
        .get(1)
        .and_then(|a| a.trim_end_matches('s').parse::<f64>().ok())
    else {
        return say(io, 1, "sleep: invalid time interval".into());
    };
    if shell.background {
        return Ok(0);
    }
    let until = Instant::now() + Duration::from_secs_f64(secs.max(0.0));
    let deadline = shell.ctx.deadline;
    std::thread::sleep(
        until
            .min(deadline)
            .saturating_duration_since(Instant::now()),
    );
    if until > deadline {
        return Err(Flow::TimedOut);
    }
    Ok(0)
}

fn test(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let mut args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    if argv[0] == "[" {
        if args.last() != Some(&"]") {
            return say(io, 2, "[: missing ]".into());
        }
        args.pop();
    }
    let negate = args.first() == Some(&"!");
    if negate {
        args.remove(0);
    }
    let fs = shell.ctx.fs();
    let entry = |p: &str| fs.get(&normalize(&shell.cwd, p)).cloned();
    let int = |s: &str| s.parse::<i64>().unwrap_or(0);
    let truth = match args.as_slice() {
        [] => false,
        [s] => !s.is_empty(),
        ["-n", s] => !s.is_empty(),
        ["-z", s] => s.is_empty(),
        ["-e", p] => entry(p).is_some(),
        ["-f", p] => entry(p).is_some_and(|e| matches!(e.kind, Kind::File(_))),
        ["-d", p] => entry(p).is_some_and(|e| e.is_dir()),
        ["-s", p] => entry(p).is_some_and(|e| e.size() > 0),
        ["-L" | "-h", p] => entry(p).is_some_and(|e| matches!(e.kind, Kind::Symlink(_))),
        ["-r" | "-w" | "-x", p] => entry(p).is_some(),
        [a, "=" | "==", b] => a == b,
        [a, "!=", b] => a != b,
        [a, "-eq", b] => int(a) == int(b),
        [a, "-ne", b] => int(a) != int(b),
        [a, "-lt", b] => int(a) < int(b),
        [a, "-le", b] => int(a) <= int(b),
        [a, "-gt", b] => int(a) > int(b),
        [a, "-ge", b] => int(a) >= int(b),
        other => {
            drop(fs);
            return say(
                io,
                2,
                format!("test: unsupported expression: {}", other.join(" ")),
            );
        }
    };
    Ok(i32::from(truth == negate))
}

/// `env` prints the environment; `env NAME=value... COMMAND...` runs a command with more.
fn env(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let mut rest = &argv[1..];
    let mut extra = Vec::new();
    while let Some((k, v)) = rest.first().and_then(|a| a.split_once('=')) {
        extra.push((k.to_owned(), v.to_owned()));
        rest = &rest[1..];
    }
    if rest.is_empty() {
        let mut all = shell.env.clone();
        all.extend(extra);
        for (k, v) in all {
            io.out.extend_from_slice(format!("{k}={v}\n").as_bytes());
        }
        return Ok(0);
    }
    let saved = shell.env.clone();
    shell.env.extend(extra);
    let status = shell.run_argv(rest, io);
    shell.env = saved;
    status
}

fn export(shell: &mut Shell<'_>, argv: &[String], _: &mut Io<'_>) -> Status {
    for a in &argv[1..] {
        if let Some((k, v)) = a.split_once('=') {
            shell.env.insert(k.to_owned(), v.to_owned());
        }
    }
    Ok(0)
}

fn unset(shell: &mut Shell<'_>, argv: &[String], _: &mut Io<'_>) -> Status {
    for a in &argv[1..] {
        shell.env.remove(a);
    }
    Ok(0)
}

/// Every command runs as the sandbox user, uid and gid 1000.
fn id(_: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (flags, _) = flags(&argv[1..]);
    let out = match (
        flags.contains('u') || flags.contains('g'),
        flags.contains('n'),
    ) {
        (true, true) => "sandbox",
        (true, false) => "1000",
        _ => "uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)",
    };
    io.out.extend_from_slice(format!("{out}\n").as_bytes());
    Ok(0)
}

/// `command -v NAME`: the names this interpreter runs.
fn command(shell: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    match &argv[1..] {
        [v, name] if v == "-v" => {
            let known = find(name).is_some()
                || shell
                    .ctx
                    .handlers
                    .iter()
                    .any(|(p, _)| p.first() == Some(name));
            if known {
                io.out.extend_from_slice(format!("{name}\n").as_bytes());
            }
            Ok(i32::from(!known))
        }
        [] => Ok(0),
        rest => {
            let rest = rest.to_vec();
            shell.run_argv(&rest, io)
        }
    }
}
