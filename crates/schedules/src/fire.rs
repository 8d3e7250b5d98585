//! Firing schedules, in every server process: each [`TICK`], claim the due schedules (`for
//! update skip locked`: another process's are skipped, it fires them) and, in the claim's
//! transaction, record each fire, start what it starts and move `next_fire_at` on. A due
//! time therefore fires once, whatever the number of processes; a process that dies before
//! its commit fired nothing, and the next tick of any process fires it.
//!
//! Policies:
//! * a due time more than [`LATE`] past is missed (no server ran at it): `skip` records it
//!   skipped and waits for the next one; `run_once` fires once now for every missed one;
//! * a fire into a continued session that is busy (a turn in flight, or parked) is recorded
//!   skipped (`busy: skip`), or waits, retried each tick until the next due time
//!   (`busy: wait`), then is recorded skipped.

use crate::{Schedules, When};
use sandbox_agents_domain::schedule::{BusyPolicy, FireStatus, MissedPolicy};
use sandbox_agents_domain::session::SessionCreate;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_store::runs::Refusal;
use sandbox_agents_store::schedules::{self, ScheduleRecord};
use serde_json::json;
use std::time::Duration;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

/// How often each process looks for due schedules.
pub const TICK: Duration = Duration::from_secs(1);
/// How late a due time may fire before it counts as missed.
pub const LATE: time::Duration = time::Duration::minutes(1);
/// Most schedules one claim takes.
const BATCH: i64 = 10;

/// What to do after a claimed schedule's transaction commits.
enum After {
    Nothing,
    /// The fire waits for its busy session: the schedule stays due.
    Waits,
    Boot(Box<sandbox_agents_store::sessions::SessionRecord>),
    Drive(ProjectId, SessionId, RunId, bool),
}

impl Schedules {
    /// Fires schedules every [`TICK`] until `shutdown`.
    pub fn spawn_worker(&self, shutdown: CancellationToken) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => return,
                }
                if let Err(e) = me.fire_due().await {
                    tracing::warn!(error = %e, "could not fire the due schedules; trying again next tick");
                }
            }
        });
    }

    /// Claims up to a batch of due schedules and fires each, one transaction each; returns how
    /// many were claimed.
    pub async fn fire_due(&self) -> sandbox_agents_errors::Result<usize> {
        let mut claimed = 0;
        // A schedule whose fire waits (its session busy) stays due: claimed once a tick.
        let mut waiting = Vec::new();
        loop {
            let mut tx = self.db.begin().await?;
            let due = schedules::claim_due(&mut tx, 1, &waiting).await?;
            let Some(s) = due.into_iter().next() else {
                return Ok(claimed);
            };
            claimed += 1;
            let after = self.fire(&mut tx, &s).await?;
            tx.commit().await?;
            match after {
                After::Nothing => {}
                After::Waits => waiting.push(s.id),
                After::Boot(row) => self.sessions.after_create(&row),
                After::Drive(project, id, run, wake) => {
                    self.runs.spawn_drive(project, id, run, wake)
                }
            }
            if claimed as i64 >= BATCH {
                return Ok(claimed);
            }
        }
    }

    /// Fires the claimed schedule `s` inside `tx`: records the fire, starts it, moves on.
    async fn fire(
        &self,
        tx: &mut sqlx::PgConnection,
        s: &ScheduleRecord,
    ) -> sandbox_agents_errors::Result<After> {
        let Some(due) = s.next_fire_at else {
            return Ok(After::Nothing);
        };
        let now = OffsetDateTime::now_utc();
        let when = match When::parse(&s.cron, &s.timezone) {
            Ok(w) => w,
            Err((_, why)) => {
                // Checked when saved; a newer parser could disagree. Stop it, saying why.
                schedules::record_fire(tx, s.id, due, None, None, FireStatus::Failed, Some(&why))
                    .await?;
                schedules::set_next(tx, s.id, None).await?;
                return Ok(After::Nothing);
            }
        };
        // On time, the next due time follows this one (a backlog of a few seconds is fired
        // due time by due time, each tick); missed, the next is the first still ahead.
        let late = now - due > LATE;
        let next = when.next_after(if late { now } else { due });
        if late {
            let missed = 1 + when.count_between(due, now, 10_000);
            if s.missed() == MissedPolicy::Skip {
                let why =
                    format!("missed: no server ran at its time ({missed} due time(s) skipped)");
                schedules::record_fire(tx, s.id, due, None, None, FireStatus::Skipped, Some(&why))
                    .await?;
                schedules::set_next(tx, s.id, next).await?;
                tracing::info!(schedule.id = %s.id, missed, "missed due times skipped");
                return Ok(After::Nothing);
            }
            tracing::info!(schedule.id = %s.id, missed, "missed due times run once");
        }
        let project = ProjectId(s.project_id);
        let (after, status, session, run, detail) = match s.session_id {
            None => match self.new_session(tx, s, project, due).await {
                Ok(row) => {
                    let id = row.id;
                    (
                        After::Boot(Box::new(row)),
                        FireStatus::Started,
                        Some(id),
                        None,
                        None,
                    )
                }
                Err(e) => (
                    After::Nothing,
                    FireStatus::Failed,
                    None,
                    None,
                    Some(e.for_user().detail.to_string()),
                ),
            },
            Some(sid) => {
                let id = SessionId(sid);
                let message = self
                    .runs
                    .prepare_message(project, id, s.message.clone(), None, &[])
                    .await;
                let started = match message {
                    Ok(m) => self.runs.start_prepared(tx, &m).await,
                    Err(e) => Err(e),
                };
                match started {
                    Ok(Ok((r, wake))) => (
                        After::Drive(project, id, r.id, wake),
                        FireStatus::Started,
                        Some(id),
                        Some(r.id),
                        None,
                    ),
                    Ok(Err(Refusal::Busy | Refusal::Parked)) => {
                        if s.busy() == BusyPolicy::Wait && next.is_some_and(|n| now < n) {
                            // Waits: claimed again next tick, until the next due time.
                            return Ok(After::Waits);
                        }
                        (
                            After::Nothing,
                            FireStatus::Skipped,
                            Some(id),
                            None,
                            Some("the session was busy with a turn".to_owned()),
                        )
                    }
                    Ok(Err(r)) => (
                        After::Nothing,
                        FireStatus::Failed,
                        Some(id),
                        None,
                        Some(format!("the session cannot take a message: {r:?}")),
                    ),
                    Err(e) => (
                        After::Nothing,
                        FireStatus::Failed,
                        Some(id),
                        None,
                        Some(e.for_user().detail.to_string()),
                    ),
                }
            }
        };
        schedules::record_fire(tx, s.id, due, session, run, status, detail.as_deref()).await?;
        schedules::set_next(tx, s.id, next).await?;
        tracing::info!(schedule.id = %s.id, due = %due, ?status, "schedule fired");
        Ok(after)
    }

    /// A new session of the schedule's agent, its message the first prompt, inserted in `tx`.
    async fn new_session(
        &self,
        tx: &mut sqlx::PgConnection,
        s: &ScheduleRecord,
        project: ProjectId,
        due: OffsetDateTime,
    ) -> sandbox_agents_errors::Result<sandbox_agents_store::sessions::SessionRecord> {
        let mut metadata = serde_json::Map::new();
        metadata.insert("schedule_id".into(), json!(s.id.to_string()));
        metadata.insert("schedule_due_at".into(), json!(due.to_string()));
        let title = if s.name.is_empty() {
            "Scheduled".to_owned()
        } else {
            s.name.clone()
        };
        let body: SessionCreate = serde_json::from_value(json!({
            "agent_id": s.agent_id.to_string(),
            "title": title,
            "metadata": metadata,
            "prompt": s.message,
            "budget": s.budget.as_ref().map(|b| b.0),
        }))
        .expect("a session body of ours parses");
        let prepared = self.sessions.prepare(project, body).await?;
        self.sessions.insert_prepared(tx, &prepared).await
    }
}
