//! A subscription's deliveries: the paged log, each delivery's attempts, asking
//! for a delivery again, and a test ping.

use super::webhooks::{not_found, webhook_id};
use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::{page_window, query_error, ApiQuery};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sandbox_agents_domain::webhook::{Delivery, DeliveryAttempt, DeliveryStatus, PingResult};
use sandbox_agents_domain::DeliveryId;
use sandbox_agents_store::{deliveries, webhooks};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `pending` | `delivered` | `failed`; all when left out.
    #[param(value_type = Option<sandbox_agents_domain::state::DeliveryStatus>, inline)]
    pub status: Option<String>,
    /// Page size (default 50, at most 1000).
    pub limit: Option<i64>,
    /// Rows to skip (default 0).
    pub offset: Option<i64>,
}

fn delivery_id(raw: &str) -> ApiResult<DeliveryId> {
    DeliveryId::parse(raw).ok_or_else(|| ApiError::NotFound(delivery_not_found(raw)()))
}

fn delivery_not_found(raw: &str) -> impl FnOnce() -> String + '_ {
    move || format!("delivery '{raw}' not found for this webhook")
}

/// List deliveries
///
/// The subscription's deliveries, newest first; `X-Total-Count` carries the number matching.
#[utoipa::path(get, path = "/api/webhooks/{webhook_id}/deliveries", operation_id = "list_deliveries", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id"), ListQuery),
    responses((status = 200, body = Vec<Delivery>, headers(("X-Total-Count" = i64, description = "Rows matching the filter"))),
              (status = 404, description = "No such webhook")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<(HeaderMap, Json<Vec<Delivery>>)> {
    let id = webhook_id(&raw)?;
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(DeliveryStatus::parse(s).ok_or_else(|| {
            query_error(
                "status",
                "Input should be 'pending', 'delivered' or 'failed'",
                Value::from(s),
            )
        })?),
    };
    let (limit, offset) = page_window(q.limit, q.offset, 50)?;
    let mut conn = st.db.acquire().await?;
    webhooks::get(&mut *conn, project, id)
        .await
        .or_not_found(not_found(&raw))?;
    let (rows, total) = deliveries::list(&mut conn, project, id, status, limit, offset).await?;
    let mut h = HeaderMap::new();
    h.insert("x-total-count", total.into());
    Ok((h, Json(rows.iter().map(|d| d.to_wire()).collect())))
}

/// List a delivery's attempts
///
/// Every attempt of one delivery, oldest first: status code, error, duration, and when the
/// next try was scheduled.
#[utoipa::path(get, path = "/api/webhooks/{webhook_id}/deliveries/{delivery_id}/attempts", operation_id = "list_delivery_attempts", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id"), ("delivery_id" = String, Path, description = "The delivery's id (the `X-Anecdote-Delivery` header)")),
    responses((status = 200, body = Vec<DeliveryAttempt>), (status = 404, description = "No such webhook or delivery")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw, delivery.id = %raw_delivery))]
pub async fn attempts(
    State(st): State<AppState>,
    Project(project): Project,
    Path((raw, raw_delivery)): Path<(String, String)>,
) -> ApiResult<Json<Vec<DeliveryAttempt>>> {
    let id = webhook_id(&raw)?;
    let delivery = delivery_id(&raw_delivery)?;
    deliveries::get(&st.db, project, id, delivery)
        .await
        .or_not_found(delivery_not_found(&raw_delivery))?;
    Ok(Json(
        deliveries::attempts(&st.db, project, id, delivery).await?,
    ))
}

/// Redeliver
///
/// Queues a delivery again, now, with a fresh retry budget, whatever its status. The
/// delivery keeps its id (`X-Anecdote-Delivery`), so a receiver that already has it can tell.
#[utoipa::path(post, path = "/api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver", operation_id = "redeliver", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id"), ("delivery_id" = String, Path, description = "The delivery's id (the `X-Anecdote-Delivery` header)")),
    responses((status = 202, body = Delivery), (status = 404, description = "No such webhook or delivery")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw, delivery.id = %raw_delivery))]
pub async fn redeliver(
    State(st): State<AppState>,
    Project(project): Project,
    Path((raw, raw_delivery)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Delivery>)> {
    let id = webhook_id(&raw)?;
    let delivery = delivery_id(&raw_delivery)?;
    let d = deliveries::redeliver(&st.db, project, id, delivery)
        .await
        .or_not_found(delivery_not_found(&raw_delivery))?;
    tracing::info!(delivery.id = %delivery, "delivery queued again on request");
    Ok((StatusCode::ACCEPTED, Json(d.to_wire())))
}

/// Ping a webhook
///
/// Sends a signed test request now (`X-Anecdote-Event: ping`, body
/// `{"id", "type": "ping", "session_id": "", "event": null}`) and reports what the receiver
/// answered. Nothing is recorded, and it works on an inactive subscription too.
#[utoipa::path(post, path = "/api/webhooks/{webhook_id}/ping", operation_id = "ping_webhook", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id")),
    responses((status = 200, body = PingResult), (status = 404, description = "No such webhook")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw))]
pub async fn ping(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<Json<PingResult>> {
    let id = webhook_id(&raw)?;
    let w = webhooks::get(&st.db, project, id)
        .await
        .or_not_found(not_found(&raw))?;
    let result = st
        .webhooks
        .ping(&w)
        .await
        .map_err(|e| ApiError::Conflict(e.to_string()))?;
    Ok(Json(result))
}
