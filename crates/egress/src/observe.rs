//! Who hears what the proxy decides and carries: an [`Observer`] (the session's log and its
//! egress summary, in the server), and [`Done`], which reports one allowed connection's
//! traffic however it ends.

use crate::decide::{Denial, Host, Policy};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Who hears of decisions and traffic (the event log, the per-session summary). Called on
/// the proxy's path: implementations hand the work off and return.
pub trait Observer: Send + Sync {
    fn denied(&self, sandbox_id: &str, policy: &Policy, host: &Host, port: u16, denial: &Denial);
    /// An allowed connection ended, after `sent` bytes up and `received` down.
    fn closed(&self, policy: &Policy, host: &Host, port: u16, sent: u64, received: u64);
}

/// An observer that hears nothing.
pub struct Unobserved;

impl Observer for Unobserved {
    fn denied(&self, _: &str, _: &Policy, _: &Host, _: u16, _: &Denial) {}
    fn closed(&self, _: &Policy, _: &Host, _: u16, _: u64, _: u64) {}
}

/// Reports an allowed connection's traffic when it is dropped (the tunnel ended, or the
/// forwarded response's body was consumed or abandoned).
pub(crate) struct Done {
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) host: Host,
    pub(crate) port: u16,
    pub(crate) sent: Arc<AtomicU64>,
    pub(crate) received: Arc<AtomicU64>,
}

impl Drop for Done {
    fn drop(&mut self) {
        let (sent, received) = (
            self.sent.load(Ordering::Relaxed),
            self.received.load(Ordering::Relaxed),
        );
        self.observer
            .closed(&self.policy, &self.host, self.port, sent, received);
    }
}
