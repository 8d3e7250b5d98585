//! Saving agent definitions: the rules that span rows, checked in the write's own
//! transaction. Subagents must name other agents of the project and close no cycle (checked
//! under the project's subagent-graph lock, so concurrent edits cannot each close half of
//! one), and a `skills_source` deploy
//! key must be one of the project's, held `for share` until the write commits so that a
//! concurrent key delete either sees the agent or happens first. Edits use the optimistic
//! lock: a stale `version` is a 409 and changes nothing. A default environment must be one of
//! the project's, held `for share` the same way. Every accepted definition is a version
//! (`store::agents` writes it with the definition); a restore is an edit whose fields are an
//! old version's, checked like any other.

use sandbox_agents_credentials::git_keys::hold_referenced_key;
use sandbox_agents_domain::agent::{AgentPatch, AgentRecord, AgentRef, AgentSpec};
use sandbox_agents_domain::agent_version::ChangedBy;
use sandbox_agents_domain::{FieldError, Patch, ProjectId, Slug};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::environments::{self, EnvironmentRef};
use sandbox_agents_store::{agents, Db};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Creates an agent at version 1. `runtime_classes`: those the server offers.
pub async fn create(
    db: &Db,
    project: ProjectId,
    slug: &Slug,
    mut spec: AgentSpec,
    runtime_classes: &[String],
    by: Option<&ChangedBy>,
) -> Result<AgentRecord> {
    check_runtime_class(&spec, runtime_classes)?;
    let mut tx = db.begin().await?;
    check_subagents(&mut tx, project, slug, &spec).await?;
    check_mcp_secrets(&mut tx, project, &spec).await?;
    hold_referenced_key(&mut tx, project, &mut spec).await?;
    hold_environment(&mut tx, project, &mut spec).await?;
    let agent = agents::insert(&mut *tx, project, slug, &spec, by).await?;
    tx.commit().await?;
    tracing::info!(agent.id = %agent.id, agent.slug = %agent.slug, "agent created");
    Ok(agent)
}

/// Applies `patch` to the agent `r` names, under the optimistic lock. The store's
/// `NotFound` when there is no such agent. `runtime_classes`: those the server offers (a
/// stored class the server stopped offering does not block edits of other fields).
pub async fn update(
    db: &Db,
    project: ProjectId,
    r: &AgentRef,
    patch: AgentPatch,
    runtime_classes: &[String],
    by: Option<&ChangedBy>,
) -> Result<AgentRecord> {
    let mut tx = db.begin().await?;
    let current = agents::get(&mut *tx, project, r).await?;
    if patch.version != current.version {
        return Err(agents::stale(patch.version, current.version).into());
    }
    let expected = patch.version;
    // Only a patch that sets skills_source can add a reference: an unrelated edit leaves a
    // stored one as it is (already visible to deletes), whatever its age.
    let sets = Sets {
        skills: matches!(patch.skills_source, Patch::Value(_)),
        environment: matches!(patch.environment_id, Patch::Value(_)),
        runtime_class: matches!(patch.runtime_class, Patch::Value(_)),
    };
    let mut spec = current.spec.clone();
    patch
        .apply(&current.slug, &mut spec)
        .map_err(ServiceError::Validation)?;
    let edit = agents::Edit {
        by,
        restored_from: None,
    };
    let updated = save(
        &mut tx,
        project,
        &current,
        expected,
        spec,
        sets,
        runtime_classes,
        edit,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(agent.id = %updated.id, version = updated.version, "agent updated");
    Ok(updated)
}

/// Makes version `version`'s fields the agent's again, as a new version, under the
/// optimistic lock (`expected`). Checked as an edit that sets every field: its subagents,
/// deploy key, environment and runtime class must still be valid now. The store's
/// `NotFound` when the agent has no such version.
#[allow(clippy::too_many_arguments)]
pub async fn restore(
    db: &Db,
    project: ProjectId,
    r: &AgentRef,
    version: i64,
    expected: i64,
    runtime_classes: &[String],
    by: Option<&ChangedBy>,
) -> Result<AgentRecord> {
    let mut tx = db.begin().await?;
    let current = agents::get(&mut *tx, project, r).await?;
    let (_, spec) = agents::version(&mut *tx, current.id, version).await?;
    if expected != current.version {
        return Err(agents::stale(expected, current.version).into());
    }
    let sets = Sets {
        skills: true,
        environment: true,
        runtime_class: true,
    };
    let edit = agents::Edit {
        by,
        restored_from: Some(version),
    };
    let restored = save(
        &mut tx,
        project,
        &current,
        expected,
        spec,
        sets,
        runtime_classes,
        edit,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(agent.id = %restored.id, version = restored.version, restored_from = version, "agent version restored");
    Ok(restored)
}

/// Which references an edit sets, and so must check now (a stored one is left as it is).
#[derive(Clone, Copy)]
struct Sets {
    skills: bool,
    environment: bool,
    runtime_class: bool,
}

/// Checks `spec` as the edit `sets` says and writes it as the version after `expected`.
#[allow(clippy::too_many_arguments)]
async fn save(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    current: &AgentRecord,
    expected: i64,
    mut spec: AgentSpec,
    sets: Sets,
    runtime_classes: &[String],
    edit: agents::Edit<'_>,
) -> Result<AgentRecord> {
    if sets.runtime_class {
        check_runtime_class(&spec, runtime_classes)?;
    }
    check_subagents(tx, project, &current.slug, &spec).await?;
    check_mcp_secrets(tx, project, &spec).await?;
    if sets.skills {
        hold_referenced_key(tx, project, &mut spec).await?;
    }
    if sets.environment {
        hold_environment(tx, project, &mut spec).await?;
    }
    Ok(agents::update(tx, project, current.id, expected, &spec, edit).await?)
}

/// The secrets MCP servers' headers read must exist (422 naming the first missing one); they
/// are held `for share` until the write commits, as bound secrets are at session create.
async fn check_mcp_secrets(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    spec: &AgentSpec,
) -> Result<()> {
    let wanted: Vec<(usize, String)> = spec
        .mcp_servers
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.secrets().map(move |n| (i, n.to_owned())))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = wanted.iter().map(|(_, n)| n.clone()).collect();
    let found = sandbox_agents_store::secrets::sealed_by_names(tx, project, &names).await?;
    if let Some((i, name)) = wanted
        .iter()
        .find(|(_, n)| !found.iter().any(|s| &s.name == n))
    {
        return Err(ServiceError::field(
            &["mcp_servers", &i.to_string(), "headers"],
            format!("there is no secret named '{name}' in this project; create it first"),
            Value::from(name.as_str()),
        ));
    }
    Ok(())
}

/// The runtime class must be one the server offers (422 otherwise).
fn check_runtime_class(spec: &AgentSpec, offered: &[String]) -> Result<()> {
    let Some(class) = &spec.runtime_class else {
        return Ok(());
    };
    match sandbox_agents_domain::runtime_class::not_offered(class, offered) {
        None => Ok(()),
        Some(why) => Err(ServiceError::field(
            &["runtime_class"],
            why,
            Value::from(class.as_str()),
        )),
    }
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

/// Subagents name other agents of the same project by slug (an unknown one is a 422), and
/// the project's subagents form no cycle (a 422 that names it). The graph's lock is held
/// until the write commits, so two concurrent edits cannot each close half of a cycle.
async fn check_subagents(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    slug: &Slug,
    spec: &AgentSpec,
) -> Result<()> {
    if spec.subagents.is_empty() {
        return Ok(());
    }
    agents::lock_subagent_graph(tx, project).await?;
    let wanted: Vec<String> = spec.subagents.iter().map(|s| s.agent.clone()).collect();
    let found = agents::existing_slugs(&mut *tx, project, &wanted).await?;
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
            Some(subagent_error(i, msg, &s.agent))
        })
        .collect();
    if !errors.is_empty() {
        return Err(ServiceError::Validation(errors));
    }
    let mut graph: HashMap<String, Vec<String>> = agents::heads(&mut *tx, project)
        .await?
        .into_iter()
        .map(|h| (h.slug, h.subagents))
        .collect();
    graph.insert(slug.to_string(), wanted);
    if let Some(cycle) = cycle_through(&graph, slug.as_str()) {
        let first = &cycle[1];
        let i = spec
            .subagents
            .iter()
            .position(|s| &s.agent == first)
            .unwrap_or(0);
        return Err(ServiceError::Validation(vec![subagent_error(
            i,
            format!(
                "subagents may not form a cycle: {}",
                cycle.join(" \u{2192} ")
            ),
            first,
        )]));
    }
    Ok(())
}

fn subagent_error(i: usize, msg: String, agent: &str) -> FieldError {
    FieldError {
        kind: "value_error".into(),
        loc: vec!["body".into(), "subagents".into(), i.into(), "agent".into()],
        msg,
        input: Value::from(agent),
    }
}

/// A path `start → … → start` in `graph`, if there is one (depth first, each agent visited
/// once).
fn cycle_through(graph: &HashMap<String, Vec<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &HashMap<String, Vec<String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut HashSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    let mut seen = HashSet::new();
    walk(graph, start, start, &mut path, &mut seen).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::cycle_through;
    use std::collections::HashMap;

    fn graph(edges: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(a, bs)| (a.to_string(), bs.iter().map(|b| b.to_string()).collect()))
            .collect()
    }

    #[test]
    fn finds_the_cycle_through_the_edited_agent_only() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(cycle_through(&g, "a").unwrap(), ["a", "b", "c", "a"]);
        assert_eq!(cycle_through(&g, "d"), None);
        let dag = graph(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(cycle_through(&dag, "a"), None);
    }
}
