//! `/api/webhooks`: subscriptions. The signing secret is returned by
//! create and rotate-secret only; it is stored sealed under the master key.

use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::ApiJson;
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::event::EventTypeInfo;
use sandbox_agents_domain::webhook::{
    check_name, check_url_shape, parse_event_types, subscribable, Webhook, WebhookCreate,
    WebhookCreated, WebhookPatch,
};
use sandbox_agents_domain::{Patch, ProjectId, Violations, WebhookId};
use sandbox_agents_store::agents;
use sandbox_agents_store::webhooks::{self, NewWebhook, WebhookUpdate};
use serde_json::Value;
use uuid::Uuid;

/// Parses a webhook id from a path; anything that is not an id names no webhook.
pub fn webhook_id(raw: &str) -> ApiResult<WebhookId> {
    WebhookId::parse(raw).ok_or_else(|| ApiError::NotFound(format!("webhook '{raw}' not found")))
}

pub fn not_found(raw: &str) -> impl FnOnce() -> String + '_ {
    move || format!("webhook '{raw}' not found")
}

/// Checks a URL's shape, then whether deliveries may go there at all.
fn check_url(st: &AppState, errors: &mut Violations, url: &str) {
    if check_url_shape(errors, url) {
        if let Err(msg) = st.webhooks.check_url(url) {
            errors.push("value_error", &["url"], msg, Value::from(url));
        }
    }
}

/// Resolves an agent reference (id or slug) to the agent's id, or records a 422.
async fn resolve_agent(
    st: &AppState,
    project: ProjectId,
    errors: &mut Violations,
    r: &str,
) -> ApiResult<Option<Uuid>> {
    match agents::get(&st.db, project, &AgentRef::parse(r)).await {
        Ok(a) => Ok(Some(a.id.0)),
        Err(sandbox_agents_store::Error::NotFound) => {
            errors.push(
                "value_error",
                &["agent_id"],
                format!("there is no agent '{r}' in this project"),
                Value::from(r),
            );
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn names(types: &[sandbox_agents_domain::event::EventType]) -> Vec<String> {
    types.iter().map(|t| t.as_str().to_owned()).collect()
}

/// List subscribable event types
///
/// Every event type a subscription can name (the stored types). Not project-scoped.
#[utoipa::path(get, path = "/api/webhooks/event-types", operation_id = "list_event_types", tag = "webhooks",
    responses((status = 200, body = Vec<EventTypeInfo>)))]
pub async fn event_types() -> Json<Vec<EventTypeInfo>> {
    Json(
        subscribable()
            .map(|t| EventTypeInfo {
                kind: t.as_str().to_owned(),
                description: t.description().to_owned(),
                group: t.group().to_owned(),
            })
            .collect(),
    )
}

/// List webhooks
///
/// The project's subscriptions, oldest first. Secrets are never included.
#[utoipa::path(get, path = "/api/webhooks", operation_id = "list_webhooks", tag = "webhooks",
    responses((status = 200, body = Vec<Webhook>)))]
#[tracing::instrument(skip_all)]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
) -> ApiResult<Json<Vec<Webhook>>> {
    let all = webhooks::list(&st.db, project).await?;
    Ok(Json(all.iter().map(|w| w.to_wire()).collect()))
}

/// Create a webhook
///
/// Subscribes a URL to the events appended from now on. The response is the only one that
/// carries the signing secret (besides rotate-secret).
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/webhooks", operation_id = "create_webhook", tag = "webhooks", request_body = WebhookCreate,
    responses((status = 201, body = WebhookCreated), (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    ApiJson(body): ApiJson<WebhookCreate>,
) -> ApiResult<(StatusCode, Json<WebhookCreated>)> {
    let mut errors = Violations::new();
    check_name(&mut errors, &body.name);
    check_url(&st, &mut errors, &body.url);
    let types = parse_event_types(&mut errors, &body.event_types);
    let agent = match body.agent_id.as_deref() {
        Some(r) => resolve_agent(&st, project, &mut errors, r).await?,
        None => None,
    };
    errors.into_result().map_err(ApiError::Validation)?;
    let id = WebhookId::new();
    let (secret, sealed) = st.webhooks.new_secret(id)?;
    let record = webhooks::insert(
        &st.db,
        &NewWebhook {
            id,
            project,
            name: body.name.trim(),
            url: &body.url,
            event_types: &names(&types),
            agent_id: agent,
            active: body.active,
            secret_sealed: &sealed,
        },
    )
    .await?;
    tracing::info!(webhook.id = %id, "webhook created");
    Ok((
        StatusCode::CREATED,
        Json(WebhookCreated {
            webhook: record.to_wire(),
            secret,
        }),
    ))
}

/// Get a webhook
///
/// One subscription, without its secret.
#[utoipa::path(get, path = "/api/webhooks/{webhook_id}", operation_id = "get_webhook", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id")),
    responses((status = 200, body = Webhook), (status = 404, description = "No such webhook")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<Json<Webhook>> {
    let id = webhook_id(&raw)?;
    let w = webhooks::get(&st.db, project, id)
        .await
        .or_not_found(not_found(&raw))?;
    Ok(Json(w.to_wire()))
}

/// Update a webhook
///
/// A partial edit. `event_types: null` means every type; `agent_id: null` clears the filter;
/// `active: true` also resets the failure count of a deactivated subscription.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(patch, path = "/api/webhooks/{webhook_id}", operation_id = "update_webhook", tag = "webhooks", request_body = WebhookPatch,
    params(("webhook_id" = String, Path, description = "The subscription's id")),
    responses((status = 200, body = Webhook), (status = 404, description = "No such webhook"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw))]
pub async fn update(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
    ApiJson(patch): ApiJson<WebhookPatch>,
) -> ApiResult<Json<Webhook>> {
    let id = webhook_id(&raw)?;
    // A webhook that does not exist is a 404 before its body is judged.
    webhooks::get(&st.db, project, id)
        .await
        .or_not_found(not_found(&raw))?;
    let mut errors = Violations::new();
    let mut u = WebhookUpdate::default();
    match patch.name {
        Patch::Absent => {}
        Patch::Null => errors.null(&["name"]),
        Patch::Value(n) => {
            check_name(&mut errors, &n);
            u.name = Some(n.trim().to_owned());
        }
    }
    match patch.url {
        Patch::Absent => {}
        Patch::Null => errors.null(&["url"]),
        Patch::Value(url) => {
            check_url(&st, &mut errors, &url);
            u.url = Some(url);
        }
    }
    match patch.event_types {
        Patch::Absent => {}
        Patch::Null => u.event_types = Some(Vec::new()),
        Patch::Value(types) => u.event_types = Some(names(&parse_event_types(&mut errors, &types))),
    }
    match patch.agent_id {
        Patch::Absent => {}
        Patch::Null => u.agent_id = Some(None),
        Patch::Value(r) => u.agent_id = Some(resolve_agent(&st, project, &mut errors, &r).await?),
    }
    match patch.active {
        Patch::Absent => {}
        Patch::Null => errors.null(&["active"]),
        Patch::Value(a) => u.active = Some(a),
    }
    errors.into_result().map_err(ApiError::Validation)?;
    let w = webhooks::update(&st.db, project, id, &u)
        .await
        .or_not_found(not_found(&raw))?;
    tracing::info!(webhook.id = %id, active = w.active, "webhook updated");
    Ok(Json(w.to_wire()))
}

/// Rotate a webhook's signing secret
///
/// A new signing secret, returned once. The old one stops verifying at once: every later
/// attempt, retries included, is signed with the new one.
#[utoipa::path(post, path = "/api/webhooks/{webhook_id}/rotate-secret", operation_id = "rotate_webhook_secret", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id")),
    responses((status = 200, body = WebhookCreated), (status = 404, description = "No such webhook")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw))]
pub async fn rotate_secret(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<Json<WebhookCreated>> {
    let id = webhook_id(&raw)?;
    let (secret, sealed) = st.webhooks.new_secret(id)?;
    let w = webhooks::set_secret(&st.db, project, id, &sealed)
        .await
        .or_not_found(not_found(&raw))?;
    tracing::info!(webhook.id = %id, "webhook secret rotated");
    Ok(Json(WebhookCreated {
        webhook: w.to_wire(),
        secret,
    }))
}

/// Delete a webhook
///
/// Deletes a subscription with its deliveries and their attempt log.
#[utoipa::path(delete, path = "/api/webhooks/{webhook_id}", operation_id = "delete_webhook", tag = "webhooks",
    params(("webhook_id" = String, Path, description = "The subscription's id")),
    responses((status = 204), (status = 404, description = "No such webhook")))]
#[tracing::instrument(skip_all, fields(webhook.id = %raw))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<StatusCode> {
    let id = webhook_id(&raw)?;
    webhooks::delete(&st.db, project, id)
        .await
        .or_not_found(not_found(&raw))?;
    tracing::info!(webhook.id = %id, "webhook deleted");
    Ok(StatusCode::NO_CONTENT)
}
