//! The wire protocol between the control plane and `sandboxd`.
//!
//! The transport is HTTP/2 over one byte stream per control-plane process and sandbox (the
//! bridge: `sandboxd connect` run by a Docker exec, its stdio joined to the daemon's socket).
//! HTTP/2 gives the multiplexing, per-stream flow control and cancellation (`RST_STREAM`);
//! this module holds what travels inside it:
//!
//! - JSON bodies for the small operations (stat, list, processes, ports), at most
//!   [`MAX_JSON`] bytes;
//! - raw bytes for file contents, streamed in chunks;
//! - for a tunnel to a TCP port on the sandbox's loopback (`POST /v1/ports/{port}/connect`),
//!   raw bytes each way: the request body is what the client writes to the socket (its end
//!   shuts the socket's write side), the response body what the socket reads (its end is
//!   the socket's EOF). Nothing listening on the port is [`ErrorKind::NotFound`], before
//!   any byte. A daemon older than the route answers a bare 404 (`Unsupported`), so the
//!   route needs no new [`PROTOCOL`];
//! - for a command (`POST /v1/exec`), a stream of [`Frame`]s each way: the spec, stdin,
//!   signals and resizes in; the pid, output and the exit out. A frame is a one-byte tag, a
//!   big-endian `u32` payload length and the payload; a payload over [`MAX_FRAME`] or an
//!   unknown tag is a protocol error, and the daemon closes the connection on one (the codec
//!   is fuzzed: `crates/sandboxd/fuzz`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder};

/// The protocol's version; `GET /v1/hello` says it, and a client refuses another.
pub const PROTOCOL: u32 = 1;
/// The largest frame payload either side sends or accepts.
pub const MAX_FRAME: usize = 1 << 20;
/// The largest JSON request body the daemon reads.
pub const MAX_JSON: usize = 256 * 1024;
/// The size of the chunks output and file contents are sent in.
pub const CHUNK: usize = 64 * 1024;
/// The header a file read carries its size in.
pub const SIZE_HEADER: &str = "x-sandboxd-size";
/// Strings in requests (argv entries, paths, names) are at most this long.
pub const MAX_STRING: usize = 64 * 1024;
/// At most this many argv entries or environment variables.
pub const MAX_ITEMS: usize = 4096;

/// `GET /v1/hello`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
    pub uid: u32,
}

/// What a failed request answers, with an HTTP status to match.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The path (or process, or the program to run) does not exist.
    NotFound,
    /// A directory where a file was expected.
    IsADirectory,
    /// A file where a directory was expected.
    NotADirectory,
    PermissionDenied,
    /// The target exists already.
    Exists,
    /// The request is malformed.
    Invalid,
    /// Over a limit.
    TooLarge,
    /// A directory that is not empty, removed without `recursive`.
    NotEmpty,
    Internal,
}

impl ErrorKind {
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::NotFound => 404,
            ErrorKind::IsADirectory | ErrorKind::NotADirectory | ErrorKind::NotEmpty => 409,
            ErrorKind::Exists => 409,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::Invalid => 400,
            ErrorKind::TooLarge => 413,
            ErrorKind::Internal => 500,
        }
    }

    /// The kind of an OS error.
    pub fn of_io(e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::NotFound => ErrorKind::NotFound,
            K::PermissionDenied => ErrorKind::PermissionDenied,
            K::AlreadyExists => ErrorKind::Exists,
            K::IsADirectory => ErrorKind::IsADirectory,
            K::NotADirectory => ErrorKind::NotADirectory,
            K::DirectoryNotEmpty => ErrorKind::NotEmpty,
            K::InvalidInput | K::InvalidFilename => ErrorKind::Invalid,
            _ => ErrorKind::Internal,
        }
    }
}

/// A command to run (the first frame of `POST /v1/exec`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecSpec {
    pub argv: Vec<String>,
    /// Working directory (absolute); the daemon's own (`/workspace`) when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Added to the daemon's environment (the container's).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// After this the command's process tree is signalled (TERM, then KILL `kill_grace_ms`
    /// later) and the exit says `timed_out` with code 124. None: no limit (terminals).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default = "default_kill_grace")]
    pub kill_grace_ms: u64,
    /// At most this many bytes of stdout, and of stderr, are sent; the rest is drained
    /// and counted.
    #[serde(default = "default_max_output")]
    pub max_output: u64,
    /// Whether stdin frames follow (otherwise stdin is `/dev/null`).
    #[serde(default)]
    pub stdin: bool,
    /// Run on a pseudo-terminal of this size (stdout and stderr are then one stream).
    #[serde(default)]
    pub pty: Option<PtySize>,
}

impl Default for ExecSpec {
    /// What a spec of only an argv means on the wire (the serde defaults).
    fn default() -> Self {
        ExecSpec {
            argv: Vec::new(),
            cwd: None,
            env: Vec::new(),
            timeout_ms: None,
            kill_grace_ms: default_kill_grace(),
            max_output: default_max_output(),
            stdin: false,
            pty: None,
        }
    }
}

fn default_kill_grace() -> u64 {
    5_000
}

fn default_max_output() -> u64 {
    1 << 20
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtySize {
    pub rows: u16,
    pub cols: u16,
}

/// How a command ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// The exit code; 128 + the signal when a signal ended it; 124 when it timed out.
    pub code: i32,
    #[serde(default)]
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration_ms: u64,
}

/// One frame of an exec stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// client → daemon: the command; the first frame, and only then.
    Spec(Box<ExecSpec>),
    /// client → daemon: bytes for stdin (or the terminal's input).
    Stdin(Bytes),
    /// client → daemon: stdin is closed.
    StdinEnd,
    /// client → daemon: send this signal to the command's process group.
    Signal(i32),
    /// client → daemon: the terminal's new size.
    Resize(PtySize),
    /// daemon → client: the command started with this pid.
    Started(u32),
    Stdout(Bytes),
    Stderr(Bytes),
    /// daemon → client: the command ended; the last frame.
    Exit(Box<ExitInfo>),
    /// daemon → client: the command could not run; the last frame.
    Error(Box<ErrorBody>),
}

const T_SPEC: u8 = 1;
const T_STDIN: u8 = 2;
const T_STDIN_END: u8 = 3;
const T_SIGNAL: u8 = 4;
const T_RESIZE: u8 = 5;
const T_STARTED: u8 = 16;
const T_STDOUT: u8 = 17;
const T_STDERR: u8 = 18;
const T_EXIT: u8 = 19;
const T_ERROR: u8 = 20;
const HEADER: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("a frame of {0} bytes is over the limit of {MAX_FRAME}")]
    TooLarge(usize),
    #[error("unknown frame tag {0}")]
    UnknownTag(u8),
    #[error("a malformed frame (tag {tag}): {detail}")]
    Malformed { tag: u8, detail: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Encodes and decodes [`Frame`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrameCodec;

fn fixed<const N: usize>(tag: u8, payload: &[u8]) -> Result<[u8; N], FrameError> {
    payload.try_into().map_err(|_| FrameError::Malformed {
        tag,
        detail: format!("{} bytes where {N} were expected", payload.len()),
    })
}

fn json<T: serde::de::DeserializeOwned>(tag: u8, payload: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload).map_err(|e| FrameError::Malformed {
        tag,
        detail: e.to_string(),
    })
}

impl Frame {
    fn parse(tag: u8, payload: Bytes) -> Result<Frame, FrameError> {
        Ok(match tag {
            T_SPEC => Frame::Spec(Box::new(json(tag, &payload)?)),
            T_STDIN => Frame::Stdin(payload),
            T_STDIN_END => {
                fixed::<0>(tag, &payload)?;
                Frame::StdinEnd
            }
            T_SIGNAL => Frame::Signal(i32::from_be_bytes(fixed(tag, &payload)?)),
            T_RESIZE => {
                let b: [u8; 4] = fixed(tag, &payload)?;
                Frame::Resize(PtySize {
                    rows: u16::from_be_bytes([b[0], b[1]]),
                    cols: u16::from_be_bytes([b[2], b[3]]),
                })
            }
            T_STARTED => Frame::Started(u32::from_be_bytes(fixed(tag, &payload)?)),
            T_STDOUT => Frame::Stdout(payload),
            T_STDERR => Frame::Stderr(payload),
            T_EXIT => Frame::Exit(Box::new(json(tag, &payload)?)),
            T_ERROR => Frame::Error(Box::new(json(tag, &payload)?)),
            other => return Err(FrameError::UnknownTag(other)),
        })
    }

    fn tag_and_payload(&self) -> (u8, Bytes) {
        match self {
            Frame::Spec(s) => (T_SPEC, to_json(s.as_ref())),
            Frame::Stdin(b) => (T_STDIN, b.clone()),
            Frame::StdinEnd => (T_STDIN_END, Bytes::new()),
            Frame::Signal(s) => (T_SIGNAL, Bytes::copy_from_slice(&s.to_be_bytes())),
            Frame::Resize(size) => {
                let mut b = BytesMut::with_capacity(4);
                b.put_u16(size.rows);
                b.put_u16(size.cols);
                (T_RESIZE, b.freeze())
            }
            Frame::Started(pid) => (T_STARTED, Bytes::copy_from_slice(&pid.to_be_bytes())),
            Frame::Stdout(b) => (T_STDOUT, b.clone()),
            Frame::Stderr(b) => (T_STDERR, b.clone()),
            Frame::Exit(e) => (T_EXIT, to_json(e.as_ref())),
            Frame::Error(e) => (T_ERROR, to_json(e.as_ref())),
        }
    }

    /// The frame's bytes on the wire.
    pub fn encode_to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::new();
        // Encoding only fails for an oversize payload, which no frame built here has
        // (output and input are chunked at `CHUNK`).
        FrameCodec
            .encode(self.clone(), &mut buf)
            .expect("frames built by this crate fit");
        buf.freeze()
    }
}

/// A payload of JSON. The payload types have string keys only: serialising never fails.
fn to_json<T: Serialize>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if src.len() < HEADER {
            return Ok(None);
        }
        let tag = src[0];
        let len = u32::from_be_bytes([src[1], src[2], src[3], src[4]]) as usize;
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        if src.len() < HEADER + len {
            src.reserve(HEADER + len - src.len());
            return Ok(None);
        }
        src.advance(HEADER);
        let payload = src.split_to(len).freeze();
        Frame::parse(tag, payload).map(Some)
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        let (tag, payload) = frame.tag_and_payload();
        if payload.len() > MAX_FRAME {
            return Err(FrameError::TooLarge(payload.len()));
        }
        dst.reserve(HEADER + payload.len());
        dst.put_u8(tag);
        dst.put_u32(payload.len() as u32);
        dst.extend_from_slice(&payload);
        Ok(())
    }
}

/// A background process to start (`POST /v1/processes`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    Running,
    Exited,
}

/// A background process as listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub id: String,
    pub pid: u32,
    pub argv: Vec<String>,
    pub cwd: String,
    pub state: ProcessState,
    /// The exit code once it exited (128 + the signal when a signal ended it).
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    pub ended_at_ms: Option<u64>,
}

/// A background process with its recent output (`GET /v1/processes/{id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessDetail {
    #[serde(flatten)]
    pub info: ProcessInfo,
    // The output's fields default: a kill answered by a daemon older than the one that
    // sends the output back (still running in a sandbox booted before an upgrade) parses.
    /// The last [`PROCESS_TAIL`] bytes of stdout, as UTF-8 (invalid sequences replaced).
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    /// Bytes of stdout written before the tail (not kept).
    #[serde(default)]
    pub stdout_dropped: u64,
    #[serde(default)]
    pub stderr_dropped: u64,
}

/// How much of a background process's stdout, and of its stderr, is kept.
pub const PROCESS_TAIL: usize = 64 * 1024;
/// At most this many background processes are kept; the oldest exited ones go first, and a
/// start with this many running is refused.
pub const MAX_PROCESSES: usize = 256;

/// `POST /v1/processes/{id}/signal`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignalRequest {
    pub signal: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// `GET /v1/stat`, and each entry of `GET /v1/dir`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileStat {
    /// The entry's name (the last component of the path).
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
    /// The permission bits.
    pub mode: u32,
    pub mtime_ms: i64,
}

/// `PUT /v1/archive`: what an archive extracted into its directory held.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchiveReport {
    /// The entries written (files, directories, links).
    pub entries: u64,
    /// The bytes of the files among them.
    pub bytes: u64,
}

/// `GET /v1/dir`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirListing {
    pub entries: Vec<FileStat>,
    /// More entries than the limit: the rest are left out.
    pub truncated: bool,
}

/// The most entries `GET /v1/dir` lists.
pub const MAX_DIR_ENTRIES: usize = 10_000;

/// `POST /v1/rename`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RenameRequest {
    pub from: String,
    pub to: String,
}

/// `POST /v1/mkdir`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MkdirRequest {
    pub path: String,
    #[serde(default)]
    pub parents: bool,
}

/// `POST /v1/ports/wait`: until something accepts connections on the port (on the
/// sandbox's loopback or any of its addresses), or the timeout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WaitPort {
    pub port: u16,
    pub timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortState {
    pub open: bool,
    pub waited_ms: u64,
}

/// The most `POST /v1/ports/{port}/connect` tunnels one daemon holds open at once. Below
/// the connection's 256 concurrent streams, so that a sandbox's open tunnels (a page's
/// WebSockets, say) always leave room for the control plane's other calls on the connection
/// they share; past it a connect is refused with [`ErrorKind::TooLarge`].
pub const MAX_TUNNELS: usize = 128;

/// Checks what every path in a request must be: absolute, without NUL, of bounded length.
pub fn check_path(path: &str) -> Result<(), ErrorBody> {
    let bad = |detail: String| ErrorBody {
        kind: ErrorKind::Invalid,
        detail,
    };
    if !path.starts_with('/') {
        return Err(bad(format!("'{path}' is not an absolute path")));
    }
    if path.contains('\0') {
        return Err(bad("a path cannot contain NUL".into()));
    }
    if path.len() > 4096 {
        return Err(bad("a path is at most 4096 bytes".into()));
    }
    Ok(())
}

/// Checks an argv and environment: not empty, no NUL, names without `=`, within the limits.
pub fn check_command(argv: &[String], env: &[(String, String)]) -> Result<(), ErrorBody> {
    let bad = |detail: &str| ErrorBody {
        kind: ErrorKind::Invalid,
        detail: detail.to_owned(),
    };
    if argv.is_empty() || argv[0].is_empty() {
        return Err(bad("the command is empty"));
    }
    if argv.len() > MAX_ITEMS || env.len() > MAX_ITEMS {
        return Err(bad("at most 4096 arguments and 4096 variables"));
    }
    let strings = argv.iter().chain(env.iter().flat_map(|(k, v)| [k, v]));
    for s in strings {
        if s.contains('\0') {
            return Err(bad("arguments and variables cannot contain NUL"));
        }
        if s.len() > MAX_STRING {
            return Err(bad("an argument or variable is over 64 KiB"));
        }
    }
    if env.iter().any(|(k, _)| k.is_empty() || k.contains('=')) {
        return Err(bad("a variable's name is empty or contains '='"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(frame: Frame) {
        let mut buf = BytesMut::new();
        FrameCodec.encode(frame.clone(), &mut buf).unwrap();
        // Fed one byte at a time, the frame comes out once, whole.
        let mut fed = BytesMut::new();
        let mut out = Vec::new();
        for b in buf.iter() {
            fed.put_u8(*b);
            if let Some(f) = FrameCodec.decode(&mut fed).unwrap() {
                out.push(f);
            }
        }
        assert_eq!(out, vec![frame]);
        assert!(fed.is_empty());
    }

    #[test]
    fn every_frame_survives_the_wire() {
        roundtrip(Frame::Spec(Box::new(ExecSpec {
            argv: vec!["true".into()],
            ..Default::default()
        })));
        roundtrip(Frame::Stdin(Bytes::from_static(b"abc")));
        roundtrip(Frame::StdinEnd);
        roundtrip(Frame::Signal(15));
        roundtrip(Frame::Resize(PtySize { rows: 24, cols: 80 }));
        roundtrip(Frame::Started(42));
        roundtrip(Frame::Stdout(Bytes::new()));
        roundtrip(Frame::Stderr(Bytes::from_static(b"x")));
        roundtrip(Frame::Exit(Box::default()));
        roundtrip(Frame::Error(Box::new(ErrorBody {
            kind: ErrorKind::NotFound,
            detail: "x".into(),
        })));
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        let oversize = [T_STDIN, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            FrameCodec.decode(&mut BytesMut::from(&oversize[..])),
            Err(FrameError::TooLarge(_))
        ));
        let unknown = [99, 0, 0, 0, 0];
        assert!(matches!(
            FrameCodec.decode(&mut BytesMut::from(&unknown[..])),
            Err(FrameError::UnknownTag(99))
        ));
        let short_signal = [T_SIGNAL, 0, 0, 0, 1, 7];
        assert!(matches!(
            FrameCodec.decode(&mut BytesMut::from(&short_signal[..])),
            Err(FrameError::Malformed { .. })
        ));
        let bad_json = [T_SPEC, 0, 0, 0, 1, b'{'];
        assert!(FrameCodec
            .decode(&mut BytesMut::from(&bad_json[..]))
            .is_err());
    }

    #[test]
    fn commands_and_paths_are_checked() {
        assert!(check_path("relative").is_err());
        assert!(check_path("/a\0b").is_err());
        assert!(check_path("/workspace/x").is_ok());
        assert!(check_command(&[], &[]).is_err());
        assert!(check_command(&["ls".into()], &[("A=B".into(), "c".into())]).is_err());
        assert!(check_command(&["ls".into()], &[("A".into(), "c".into())]).is_ok());
    }
}
