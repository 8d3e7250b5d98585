//! The states of sessions and runs: what the API shows, what the store reads and writes (as
//! `text` columns whose `check` constraints list the same words) and what the services match
//! on. One enum per column, so no layer compares strings.

/// An enum of lowercase words. Serde, OpenAPI and (with the `sqlx` feature) a `text` column
/// spell each variant in snake case; `as_str` gives the same word, written out so that it is
/// a `&'static str` (a test checks that the two agree for every variant).
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash,
            serde::Serialize, serde::Deserialize, utoipa::ToSchema,
        )]
        #[serde(rename_all = "snake_case")]
        #[cfg_attr(
            feature = "sqlx",
            derive(sqlx::Type),
            sqlx(type_name = "text", rename_all = "snake_case")
        )]
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$(Self::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum!(
    /// The compute plane's state: `provisioning` (booting), `running` (the sandbox is up),
    /// `stopped` (no container; the workspace is archived) or `error` (a boot failed).
    SessionStatus {
        Provisioning = "provisioning",
        Running = "running",
        Stopped = "stopped",
        Error = "error",
    }
);

text_enum!(
    /// The conversation's state: `busy` from a message until its run's terminal event,
    /// `idle` otherwise.
    SessionActivity {
        Idle = "idle",
        Busy = "busy",
    }
);

text_enum!(
    /// Why a session's sandbox is stopped: `requested` (a stop), `idle` (released after its
    /// idle TTL; the next message wakes it), `restart` (the server restarted without it),
    /// `lifetime` (its `max_lifetime_seconds` passed; it cannot be started again) or `disk`
    /// (it wrote more than the server's `--sandbox-disk-mb` to its filesystem; the workspace
    /// was archived and a start brings it back).
    StoppedReason {
        Requested = "requested",
        Idle = "idle",
        Restart = "restart",
        Lifetime = "lifetime",
        Disk = "disk",
    }
);

text_enum!(
    /// How a cell ended: `running` (not yet, or its run was interrupted before it answered),
    /// `ok`, `error` (it raised), `timeout` (interrupted at its time limit, state kept),
    /// `died` (the kernel died or had to be replaced: its state is gone) or `interrupted`
    /// (its run was interrupted).
    CellStatus {
        Running = "running",
        Ok = "ok",
        Error = "error",
        Timeout = "timeout",
        Died = "died",
        Interrupted = "interrupted",
    }
);

text_enum!(
    /// A run's state. A run parked on deferrable client tools stays `running`.
    RunStatus {
        Running = "running",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
);

text_enum!(
    /// How a run ended: `end_turn` (the model finished), `cancelled` (interrupt or stop),
    /// `max_turns` (the step limit), `budget_reached` (a limit of the session's budget, an
    /// addition: the run is `completed`) or `error`.
    RunStopReason {
        EndTurn = "end_turn",
        Cancelled = "cancelled",
        MaxTurns = "max_turns",
        BudgetReached = "budget_reached",
        Error = "error",
    }
);

text_enum!(
    /// A client tool call's state: `pending` until the caller answers it (`answered`), its
    /// deadline passes (`timed_out`) or its run ends first (`cancelled`).
    ToolCallStatus {
        Pending = "pending",
        Answered = "answered",
        TimedOut = "timed_out",
        Cancelled = "cancelled",
    }
);

text_enum!(
    /// What kind of call waits for a person's decision (an agent's `ask` permission).
    ApprovalFor {
        Sandbox = "sandbox",
        Subagent = "subagent",
        Client = "client",
    }
);

text_enum!(
    /// A person's decision on a call that waited for one.
    ToolDecision {
        Allow = "allow",
        Deny = "deny",
    }
);

text_enum!(
    /// A webhook delivery's state: `pending` (queued or between retries), `delivered` (a 2xx
    /// came back) or `failed` (retries exhausted).
    DeliveryStatus {
        Pending = "pending",
        Delivered = "delivered",
        Failed = "failed",
    }
);

text_enum!(
    /// An environment image build's state (`environment_builds.status`): `building` until
    /// one process finishes it, then `ready` (the image exists) or `failed` (with the reason).
    BuildStatus {
        Building = "building",
        Ready = "ready",
        Failed = "failed",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Serde's word and `as_str` agree for every variant, and `parse` reads it back.
    macro_rules! agree {
        ($($t:ident),+) => {$(
            for v in $t::ALL {
                assert_eq!(serde_json::to_value(v).unwrap(), v.as_str(), "{v:?}");
                assert_eq!($t::parse(v.as_str()), Some(*v));
            }
        )+};
    }

    #[test]
    fn serde_and_as_str_spell_every_variant_alike() {
        agree!(
            SessionStatus,
            SessionActivity,
            StoppedReason,
            RunStatus,
            RunStopReason,
            ToolCallStatus,
            ApprovalFor,
            ToolDecision,
            DeliveryStatus,
            BuildStatus,
            CellStatus
        );
        assert_eq!(SessionActivity::parse("Busy"), None);
    }
}
