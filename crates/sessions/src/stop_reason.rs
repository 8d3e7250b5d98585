//! Why a session stopped: what the lifecycle records and what the run loop is told before a
//! stop (a module of its own so that both can name it without the run hooks depending on
//! how a stop is done).

/// Why a session stopped, as `stopped_reason` and the event's `reason` say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Requested,
    Idle,
    Restart,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Requested => "requested",
            StopReason::Idle => "idle",
            StopReason::Restart => "restart",
        }
    }
}
