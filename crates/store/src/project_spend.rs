//! What each project's model calls cost this calendar month (UTC), for its monthly limit:
//! one row per project and month, added to after every model call by the process that made
//! it (one statement, no transaction held), so every process reads one figure.
//!
//! Invariant: the month is PostgreSQL's (`now()` in UTC), never a process's clock, so two
//! processes never count one call into different months.

use crate::error::Result;
use sandbox_agents_domain::budget::ProjectLimits;
use sandbox_agents_domain::ProjectId;
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::{Date, OffsetDateTime};

/// A project's month so far.
#[derive(Clone, Debug, PartialEq)]
pub struct MonthSpend {
    /// The month's first day (UTC).
    pub month: Date,
    pub cost_usd: f64,
    pub requests: i64,
    pub unpriced_requests: i64,
    /// When this month's 80 % warning went out.
    pub warned_at: Option<OffsetDateTime>,
}

impl MonthSpend {
    /// The columns both queries read, in their order.
    fn from_row(
        month: Date,
        cost_usd: f64,
        requests: i64,
        unpriced_requests: i64,
        warned_at: Option<OffsetDateTime>,
    ) -> Self {
        MonthSpend {
            month,
            cost_usd,
            requests,
            unpriced_requests,
            warned_at,
        }
    }

    /// `YYYY-MM`, as people and the events name it.
    pub fn month_name(&self) -> String {
        format!("{}-{:02}", self.month.year(), u8::from(self.month.month()))
    }
}

/// A project's limits and its month so far: what a turn's start and each model call check.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    pub limits: ProjectLimits,
    pub spend: MonthSpend,
}

/// Adds one call's cost (or its being unpriced) to the project's month, and returns the
/// project's standing after it.
pub async fn add(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    cost_usd: f64,
    requests: i64,
    unpriced_requests: i64,
) -> Result<Standing> {
    let r = sqlx::query!(
        r#"with added as (
               insert into project_spend as s (project_id, month, cost_usd, requests, unpriced_requests)
               values ($1, date_trunc('month', now() at time zone 'UTC')::date, $2, $3, $4)
               on conflict (project_id, month) do update
                 set cost_usd = s.cost_usd + excluded.cost_usd,
                     requests = s.requests + excluded.requests,
                     unpriced_requests = s.unpriced_requests + excluded.unpriced_requests
               returning month, cost_usd, requests, unpriced_requests, warned_at
           )
           select a.month as "month!", a.cost_usd as "cost_usd!", a.requests as "requests!",
                  a.unpriced_requests as "unpriced_requests!", a.warned_at,
                  p.limits as "limits!: Json<ProjectLimits>"
           from added a join projects p on p.id = $1"#,
        project.0,
        cost_usd.max(0.0),
        requests,
        unpriced_requests,
    )
    .fetch_one(db)
    .await?;
    Ok(Standing {
        limits: r.limits.0,
        spend: MonthSpend::from_row(
            r.month,
            r.cost_usd,
            r.requests,
            r.unpriced_requests,
            r.warned_at,
        ),
    })
}

/// The project's limits and its month so far (zeros before its first call of the month).
pub async fn standing(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Standing> {
    let r = sqlx::query!(
        r#"select date_trunc('month', now() at time zone 'UTC')::date as "month!",
                  coalesce(s.cost_usd, 0) as "cost_usd!", coalesce(s.requests, 0) as "requests!",
                  coalesce(s.unpriced_requests, 0) as "unpriced_requests!", s.warned_at,
                  p.limits as "limits!: Json<ProjectLimits>"
           from projects p
           left join project_spend s
             on s.project_id = p.id and s.month = date_trunc('month', now() at time zone 'UTC')::date
           where p.id = $1"#,
        project.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(crate::Error::NotFound)?;
    Ok(Standing {
        limits: r.limits.0,
        spend: MonthSpend::from_row(
            r.month,
            r.cost_usd,
            r.requests,
            r.unpriced_requests,
            r.warned_at,
        ),
    })
}

/// Marks `month`'s warning as sent; true for the one caller that marked it (the warning goes
/// out once, whichever process crossed 80 % first).
pub async fn mark_warned(db: impl PgExecutor<'_>, project: ProjectId, month: Date) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"update project_spend set warned_at = now()
           where project_id = $1 and month = $2 and warned_at is null
           returning true as "marked!""#,
        project.0,
        month,
    )
    .fetch_optional(db)
    .await?
    .unwrap_or(false))
}
