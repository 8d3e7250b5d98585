//! The project's monthly spend limit (`limits.monthly_cost_usd`), over every server process:
//! each model call's cost is added to the project's month in PostgreSQL as soon as it is
//! known (`store::project_spend`), a turn does not start once the month has reached the
//! limit (402), and a turn in flight stops before its next call (`budget_reached` with
//! `limit: "monthly_cost_usd"`). At 80 % a `session.spend_warning` event (and so a webhook)
//! goes out in the session whose call crossed it, once a month.
//!
//! Invariants:
//! * What a turn checks is the month as the database had it after the turn's last call, so
//!   turns running at once in several processes see each other's calls; the project goes
//!   past its limit by at most the calls in flight when it was reached.
//! * Counting is not the turn's business: a failed write is logged and the turn goes on
//!   (the next call's write adds the figure it reads back).

use crate::Runs;
use sandbox_agents_domain::budget::{BudgetHit, ProjectLimits, SPEND_WARNING_AT};
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_model::Usage;
use sandbox_agents_store::events;
use sandbox_agents_store::project_spend::{self, Standing};
use serde_json::json;

/// A turn's view of its project's month: the limits and the spend last read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Month {
    limits: ProjectLimits,
    spent: f64,
}

impl Month {
    fn of(s: &Standing) -> Option<Month> {
        s.limits.monthly_cost_usd.map(|_| Month {
            limits: s.limits,
            spent: s.spend.cost_usd,
        })
    }

    /// The limit, when the month has reached it.
    pub(crate) fn reached(&self) -> Option<BudgetHit> {
        self.limits.month_reached(self.spent)
    }
}

impl Runs {
    /// The project's month as a turn starts; None without a monthly limit.
    pub(crate) async fn month_at_start(&self, project: ProjectId) -> Result<Option<Month>> {
        Ok(Month::of(
            &project_spend::standing(&self.inner.db, project).await?,
        ))
    }

    /// Counts a model call of `run` into its project's month, keeps what the turn knows of
    /// the month (`month`) current, and sends the month's 80 % warning when this call
    /// crossed it.
    pub(crate) async fn count_call(
        &self,
        project: ProjectId,
        session: SessionId,
        run: Option<RunId>,
        usage: &Usage,
        month: Option<&mut Option<Month>>,
    ) {
        let db = &self.inner.db;
        let standing = match project_spend::add(
            db,
            project,
            usage.cost_usd,
            i64::try_from(usage.requests).unwrap_or(i64::MAX),
            i64::try_from(usage.unpriced_requests).unwrap_or(i64::MAX),
        )
        .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(project.id = %project.0, error = %e, "could not count a model call into the project's month");
                return;
            }
        };
        let now = Month::of(&standing);
        if let Some(month) = month {
            *month = now;
        }
        let (Some(limit), Some(m)) = (standing.limits.monthly_cost_usd, now) else {
            return;
        };
        if standing.spend.warned_at.is_some() || m.spent < limit * SPEND_WARNING_AT {
            return;
        }
        match project_spend::mark_warned(db, project, standing.spend.month).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(project.id = %project.0, error = %e, "could not mark the month's spend warning");
                return;
            }
        }
        let payload = json!({
            "limit": "monthly_cost_usd",
            "max": limit,
            "spent": m.spent,
            "month": standing.spend.month_name(),
            "at": SPEND_WARNING_AT,
        });
        let written = async {
            let mut tx = db.begin().await?;
            events::append(
                &mut tx,
                session,
                &[NewEvent::new(EventType::SessionSpendWarning, run, payload)],
            )
            .await?;
            tx.commit().await?;
            Ok::<_, ServiceError>(())
        }
        .await;
        match written {
            Ok(()) => {
                tracing::info!(project.id = %project.0, spent = m.spent, limit, "the project's month passed 80 % of its spend limit")
            }
            Err(e) => {
                tracing::warn!(project.id = %project.0, error = %e, "could not write the spend warning")
            }
        }
    }
}
