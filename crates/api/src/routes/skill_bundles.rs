//! `/api/skill-bundles`: named skills trees of the project that CI pushes to. A push is a
//! multipart `file` (gzip-compressed or plain tar, told apart by content), checked whole
//! before anything is stored; see `sandbox_agents_skills::Bundles`.

use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::multipart::file_part;
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::bundle::{
    SkillBundle, SkillBundleCreate, SkillBundleVersion, MAX_ARCHIVE_BYTES,
};
use utoipa::ToSchema;

/// The largest push request accepted: the archive plus room for the multipart framing.
pub const PUSH_BODY_LIMIT: u64 = MAX_ARCHIVE_BYTES + 1024 * 1024;

/// The multipart form of a push: one part, `file`, the archive.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct PushForm {
    /// The archive: a tar or a gzip-compressed tar (detected by content, whatever the
    /// filename), at most 200 MiB and 50,000 members.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// List skill bundles
///
/// The project's bundles, by slug.
#[utoipa::path(get, path = "/api/skill-bundles", operation_id = "list_skill_bundles", tag = "skill-bundles",
    responses((status = 200, body = Vec<SkillBundle>)))]
#[tracing::instrument(skip_all)]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
) -> ApiResult<Json<Vec<SkillBundle>>> {
    Ok(Json(st.bundles.list(project).await?))
}

/// Create a skill bundle
///
/// Registers the name; `latest_version` stays null until the first push. A slug taken in the
/// project is a 409.
#[utoipa::path(post, path = "/api/skill-bundles", operation_id = "create_skill_bundle", tag = "skill-bundles",
    request_body = SkillBundleCreate,
    responses((status = 201, body = SkillBundle), (status = 409, description = "The slug is taken"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    ApiJson(body): ApiJson<SkillBundleCreate>,
) -> ApiResult<(StatusCode, Json<SkillBundle>)> {
    Ok((
        StatusCode::CREATED,
        Json(st.bundles.create(project, &body).await?),
    ))
}

/// Get a skill bundle
#[utoipa::path(get, path = "/api/skill-bundles/{slug}", operation_id = "get_skill_bundle", tag = "skill-bundles",
    params(("slug" = String, Path, description = "The bundle's slug (or id)")),
    responses((status = 200, body = SkillBundle), (status = 404, description = "No such bundle")))]
#[tracing::instrument(skip_all, fields(bundle.slug = %slug))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(slug): Path<String>,
) -> ApiResult<Json<SkillBundle>> {
    Ok(Json(st.bundles.get(project, &slug).await?))
}

/// Delete a skill bundle
///
/// Deletes the bundle and every version. A 409 while an agent's `skills_source` names it
/// (archived agents included), naming the agents.
#[utoipa::path(delete, path = "/api/skill-bundles/{slug}", operation_id = "delete_skill_bundle", tag = "skill-bundles",
    params(("slug" = String, Path, description = "The bundle's slug (or id)")),
    responses((status = 204), (status = 404, description = "No such bundle"),
              (status = 409, description = "An agent's skills_source names the bundle")))]
#[tracing::instrument(skip_all, fields(bundle.slug = %slug))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path(slug): Path<String>,
) -> ApiResult<StatusCode> {
    st.bundles.delete(project, &slug).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List a bundle's versions
///
/// The versions not retired, newest first.
#[utoipa::path(get, path = "/api/skill-bundles/{slug}/versions", operation_id = "list_skill_bundle_versions", tag = "skill-bundles",
    params(("slug" = String, Path, description = "The bundle's slug (or id)")),
    responses((status = 200, body = Vec<SkillBundleVersion>), (status = 404, description = "No such bundle")))]
#[tracing::instrument(skip_all, fields(bundle.slug = %slug))]
pub async fn versions(
    State(st): State<AppState>,
    Project(project): Project,
    Path(slug): Path<String>,
) -> ApiResult<Json<Vec<SkillBundleVersion>>> {
    Ok(Json(st.bundles.versions(project, &slug).await?))
}

/// Push a bundle version
///
/// Uploads a tree as the bundle's next version and makes it the latest. The whole archive
/// is checked before anything is stored; a refusal (400, naming the member) uses no version
/// number. Refused: absolute names, `..`, any `.git` component, symbolic and hard links,
/// devices, FIFOs, zip archives, empty archives. `digest` is the sha256 of the uploaded bytes.
#[utoipa::path(post, path = "/api/skill-bundles/{slug}/versions", operation_id = "push_skill_bundle_version", tag = "skill-bundles",
    params(("slug" = String, Path, description = "The bundle's slug (or id)")),
    request_body(content = PushForm, content_type = "multipart/form-data",
                 description = "Exactly one part, `file`: the archive"),
    responses((status = 201, body = SkillBundleVersion),
              (status = 400, description = "The archive is refused; `detail` names the member and the rule"),
              (status = 404, description = "No such bundle"),
              (status = 413, description = "The archive is larger than 200 MiB"),
              (status = 422, description = "No `file` part")))]
#[tracing::instrument(skip_all, fields(bundle.slug = %slug))]
pub async fn push(
    State(st): State<AppState>,
    Project(project): Project,
    Path(slug): Path<String>,
    req: Request,
) -> ApiResult<(StatusCode, Json<SkillBundleVersion>)> {
    // The bundle must exist before a byte of the archive is read.
    st.bundles.get(project, &slug).await?;
    let part = file_part(req, PUSH_BODY_LIMIT, MAX_ARCHIVE_BYTES, too_large).await?;
    let result = st
        .bundles
        .push(project, &slug, part.data)
        .await
        .map_err(ApiError::from);
    let version = part.overflow.or_too_large(result, too_large)?;
    Ok((StatusCode::CREATED, Json(version)))
}

/// Retire a bundle version
///
/// The version is no longer listed or booted; its number is never issued again, and
/// `latest_version` moves to the highest version left (or null). An agent pinned to it
/// fails at boot saying so.
#[utoipa::path(delete, path = "/api/skill-bundles/{slug}/versions/{version}", operation_id = "delete_skill_bundle_version", tag = "skill-bundles",
    params(("slug" = String, Path, description = "The bundle's slug (or id)"),
           ("version" = i32, Path, description = "The version's number", minimum = 1)),
    responses((status = 204), (status = 404, description = "No such bundle, or no such version")))]
#[tracing::instrument(skip_all, fields(bundle.slug = %slug, version = %version))]
pub async fn retire(
    State(st): State<AppState>,
    Project(project): Project,
    Path((slug, version)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let number = version
        .parse::<i32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            ApiError::NotFound(format!("skill bundle '{slug}' has no version '{version}'"))
        })?;
    st.bundles.retire(project, &slug, number).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn too_large() -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the archive is too large: skill bundles of at most {} MiB are accepted",
        MAX_ARCHIVE_BYTES / (1024 * 1024)
    ))
}
