//! Commands over the filesystem (`ls`, `mkdir`, `rm`, `mv`, `cp`, `touch`, `stat`, `chmod`,
//! `cd`, `pwd`) and the reads and writes every command makes, as the sandbox user: a file
//! it creates is its own, and it may change only what it owns or what is world-writable.

use super::{Io, Shell, Status};
use crate::memory::fs::{
    base_name, normalize, Device, Entry, Fs, FsError, FsResult, Kind, SANDBOX_UID,
};
use bytes::Bytes;

/// A file's bytes; an endless device gives `limit` bytes (none without one).
pub(super) fn read(fs: &Fs, path: &str, limit: Option<usize>) -> FsResult<Bytes> {
    match fs.get(path).map(|e| &e.kind) {
        None => Err(FsError::NotFound),
        Some(Kind::Dir) => Err(FsError::IsADirectory),
        Some(Kind::File(data)) => Ok(data.clone()),
        Some(Kind::Symlink(_)) => Err(FsError::NotFound),
        Some(Kind::Device(Device::Null)) => Ok(Bytes::new()),
        Some(Kind::Device(Device::Zero)) => Ok(vec![0u8; limit.unwrap_or(0)].into()),
        Some(Kind::Device(Device::Urandom)) => Ok(noise(limit.unwrap_or(0)).into()),
    }
}

/// Bytes that look random (xorshift from the clock): not for secrets.
fn noise(n: usize) -> Vec<u8> {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Creates `path` as an empty file of the sandbox user's, or empties it unless `append`.
pub(super) fn open_for_writing(fs: &mut Fs, path: &str, append: bool) -> FsResult<()> {
    match fs.get(path) {
        Some(e) if e.is_dir() => Err(FsError::IsADirectory),
        Some(Entry {
            kind: Kind::Device(_),
            ..
        }) => Ok(()),
        Some(_) if append => Ok(()),
        _ => write(fs, path, Bytes::new()),
    }
}

/// Replaces `path`'s content (keeping its owner and mode), or creates it.
pub(super) fn write(fs: &mut Fs, path: &str, data: Bytes) -> FsResult<()> {
    if !fs.writable_by(path, SANDBOX_UID) {
        return Err(FsError::PermissionDenied);
    }
    let entry = match fs.get(path) {
        Some(old) => Entry {
            kind: Kind::File(data),
            from_image: false,
            ..old.clone()
        },
        None => Entry::file(data, SANDBOX_UID, 0o644),
    };
    fs.put(path, entry)
}

/// Appends to `path` (created if missing).
pub(super) fn append(fs: &mut Fs, path: &str, data: &[u8]) -> FsResult<()> {
    if matches!(fs.get(path).map(|e| &e.kind), Some(Kind::Device(_))) {
        return Ok(());
    }
    let mut all = match fs.get(path).map(|e| &e.kind) {
        Some(Kind::File(old)) => old.to_vec(),
        _ => Vec::new(),
    };
    all.extend_from_slice(data);
    write(fs, path, all.into())
}

/// Splits leading `-xyz` flags (up to `--`) from the operands.
pub(super) fn flags(args: &[String]) -> (String, Vec<String>) {
    let mut flags = String::new();
    let mut rest = Vec::new();
    let mut done = false;
    for a in args {
        if !done && a == "--" {
            done = true;
        } else if !done && a.len() > 1 && a.starts_with('-') {
            flags.push_str(&a[1..]);
        } else {
            rest.push(a.clone());
        }
    }
    (flags, rest)
}

fn fail(io: &mut Io<'_>, msg: String) -> i32 {
    io.err.extend_from_slice(msg.as_bytes());
    io.err.push(b'\n');
    1
}

pub(super) fn pwd(sh: &mut Shell<'_>, _: &[String], io: &mut Io<'_>) -> Status {
    io.out.extend_from_slice(format!("{}\n", sh.cwd).as_bytes());
    Ok(0)
}

pub(super) fn cd(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let home = sh.env.get("HOME").cloned().unwrap_or_else(|| "/".into());
    let to = normalize(&sh.cwd, argv.get(1).unwrap_or(&home));
    if !sh.ctx.fs().is_dir(&to) {
        return Ok(fail(io, format!("sh: cd: can't cd to {}", argv[1])));
    }
    sh.env.insert("PWD".into(), to.clone());
    sh.cwd = to;
    Ok(0)
}

pub(super) fn ls(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (flags, mut paths) = flags(&argv[1..]);
    if paths.is_empty() {
        paths.push(".".into());
    }
    let fs = sh.ctx.fs();
    let mut status = 0;
    let line = |name: &str, e: &Entry| {
        if flags.contains('l') {
            let kind = match e.kind {
                Kind::Dir => 'd',
                Kind::Symlink(_) => 'l',
                Kind::Device(_) => 'c',
                Kind::File(_) => '-',
            };
            format!(
                "{kind}{:o} {} {} {} {name}\n",
                e.mode,
                e.uid,
                e.gid,
                e.size()
            )
        } else {
            format!("{name}\n")
        }
    };
    for p in &paths {
        let path = normalize(&sh.cwd, p);
        match fs.get(&path) {
            None => {
                status = fail(
                    io,
                    format!("ls: cannot access '{p}': No such file or directory"),
                );
            }
            Some(e) if e.is_dir() => {
                for child in fs.children(&path) {
                    if child.starts_with('.') && !flags.contains('a') {
                        continue;
                    }
                    let e = fs.get(&format!("{}/{child}", path.trim_end_matches('/')));
                    io.out
                        .extend_from_slice(line(&child, e.expect("listed")).as_bytes());
                }
            }
            Some(e) => io.out.extend_from_slice(line(p, e).as_bytes()),
        }
    }
    Ok(status)
}

pub(super) fn mkdir(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (flags, paths) = flags(&argv[1..]);
    let mut fs = sh.ctx.fs();
    let mut status = 0;
    for p in paths {
        let path = normalize(&sh.cwd, &p);
        let made = if flags.contains('p') {
            let missing = std::iter::successors(Some(path.as_str()), |p| {
                (*p != "/").then(|| crate::memory::fs::parent(p))
            })
            .take_while(|p| fs.get(p).is_none())
            .last();
            match missing {
                Some(top) if !fs.writable_by(top, SANDBOX_UID) => Err(FsError::PermissionDenied),
                _ => fs.mkdir_all(&path, SANDBOX_UID, 0o755),
            }
        } else if fs.get(&path).is_some() {
            Err(FsError::Exists)
        } else if !fs.writable_by(&path, SANDBOX_UID) {
            Err(FsError::PermissionDenied)
        } else {
            fs.put(&path, Entry::dir(SANDBOX_UID, 0o755))
        };
        if let Err(e) = made {
            status = fail(io, format!("mkdir: can't create directory '{p}': {e}"));
        }
    }
    Ok(status)
}

pub(super) fn rm(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (flags, paths) = flags(&argv[1..]);
    let (recursive, force) = (
        flags.contains('r') || flags.contains('R'),
        flags.contains('f'),
    );
    let mut fs = sh.ctx.fs();
    let mut status = 0;
    for p in paths {
        let path = normalize(&sh.cwd, &p);
        let removed = match fs.get(&path) {
            None if force => Ok(()),
            Some(e) if e.is_dir() && !recursive => Err(FsError::IsADirectory),
            _ if !fs.writable_by(&path, SANDBOX_UID) => Err(FsError::PermissionDenied),
            _ => fs.remove(&path, true),
        };
        if let Err(e) = removed {
            status = fail(io, format!("rm: cannot remove '{p}': {e}"));
        }
    }
    Ok(status)
}

/// `cp` (`keep_source`) and `mv`: into a directory operand, or onto a path.
fn copy_or_move(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>, keep_source: bool) -> Status {
    let what = if keep_source { "cp" } else { "mv" };
    let (flags, operands) = flags(&argv[1..]);
    let Some((dest, sources)) = operands.split_last().filter(|(_, s)| !s.is_empty()) else {
        return Ok(fail(io, format!("{what}: missing file operand")));
    };
    let mut fs = sh.ctx.fs();
    let dest = normalize(&sh.cwd, dest);
    let mut status = 0;
    for s in sources {
        let from = normalize(&sh.cwd, s);
        let to = if fs.is_dir(&dest) {
            normalize(&dest, base_name(&from))
        } else {
            dest.clone()
        };
        let done = (|| {
            let src = fs.get(&from).ok_or(FsError::NotFound)?;
            if keep_source && src.is_dir() && !(flags.contains('r') || flags.contains('R')) {
                return Err(FsError::IsADirectory);
            }
            if !fs.writable_by(&to, SANDBOX_UID)
                || (!keep_source && !fs.writable_by(&from, SANDBOX_UID))
            {
                return Err(FsError::PermissionDenied);
            }
            if fs.get(&to).is_some() {
                fs.remove(&to, true)?;
            }
            fs.copy_tree(&from, &to, keep_source.then_some(SANDBOX_UID))?;
            if !keep_source {
                fs.remove(&from, true)?;
            }
            Ok(())
        })();
        if let Err(e) = done {
            status = fail(io, format!("{what}: '{s}': {e}"));
        }
    }
    Ok(status)
}

pub(super) fn cp(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    copy_or_move(sh, argv, io, true)
}

pub(super) fn mv(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    copy_or_move(sh, argv, io, false)
}

pub(super) fn touch(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (_, paths) = flags(&argv[1..]);
    let mut fs = sh.ctx.fs();
    let mut status = 0;
    for p in paths {
        let path = normalize(&sh.cwd, &p);
        if fs.get(&path).is_none() {
            if let Err(e) = write(&mut fs, &path, Bytes::new()) {
                status = fail(io, format!("touch: cannot touch '{p}': {e}"));
            }
        }
    }
    Ok(status)
}

pub(super) fn chmod(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let (_, operands) = flags(&argv[1..]);
    let Some((mode, paths)) = operands.split_first() else {
        return Ok(fail(io, "chmod: missing operand".into()));
    };
    let Ok(mode) = u32::from_str_radix(mode, 8) else {
        return Ok(fail(
            io,
            format!("chmod: only octal modes are supported, not '{mode}'"),
        ));
    };
    let mut fs = sh.ctx.fs();
    let mut status = 0;
    for p in paths {
        match fs.get_mut(&normalize(&sh.cwd, p)) {
            Some(e) if e.uid == SANDBOX_UID => e.mode = mode,
            Some(_) => {
                status = fail(
                    io,
                    format!("chmod: changing permissions of '{p}': Operation not permitted"),
                )
            }
            None => {
                status = fail(
                    io,
                    format!("chmod: cannot access '{p}': No such file or directory"),
                )
            }
        }
    }
    Ok(status)
}

/// `stat -c FORMAT`: `%n` name, `%s` size, `%u`/`%g` ids, `%U`/`%G` names, `%a` mode, `%F`.
pub(super) fn stat(sh: &mut Shell<'_>, argv: &[String], io: &mut Io<'_>) -> Status {
    let mut format = None;
    let mut paths = Vec::new();
    let mut args = argv[1..].iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-c" => format = args.next().cloned(),
            a if a.starts_with("--format=") => format = Some(a["--format=".len()..].to_owned()),
            a => paths.push(a.to_owned()),
        }
    }
    let format = format.unwrap_or_else(|| "%n %s %a %u:%g".into());
    let fs = sh.ctx.fs();
    let mut status = 0;
    for p in paths {
        let Some(e) = fs.get(&normalize(&sh.cwd, &p)) else {
            status = fail(
                io,
                format!("stat: cannot statx '{p}': No such file or directory"),
            );
            continue;
        };
        let user = |id: u64| match id {
            0 => "root".to_owned(),
            SANDBOX_UID => "sandbox".to_owned(),
            id => id.to_string(),
        };
        let mut line = String::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                line.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => line.push_str(&p),
                Some('s') => line.push_str(&e.size().to_string()),
                Some('u') => line.push_str(&e.uid.to_string()),
                Some('g') => line.push_str(&e.gid.to_string()),
                Some('U') => line.push_str(&user(e.uid)),
                Some('G') => line.push_str(&user(e.gid)),
                Some('a') => line.push_str(&format!("{:o}", e.mode & 0o7777)),
                Some('F') => line.push_str(match e.kind {
                    Kind::Dir => "directory",
                    Kind::File(_) => "regular file",
                    Kind::Symlink(_) => "symbolic link",
                    Kind::Device(_) => "character special file",
                }),
                Some(other) => {
                    line.push('%');
                    line.push(other);
                }
                None => line.push('%'),
            }
        }
        line.push('\n');
        io.out.extend_from_slice(line.as_bytes());
    }
    Ok(status)
}
