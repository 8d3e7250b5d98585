//! The control plane's handlers: each reads its request as the SDKs send it, calls one
//! method of the `e2b` service, and answers with the status the SDKs expect (a create is a
//! 201: they parse no other). Refusals become E2B's shape in `errors.rs`.

use crate::error::{ApiError, ApiResult};
use crate::project::Project;
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sandbox_agents_domain::e2b::{ConnectSandbox, NewSandbox, SandboxState, SandboxTimeout};
use sandbox_agents_domain::SessionId;
use sandbox_agents_e2b::ListQuery;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A JSON body, or the default when there is none (pause and connect may send nothing).
fn body<T: DeserializeOwned + Default>(bytes: &Bytes) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest(format!("the body: {e}")))
}

/// A sandbox id: one of our session ids; anything else is no sandbox (404).
fn sandbox(raw: &str) -> ApiResult<SessionId> {
    uuid::Uuid::try_parse(raw)
        .map(SessionId)
        .map_err(|_| ApiError::NotFound(format!("sandbox {raw} not found")))
}

pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Response)> {
    let req: NewSandbox = body(&bytes)?;
    let created = st.e2b.create(project, req).await?;
    Ok((StatusCode::CREATED, Json(created).into_response()))
}

pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let detail = st.e2b.get(project, sandbox(&id)?).await?;
    Ok(Json(detail).into_response())
}

/// `GET /v2/sandboxes?metadata=…&state=running,paused&nextToken=…&limit=…`: a JSON array,
/// and `x-next-token` when another page follows. `metadata` is a query string of its own
/// (`k=v&k2=v2`, each part percent-encoded) sent as one value.
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    uri: Uri,
) -> ApiResult<Response> {
    let mut q = ListQuery::default();
    for (name, value) in form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match name.as_ref() {
            "metadata" => {
                // The SDKs percent-encode each key and value, join them as a query string,
                // and send that as one (encoded) value: decoded three times in all.
                let decode = |s: &str| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8_lossy()
                        .into_owned()
                };
                for (k, v) in form_urlencoded::parse(value.as_bytes()) {
                    q.metadata.insert(decode(&k), Value::String(decode(&v)));
                }
            }
            "state" => {
                for s in value.split(',').filter(|s| !s.is_empty()) {
                    q.states.push(SandboxState::parse(s).ok_or_else(|| {
                        ApiError::BadRequest(format!(
                            "state is running or paused (comma-separated), not '{s}'"
                        ))
                    })?);
                }
            }
            "nextToken" => q.next_token = Some(value.into_owned()).filter(|t| !t.is_empty()),
            "limit" => {
                q.limit = Some(value.parse().map_err(|_| {
                    ApiError::BadRequest(format!("limit is a number, not '{value}'"))
                })?)
            }
            _ => {}
        }
    }
    let page = st.e2b.list(project, q).await?;
    let mut headers = HeaderMap::new();
    if let Some(token) = page.next_token {
        headers.insert(
            "x-next-token",
            HeaderValue::from_str(&token).map_err(|e| ApiError::Internal(e.into()))?,
        );
    }
    Ok((headers, Json(page.sandboxes)).into_response())
}

pub async fn kill(
    State(st): State<AppState>,
    Project(project): Project,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    st.e2b.kill(project, sandbox(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn set_timeout(
    State(st): State<AppState>,
    Project(project): Project,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ApiResult<StatusCode> {
    let id = sandbox(&id)?;
    let req: SandboxTimeout = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("the body: {e}")))?;
    st.e2b.set_timeout(project, id, req.timeout).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Our stop; 409 when paused already (the SDKs then answer false).
pub async fn pause(
    State(st): State<AppState>,
    Project(project): Project,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    st.e2b.pause(project, sandbox(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// 201 when it resumed a paused sandbox, 200 when it was running.
pub async fn connect(
    State(st): State<AppState>,
    Project(project): Project,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Response)> {
    let req: ConnectSandbox = body(&bytes)?;
    let (resumed, created) = st.e2b.connect(project, sandbox(&id)?, req, false).await?;
    let status = if resumed {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(created).into_response()))
}

/// The older resume: a connect that answers 201, and 409 when the sandbox runs already.
pub async fn resume(
    State(st): State<AppState>,
    Project(project): Project,
    Path(id): Path<String>,
    bytes: Bytes,
) -> ApiResult<(StatusCode, Response)> {
    let req: Map<String, Value> = body(&bytes)?;
    let timeout = req.get("timeout").and_then(Value::as_i64);
    let id = sandbox(&id)?;
    let (_, created) = st
        .e2b
        .connect(project, id, ConnectSandbox { timeout }, true)
        .await?;
    Ok((StatusCode::CREATED, Json(created).into_response()))
}
