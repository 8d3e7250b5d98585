//! `/api/usage`: what a project spent over a window, summed in the database.

use crate::error::{ApiError, ApiResult};
use crate::extract::{query_error, ApiQuery};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::usage::{UsageQuery, UsageReport, UsageTotals};
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// The window's start, inclusive: RFC 3339 with an offset (`2026-12-01T00:00:00Z`;
    /// percent-encode a `+`), or a date (`2026-12-01`: midnight UTC, the start of that day).
    /// Default: 30 days before `to`.
    pub from: Option<String>,
    /// The window's end, after `from` and at most 366 days later. RFC 3339: that instant,
    /// exclusive. A date (`2026-12-05`) includes that whole UTC day: the window ends at the
    /// next midnight UTC (`2026-12-06T00:00:00Z`). Default: now.
    pub to: Option<String>,
    /// `agent`, `model` or `day` (UTC days). Default: `day`.
    #[param(value_type = Option<sandbox_agents_domain::usage::UsageGroupBy>, inline)]
    pub group_by: Option<String>,
    /// Only this agent's sessions (its id or slug): their turns with the subagents they
    /// called, their memory consolidations and their sandboxes. An agent the project does
    /// not have is a 422.
    #[param(max_length = 63)]
    pub agent: Option<String>,
}

/// Get usage
///
/// The project's usage within `[from, to)`, one group per agent, model or UTC day: tokens,
/// model requests, turns and the seconds they worked, from the turns that started in the
/// window (a turn in flight counts what it has recorded so far); and the seconds sandboxes
/// were up within the window (by agent and model, those of the sessions of that agent or
/// using that model), and what the model calls cost (`cost_usd`, with `unpriced_requests`
/// for calls no price was found for). Groups without usage are left out. Bad parameters are
/// a 422 naming each.
#[utoipa::path(get, path = "/api/usage", operation_id = "get_usage", tag = "usage", params(ReportQuery),
    responses((status = 200, body = UsageReport),
              (status = 422, description = "A parameter is invalid: neither RFC 3339 nor a date, an unknown group_by, from not before to, a window over 366 days, or an agent the project does not have")))]
#[tracing::instrument(skip_all)]
pub async fn report(
    State(st): State<AppState>,
    Project(project): Project,
    ApiQuery(ReportQuery {
        from,
        to,
        group_by,
        agent,
    }): ApiQuery<ReportQuery>,
) -> ApiResult<Json<UsageReport>> {
    let q = UsageQuery::parse(
        from.as_deref(),
        to.as_deref(),
        group_by.as_deref(),
        time::OffsetDateTime::now_utc(),
    )
    .map_err(ApiError::Validation)?;
    let agent = match &agent {
        None => None,
        Some(r) => {
            match sandbox_agents_store::agents::get(&st.db, project, &AgentRef::parse(r)).await {
                Ok(a) => Some(a.id.0),
                Err(sandbox_agents_store::Error::NotFound) => {
                    return Err(query_error(
                        "agent",
                        "The project has no agent with this id or slug",
                        r.as_str().into(),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let groups =
        sandbox_agents_store::usage::report(&st.db, project, &q, &st.settings.default_model, agent)
            .await?;
    Ok(Json(UsageReport {
        from: q.from,
        to: q.to,
        group_by: q.group_by,
        total: UsageTotals::sum(&groups),
        groups,
    }))
}
