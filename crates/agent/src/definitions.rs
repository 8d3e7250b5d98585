//! Saving agent definitions: the rules that span rows, checked in the write's own
//! transaction. Subagents must name other agents of the project, and a `skills_source` deploy
//! key must be one of the project's, held `for share` until the write commits so that a
//! concurrent key delete either sees the agent or happens first. Edits use the optimistic
//! lock: a stale `version` is a 409 and changes nothing. A default environment must be one of
//! the project's, held `for share` the same way.

use sandbox_agents_credentials::git_keys::hold_referenced_key;
use sandbox_agents_domain::agent::{AgentPatch, AgentRecord, AgentRef, AgentSpec};
use sandbox_agents_domain::{FieldError, Patch, ProjectId, Slug};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::environments::{self, EnvironmentRef};
use sandbox_agents_store::{agents, Db};
use serde_json::Value;

/// Creates an agent at version 1.
pub async fn create(
    db: &Db,
    project: ProjectId,
    slug: &Slug,
    mut spec: AgentSpec,
) -> Result<AgentRecord> {
    check_subagents(db, project, slug, &spec).await?;
    let mut tx = db.begin().await?;
    hold_referenced_key(&mut tx, project, &mut spec).await?;
    hold_environment(&mut tx, project, &mut spec).await?;
    let agent = agents::insert(&mut *tx, project, slug, &spec).await?;
    tx.commit().await?;
    tracing::info!(agent.id = %agent.id, agent.slug = %agent.slug, "agent created");
    Ok(agent)
}

/// Applies `patch` to the agent `r` names, under the optimistic lock. The store's
/// `NotFound` when there is no such agent.
pub async fn update(
    db: &Db,
    project: ProjectId,
    r: &AgentRef,
    patch: AgentPatch,
) -> Result<AgentRecord> {
    let mut tx = db.begin().await?;
    let current = agents::get(&mut *tx, project, r).await?;
    if patch.version != current.version {
        return Err(agents::stale(patch.version, current.version).into());
    }
    let expected = patch.version;
    // Only a patch that sets skills_source can add a reference: an unrelated edit leaves a
    // stored one as it is (already visible to deletes), whatever its age.
    let sets_skills = matches!(patch.skills_source, Patch::Value(_));
    let sets_environment = matches!(patch.environment_id, Patch::Value(_));
    let mut spec = current.spec.clone();
    patch
        .apply(&current.slug, &mut spec)
        .map_err(ServiceError::Validation)?;
    check_subagents(db, project, &current.slug, &spec).await?;
    if sets_skills {
        hold_referenced_key(&mut tx, project, &mut spec).await?;
    }
    if sets_environment {
        hold_environment(&mut tx, project, &mut spec).await?;
    }
    let updated = agents::update(&mut tx, project, current.id, expected, &spec).await?;
    tx.commit().await?;
    tracing::info!(agent.id = %updated.id, version = updated.version, "agent updated");
    Ok(updated)
}

/// The default environment must be one of the project's (422 otherwise); it is stored by
/// id whether it was named by id or name, and held `for share` until the write commits so
/// that a concurrent delete either sees the agent or happens first.
async fn hold_environment(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    spec: &mut AgentSpec,
) -> Result<()> {
    let Some(raw) = spec.environment_id.clone() else {
        return Ok(());
    };
    match environments::hold(tx, project, &EnvironmentRef::parse(&raw)).await {
        Ok(env) => {
            spec.environment_id = Some(env.id.to_string());
            Ok(())
        }
        Err(sandbox_agents_store::Error::NotFound) => Err(ServiceError::field(
            &["environment_id"],
            format!("there is no environment '{raw}' in this project"),
            Value::from(raw),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Subagents name other agents of the same project by slug; an unknown one is a 422.
async fn check_subagents(db: &Db, project: ProjectId, slug: &Slug, spec: &AgentSpec) -> Result<()> {
    if spec.subagents.is_empty() {
        return Ok(());
    }
    let wanted: Vec<String> = spec.subagents.iter().map(|s| s.agent.clone()).collect();
    let found = agents::existing_slugs(db, project, &wanted).await?;
    let errors: Vec<FieldError> = spec
        .subagents
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let msg = if s.agent == slug.as_str() {
                "an agent cannot be its own subagent".to_owned()
            } else if !found.contains(&s.agent) {
                format!("there is no agent '{}' in this project", s.agent)
            } else {
                return None;
            };
            Some(FieldError {
                kind: "value_error".into(),
                loc: vec!["body".into(), "subagents".into(), i.into(), "agent".into()],
                msg,
                input: Value::from(s.agent.as_str()),
            })
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ServiceError::Validation(errors))
    }
}
