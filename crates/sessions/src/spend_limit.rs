//! The project's monthly spend limit at the door: a turn (a message, or a session created
//! with a prompt) does not start once the project's month has reached it. Turns in flight
//! are stopped by the agent loop before their next call (`agent::spend`).

use sandbox_agents_domain::budget::monthly_limit_reached;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::project_spend;

/// A 402 naming the limit and the month's spend once `project` has reached its monthly
/// limit; nothing is written either way.
pub async fn refuse_over_monthly_limit(
    db: impl sqlx::PgExecutor<'_>,
    project: ProjectId,
) -> Result<()> {
    let s = project_spend::standing(db, project).await?;
    match s.limits.month_reached(s.spend.cost_usd) {
        Some(hit) => Err(ServiceError::SpendLimit(monthly_limit_reached(
            hit.max,
            hit.used,
            &s.spend.month_name(),
        ))),
        None => Ok(()),
    }
}
