//! Commands on a pseudo-terminal: a new session whose controlling terminal is the pty's
//! slave side, read and written through the master side.

#![allow(unsafe_code)]

use crate::proto::PtySize;
use nix::pty::{openpty, Winsize};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// A command's terminal, as its supervisor holds it: output to read, input to write.
pub(crate) struct Terminal {
    pub reader: tokio::fs::File,
    pub input: Input,
}

/// The writing side of a terminal (input and resizes).
pub(crate) struct Input {
    writer: tokio::fs::File,
    master: OwnedFd,
}

fn winsize(size: PtySize) -> Winsize {
    Winsize {
        ws_row: size.rows.max(1),
        ws_col: size.cols.max(1),
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Spawns `cmd` on a new terminal of `size`.
pub(crate) fn spawn(
    cmd: &mut tokio::process::Command,
    size: PtySize,
) -> std::io::Result<(tokio::process::Child, Terminal)> {
    let pty = openpty(Some(&winsize(size)), None).map_err(std::io::Error::from)?;
    cmd.stdin(Stdio::from(pty.slave.try_clone()?))
        .stdout(Stdio::from(pty.slave.try_clone()?))
        .stderr(Stdio::from(pty.slave));
    cmd.env("TERM", "xterm-256color");
    // SAFETY: between fork and exec the closure calls only `setsid` and `ioctl`, both
    // async-signal-safe, and touches no memory of the parent's but the error it returns.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // Stdin is the slave side by now: make it the session's controlling terminal.
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let file = |fd: &OwnedFd| -> std::io::Result<tokio::fs::File> {
        Ok(tokio::fs::File::from_std(std::fs::File::from(
            fd.try_clone()?,
        )))
    };
    let terminal = Terminal {
        reader: file(&pty.master)?,
        input: Input {
            writer: file(&pty.master)?,
            master: pty.master,
        },
    };
    let child = cmd.spawn()?;
    Ok((child, terminal))
}

impl Input {
    pub(crate) async fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(data).await?;
        self.writer.flush().await
    }

    pub(crate) fn resize(&self, size: PtySize) {
        let ws = winsize(size);
        // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which outlives the call;
        // the descriptor is the pty's master, owned by `self`.
        unsafe {
            nix::libc::ioctl(self.master.as_raw_fd(), nix::libc::TIOCSWINSZ, &ws);
        }
    }
}
