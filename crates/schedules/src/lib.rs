//! Schedules: an agent's message sent on a cron expression in a time zone, into a new
//! session per fire or into one session continued (issue 38). Durable in PostgreSQL and
//! fired once per due time by whichever server process claims it (`fire.rs`); when is
//! `cron.rs` (croner and chrono-tz).
//!
//! Rules:
//! * a schedule's agent is not archived when it is created (422), and a continued session is
//!   one of that agent's (422 naming `session` otherwise);
//! * an agent has at most [`MAX_SCHEDULES_PER_AGENT`] (a 422 at create; creates of one agent
//!   take turns on its row, so the count holds);
//! * an archived agent's schedules do not fire (`claim_due`) until it is unarchived;
//! * `next_fire_at` is computed from now whenever the expression, the zone or `paused`
//!   changes: an edit never fires what fell due before it.

mod cron;
mod fire;

pub use cron::When;
pub use fire::TICK;

use sandbox_agents_agent::Runs;
use sandbox_agents_domain::agent::{AgentRecord, AgentRef};
use sandbox_agents_domain::agent_version::ChangedBy;
use sandbox_agents_domain::schedule::{
    Schedule, ScheduleCreate, ScheduleFire, SchedulePatch, MAX_CRON_CHARS, MAX_MESSAGE_CHARS,
    MAX_SCHEDULES_PER_AGENT, MAX_TIMEZONE_CHARS,
};
use sandbox_agents_domain::{Patch, ProjectId, SessionId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::schedules::{self, ScheduleFields, ScheduleRecord};
use sandbox_agents_store::{agents, sessions, Db};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// The schedules service; cheap to clone.
#[derive(Clone)]
pub struct Schedules {
    db: Db,
    sessions: Sessions,
    runs: Runs,
}

/// A 422 about the agent the path's `ref` names.
fn at_ref(r: &str, msg: String) -> ServiceError {
    ServiceError::Validation(vec![sandbox_agents_domain::FieldError {
        kind: "value_error".into(),
        loc: vec!["path".into(), "ref".into()],
        msg,
        input: Value::from(r),
    }])
}

fn no_schedule(id: &str) -> ServiceError {
    ServiceError::NotFound(format!("schedule '{id}' not found for this agent"))
}

fn schedule_id(raw: &str) -> Result<Uuid> {
    Uuid::try_parse(raw).map_err(|_| no_schedule(raw))
}

/// The next due time of a schedule set this way, from now (None while paused).
fn next_from_now(when: &When, paused: bool) -> Option<OffsetDateTime> {
    (!paused)
        .then(|| when.next_after(OffsetDateTime::now_utc()))
        .flatten()
}

/// Checks the fields every schedule has; the expression and zone parsed.
fn check(name: &str, cron: &str, timezone: &str, message: &str) -> Result<When> {
    let mut v = Violations::new();
    for (field, value, max) in [
        ("name", name, 200),
        ("cron", cron, MAX_CRON_CHARS),
        ("timezone", timezone, MAX_TIMEZONE_CHARS),
        ("message", message, MAX_MESSAGE_CHARS),
    ] {
        if value.chars().count() > max {
            v.push(
                "string_too_long",
                &[field],
                format!("{field} is at most {max} characters"),
                Value::from(value.chars().count()),
            );
        }
    }
    if message.trim().is_empty() {
        v.push(
            "value_error",
            &["message"],
            "message must not be blank",
            Value::from(message),
        );
    }
    v.into_result().map_err(ServiceError::Validation)?;
    When::parse(cron, timezone).map_err(|(field, msg)| {
        let input = if field == "cron" { cron } else { timezone };
        ServiceError::field(&[field], msg, Value::from(input))
    })
}

impl Schedules {
    pub fn new(db: Db, sessions: Sessions, runs: Runs) -> Self {
        Schedules { db, sessions, runs }
    }

    async fn agent(&self, project: ProjectId, r: &str) -> Result<AgentRecord> {
        agents::get(&self.db, project, &AgentRef::parse(r))
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::NotFound => {
                    ServiceError::NotFound(format!("agent '{r}' not found in this project"))
                }
                other => other.into(),
            })
    }

    /// Creates a schedule of the agent `r` names.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn create(
        &self,
        project: ProjectId,
        r: &str,
        body: ScheduleCreate,
        by: Option<&ChangedBy>,
    ) -> Result<Schedule> {
        let agent = self.agent(project, r).await?;
        if agent.archived_at.is_some() {
            return Err(at_ref(
                r,
                format!(
                    "agent '{}' is archived; a schedule of it would start nothing: unarchive it first",
                    agent.slug
                ),
            ));
        }
        let when = check(&body.name, &body.cron, &body.timezone, &body.message)?;
        let mut v = Violations::new();
        if let Some(b) = &body.budget {
            b.validate(&mut v, &["budget"]);
        }
        v.into_result().map_err(ServiceError::Validation)?;
        let session = match body.session.as_deref() {
            None | Some("new") => None,
            Some(raw) => Some(self.continued_session(project, &agent, raw).await?),
        };
        if session.is_some() && body.budget.is_some() {
            return Err(ServiceError::field(
                &["budget"],
                "a budget is for the new session of each fire; a continued session keeps its own (PATCH the session)",
                Value::Null,
            ));
        }
        let budget = body.budget.filter(|b| !b.is_empty());
        let fields = ScheduleFields {
            name: &body.name,
            cron: body.cron.trim(),
            timezone: body.timezone.trim(),
            message: &body.message,
            budget: budget.as_ref(),
            paused: body.paused,
            missed: body.missed,
            busy: body.busy,
            next_fire_at: next_from_now(&when, body.paused),
        };
        let mut tx = self.db.begin().await?;
        let count = schedules::count_locking_agent(&mut tx, agent.id).await?;
        if count >= MAX_SCHEDULES_PER_AGENT as i64 {
            return Err(at_ref(
                r,
                format!(
                    "agent '{}' has {count} schedules, the most an agent has ({MAX_SCHEDULES_PER_AGENT}): delete one first",
                    agent.slug
                ),
            ));
        }
        let row = schedules::insert(&mut *tx, project, agent.id, session, &fields, by).await?;
        tx.commit().await?;
        tracing::info!(schedule.id = %row.id, next = ?row.next_fire_at, "schedule created");
        Ok(row.to_wire())
    }

    /// The session `raw` names, which must be one of `agent`'s in the project (422 naming
    /// `session` otherwise).
    async fn continued_session(
        &self,
        project: ProjectId,
        agent: &AgentRecord,
        raw: &str,
    ) -> Result<SessionId> {
        let bad = |msg: String| ServiceError::field(&["session"], msg, Value::from(raw));
        let id = SessionId::parse(raw)
            .ok_or_else(|| bad("session is \"new\" or the id of a session of this agent".into()))?;
        match sessions::get(&self.db, project, id).await {
            Ok(s) if s.agent_id == agent.id => Ok(id),
            Ok(_) => Err(bad(format!(
                "session '{raw}' is not a session of agent '{}'",
                agent.slug
            ))),
            Err(sandbox_agents_store::Error::NotFound) => {
                Err(bad(format!("there is no session '{raw}' in this project")))
            }
            Err(e) => Err(e.into()),
        }
    }

    pub async fn list(&self, project: ProjectId, r: &str) -> Result<Vec<Schedule>> {
        let agent = self.agent(project, r).await?;
        Ok(schedules::list(&self.db, project, agent.id)
            .await?
            .iter()
            .map(ScheduleRecord::to_wire)
            .collect())
    }

    pub async fn get(&self, project: ProjectId, r: &str, id: &str) -> Result<Schedule> {
        let agent = self.agent(project, r).await?;
        let sid = schedule_id(id)?;
        match schedules::get(&self.db, project, agent.id, sid).await {
            Ok(row) => Ok(row.to_wire()),
            Err(sandbox_agents_store::Error::NotFound) => Err(no_schedule(id)),
            Err(e) => Err(e.into()),
        }
    }

    /// Changes a schedule under its row's lock (no fire is claimed meanwhile). A change of the
    /// expression, the zone or `paused` computes the next due time from now.
    #[tracing::instrument(skip_all, fields(project.id = %project, schedule.id = %id))]
    pub async fn update(
        &self,
        project: ProjectId,
        r: &str,
        id: &str,
        patch: SchedulePatch,
    ) -> Result<Schedule> {
        let agent = self.agent(project, r).await?;
        let sid = schedule_id(id)?;
        let mut v = Violations::new();
        for (field, null) in [
            ("name", patch.name == Patch::Null),
            ("cron", patch.cron == Patch::Null),
            ("timezone", patch.timezone == Patch::Null),
            ("message", patch.message == Patch::Null),
            ("paused", patch.paused == Patch::Null),
            ("missed", patch.missed == Patch::Null),
            ("busy", patch.busy == Patch::Null),
        ] {
            if null {
                v.null(&[field]);
            }
        }
        if let Patch::Value(b) = &patch.budget {
            b.validate(&mut v, &["budget"]);
        }
        v.into_result().map_err(ServiceError::Validation)?;
        let mut tx = self.db.begin().await?;
        let cur = match schedules::lock(&mut tx, project, agent.id, sid).await {
            Ok(row) => row,
            Err(sandbox_agents_store::Error::NotFound) => return Err(no_schedule(id)),
            Err(e) => return Err(e.into()),
        };
        let take = |p: Patch<String>, c: &str| match p {
            Patch::Value(x) => x,
            _ => c.to_owned(),
        };
        let retimed = matches!(patch.cron, Patch::Value(_))
            || matches!(patch.timezone, Patch::Value(_))
            || matches!(patch.paused, Patch::Value(p) if p != cur.paused);
        let name = take(patch.name, &cur.name);
        let cron = take(patch.cron, &cur.cron).trim().to_owned();
        let timezone = take(patch.timezone, &cur.timezone).trim().to_owned();
        let message = take(patch.message, &cur.message);
        let when = check(&name, &cron, &timezone, &message)?;
        let budget = match patch.budget {
            Patch::Absent => cur.budget.as_ref().map(|b| b.0),
            Patch::Null => None,
            Patch::Value(b) => Some(b).filter(|b| !b.is_empty()),
        };
        if cur.session_id.is_some() && budget.is_some() {
            return Err(ServiceError::field(
                &["budget"],
                "a budget is for the new session of each fire; a continued session keeps its own (PATCH the session)",
                Value::Null,
            ));
        }
        let paused = match patch.paused {
            Patch::Value(p) => p,
            _ => cur.paused,
        };
        let next_fire_at = if retimed {
            next_from_now(&when, paused)
        } else {
            cur.next_fire_at
        };
        let fields = ScheduleFields {
            name: &name,
            cron: &cron,
            timezone: &timezone,
            message: &message,
            budget: budget.as_ref(),
            paused,
            missed: match patch.missed {
                Patch::Value(m) => m,
                _ => cur.missed(),
            },
            busy: match patch.busy {
                Patch::Value(b) => b,
                _ => cur.busy(),
            },
            next_fire_at,
        };
        let row = schedules::update(&mut *tx, project, agent.id, sid, &fields).await?;
        tx.commit().await?;
        Ok(row.to_wire())
    }

    pub async fn delete(&self, project: ProjectId, r: &str, id: &str) -> Result<()> {
        let agent = self.agent(project, r).await?;
        let sid = schedule_id(id)?;
        match schedules::delete(&self.db, project, agent.id, sid).await {
            Err(sandbox_agents_store::Error::NotFound) => Err(no_schedule(id)),
            other => Ok(other?),
        }
    }

    /// A page of the schedule's fires, newest first, and how many it has.
    pub async fn fires(
        &self,
        project: ProjectId,
        r: &str,
        id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<ScheduleFire>, i64)> {
        let agent = self.agent(project, r).await?;
        let sid = schedule_id(id)?;
        let mut conn = self.db.acquire().await?;
        match schedules::get(&mut *conn, project, agent.id, sid).await {
            Ok(_) => {}
            Err(sandbox_agents_store::Error::NotFound) => return Err(no_schedule(id)),
            Err(e) => return Err(e.into()),
        }
        Ok(schedules::fires(&mut conn, sid, limit, offset).await?)
    }
}
