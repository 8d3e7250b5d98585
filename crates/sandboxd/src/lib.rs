//! `sandboxd`: the daemon inside every sandbox, and the control plane's client of it.
//!
//! Every exec, file operation and terminal of a sandbox goes through it instead of a Docker
//! exec each: a command's round trip is a stream on an open HTTP/2 connection (about a
//! millisecond, where a Docker exec costs 60–70 ms), its output arrives as it is written,
//! background processes outlive their request, and terminals are real ptys.
//!
//! - [`proto`]: what travels (frames, JSON bodies, limits);
//! - [`daemon`]: the server (`sandboxd serve`), on the sandbox's abstract socket
//!   ([`socket`]), and with `--listen` on TCP too, where a connection must first show the
//!   sandbox's token ([`tcp`]: how a Kubernetes control plane reaches a pod);
//! - [`bridge`]: `sandboxd connect`, which the control plane runs as a Docker exec: its
//!   stdio is the control plane's connection to the daemon, and it starts the daemon when
//!   none answers;
//! - [`client`]: the control plane's HTTP/2 client over any byte stream;
//! - [`egress`]: the sandbox's end of the egress proxy (a loopback listener joined to the
//!   socket the control plane mounts).
//!
//! The binary is built static (`scripts/build-sandboxd`), so it runs in any x86_64 Linux
//! image whatever its libc, and reaches a sandbox on a read-only volume (the Docker
//! backend's `daemon` module); `sandboxd install <dir>` copies it into a volume from an image
//! that holds only the daemon (a Kubernetes init container).

pub mod bridge;
pub mod client;
pub mod daemon;
pub mod egress;
pub mod proto;
pub mod socket;
pub mod tcp;
