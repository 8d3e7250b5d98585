//! Schedules: an agent's message sent on a cron expression in a time zone, into a new
//! session per fire or into one session continued. The wire shapes and the checks that need
//! no time-zone database (the `schedules` crate parses the expression and the zone).

use crate::budget::Budget;
use crate::Patch;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Most characters of a schedule's message.
pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// Most characters of a cron expression and of a time zone's name.
pub const MAX_CRON_CHARS: usize = 200;
pub const MAX_TIMEZONE_CHARS: usize = 64;
/// Most schedules of one agent: each is scanned every second and writes a row per due time.
pub const MAX_SCHEDULES_PER_AGENT: usize = 100;

/// What a schedule does with due times it missed while no server ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MissedPolicy {
    /// Each missed due time is recorded `skipped`; the next one fires as usual.
    #[default]
    Skip,
    /// The missed due times fire once, together, as soon as a server runs.
    RunOnce,
}

/// What a fire does when its session is busy with a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BusyPolicy {
    /// The fire is recorded `skipped`.
    #[default]
    Skip,
    /// The fire waits for the session to be idle, until the next due time (then `skipped`).
    Wait,
}

/// `POST /api/agents/{ref}/schedules`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleCreate {
    /// A name for people. Default `""`.
    #[serde(default)]
    #[schema(max_length = 200)]
    pub name: String,
    /// Five fields (minute hour day-of-month month day-of-week), or six with seconds first;
    /// `*`, lists, ranges, steps, names (`mon`, `jan`), `L`, `#` and `W` as croner takes them.
    #[schema(max_length = 200)]
    pub cron: String,
    /// An IANA time zone (`Europe/Paris`, `UTC`) the expression is read in; daylight-saving
    /// changes follow it (a time that does not exist fires at the next one that does; a time
    /// that happens twice fires once).
    #[schema(max_length = 64)]
    pub timezone: String,
    /// The message each fire sends, as a user's prompt.
    #[schema(max_length = 100000)]
    pub message: String,
    /// `"new"`: a new session of the agent per fire (the default); else the id of a session
    /// of the agent that every fire continues.
    #[serde(default)]
    #[schema(max_length = 36)]
    pub session: Option<String>,
    /// The budget of each new session; null: the agent's. Not with a continued session (its
    /// own budget holds).
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Created paused. Default false.
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub missed: MissedPolicy,
    #[serde(default)]
    pub busy: BusyPolicy,
}

/// `PATCH /api/agents/{ref}/schedules/{id}`: any field of the create body but `session`;
/// absent is unchanged. `"paused": true` pauses, `false` resumes (from now: what fell due
/// while paused does not fire).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulePatch {
    #[serde(default)]
    #[schema(value_type = String, max_length = 200)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, max_length = 200)]
    pub cron: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, max_length = 64)]
    pub timezone: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, max_length = 100000)]
    pub message: Patch<String>,
    /// null removes it.
    #[serde(default)]
    #[schema(value_type = Option<Budget>)]
    pub budget: Patch<Budget>,
    #[serde(default)]
    #[schema(value_type = bool)]
    pub paused: Patch<bool>,
    #[serde(default)]
    #[schema(value_type = MissedPolicy)]
    pub missed: Patch<MissedPolicy>,
    #[serde(default)]
    #[schema(value_type = BusyPolicy)]
    pub busy: Patch<BusyPolicy>,
}

/// A schedule as every schedule endpoint returns it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Schedule {
    pub id: String,
    pub agent_id: String,
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub message: String,
    /// `"new"`, or the id of the session every fire continues.
    pub session: String,
    pub budget: Option<Budget>,
    pub paused: bool,
    pub missed: MissedPolicy,
    pub busy: BusyPolicy,
    /// The next due time (UTC); null while paused.
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_fire_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// What became of a due time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FireStatus {
    /// Its session (with the message as first prompt) or its run started.
    Started,
    /// Missed while no server ran, or its session was busy.
    Skipped,
    /// It could not start; `detail` says why.
    Failed,
}

/// One fire of a schedule (`GET .../schedules/{id}/fires`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ScheduleFire {
    /// The due time it was for (UTC).
    #[serde(with = "time::serde::rfc3339")]
    pub due_at: OffsetDateTime,
    /// When a server fired (or skipped) it.
    #[serde(with = "time::serde::rfc3339")]
    pub fired_at: OffsetDateTime,
    pub session_id: Option<String>,
    /// The run it started: for a new session, its first prompt's (null until the sandbox is
    /// up and the turn starts).
    pub run_id: Option<String>,
    pub status: FireStatus,
    pub detail: Option<String>,
}
