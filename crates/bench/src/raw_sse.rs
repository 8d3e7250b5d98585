//! A lean SSE client for the fan-out benchmark: one `TcpStream`, one HTTP/1.1 GET, the chunked
//! body decoded in place, frames handed out as bytes.
//!
//! Why not reqwest: the benchmark's 1,000 clients share the server's 2 cores, so what they cost
//! is counted in the server's latency. A reqwest stream is two tasks (hyper's connection task
//! feeds the body to the reader's task through a channel) and a few allocations per frame; this
//! one is the reader's task alone, reading the socket itself, which is closer to the clients
//! on other machines the server would have in production.

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest response head accepted.
const MAX_HEAD: usize = 16 * 1024;

pub struct RawSse {
    socket: TcpStream,
    /// Bytes read and not yet decoded (chunk headers included).
    raw: Vec<u8>,
    /// Decoded body bytes not yet returned as frames.
    body: Vec<u8>,
    /// The last chunk (size 0) was seen.
    ended: bool,
}

impl RawSse {
    /// Opens `url` (`http://host:port/path?query`) with `GET` and reads the response's head;
    /// an error unless it is a 200 with a chunked body.
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        let rest = url
            .strip_prefix("http://")
            .with_context(|| format!("not an http:// URL: {url}"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let socket = TcpStream::connect(authority)
            .await
            .with_context(|| format!("connecting to {authority}"))?;
        socket.set_nodelay(true)?;
        let mut sse = RawSse {
            socket,
            raw: Vec::with_capacity(8192),
            body: Vec::with_capacity(8192),
            ended: false,
        };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\r\n"
        );
        sse.socket.write_all(request.as_bytes()).await?;
        let head_end = loop {
            if let Some(i) = find(&sse.raw, b"\r\n\r\n") {
                break i;
            }
            if sse.raw.len() > MAX_HEAD {
                bail!("the response head is over {MAX_HEAD} bytes");
            }
            if sse.read().await? == 0 {
                bail!("the connection closed before the response head");
            }
        };
        let head = String::from_utf8_lossy(&sse.raw[..head_end]).to_ascii_lowercase();
        let status = head.lines().next().unwrap_or_default().to_owned();
        if !status.starts_with("http/1.1 200") {
            bail!("HTTP {}", status.trim_start_matches("http/1.1 "));
        }
        if !head.contains("\r\ntransfer-encoding: chunked") {
            bail!("the response body is not chunked");
        }
        sse.raw.drain(..head_end + 4);
        Ok(sse)
    }

    async fn read(&mut self) -> std::io::Result<usize> {
        self.raw.reserve(8192);
        self.socket.read_buf(&mut self.raw).await
    }

    /// The next frame (its bytes up to and including the blank line), or None at the body's end.
    pub async fn next_frame(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = find(&self.body, b"\n\n") {
                return Ok(Some(self.body.drain(..end + 2).collect()));
            }
            if self.ended {
                return Ok(None);
            }
            if !self.decode()? && self.read().await? == 0 {
                bail!("the connection closed in the middle of the body");
            }
        }
    }

    /// Moves every whole chunk from `raw` to `body`; whether any was moved (or the end seen).
    fn decode(&mut self) -> anyhow::Result<bool> {
        let mut taken = 0;
        let mut moved = false;
        while let Some(line) = find(&self.raw[taken..], b"\r\n") {
            let size_text = std::str::from_utf8(&self.raw[taken..taken + line])?;
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .with_context(|| format!("a bad chunk size line: {size_text:?}"))?;
            let start = taken + line + 2;
            if self.raw.len() < start + size + 2 {
                break;
            }
            self.body.extend_from_slice(&self.raw[start..start + size]);
            taken = start + size + 2;
            moved = true;
            if size == 0 {
                self.ended = true;
                break;
            }
        }
        self.raw.drain(..taken);
        Ok(moved)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
