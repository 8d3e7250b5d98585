//! Staging an agent's skills source into a booting sandbox, and loading a skill on demand.
//!
//! A boot puts the source's whole tree at [`TREE_DIR`], outside the workspace (so neither a
//! stop's archive nor a snapshot carries it, and every boot stages the source as it is then:
//! a bundle's `latest` is resolved at each one), indexes it, and then, inside the sandbox as
//! the sandbox user:
//! - with a `workspace_source`, copies the whole tree to its `dest` (when the workspace
//!   starts fresh; a restored workspace keeps the agent's own copy) and creates `ensure_dirs`;
//! - otherwise stages each skill at `.agents/<folder>`: all of them at boot, or, for a lazy
//!   source whose skills are announced, none: the model's `load_skill` copies one when it
//!   needs it. A boot removes the `.agents` copies it is about to manage, and those an
//!   earlier boot made that the new index no longer names, so a skill is "already loaded"
//!   only when this boot loaded it and nothing stale lingers in a restored workspace.
//!
//! The index goes into the row in the transaction that marks the boot running; the run loop
//! reads it for the system prompt and `load_skill`.

use crate::Sessions;
use futures::StreamExt;
use sandbox_agents_domain::agent::{AgentRecord, Capability};
use sandbox_agents_domain::git_source::GitSource;
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_domain::manifest::check_relative_path;
use sandbox_agents_domain::skills::{
    Lookup, SessionSkills, SkillEntry, LOAD_SKILL_TOOL, SKILLS_DIR,
};
use sandbox_agents_domain::tools::{SkillsSource, WorkspaceSource};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::ExecRequest;
use sandbox_agents_skills::source::{index, join, resolve_bundle, Layout};
use sandbox_agents_store::sessions::{self, SessionRecord};
use sandbox_agents_workspace::manifest::Archive;
use sandbox_agents_workspace::skills_tree::{index_dir, read_tree, TreeIndex, TreeOptions};
use sandbox_agents_workspace::stream::{blocking_reader, pipe, PipeWriter, PIPE_GONE};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// Where a boot extracts a source's tree archive (it must exist in every image).
const TREE_PARENT: &str = "/tmp";
/// The tree, under [`TREE_PARENT`].
pub(crate) const TREE_DIR: &str = "/tmp/sandbox-agents-skills/tree";

/// How long the copies inside the sandbox may take.
const STAGE_TIMEOUT: Duration = Duration::from_secs(120);

/// The copy script: its arguments are operations on workspace-relative paths, run in order:
/// `c FROM TO` copies the tree `FROM` (absolute) to `TO`, replacing it; `r TO` removes `TO`;
/// `m TO` creates the directory `TO`; `l FROM TO` is `c` unless `TO/SKILL.md` exists (exit
/// 10). Paths come from checked archive names and are passed as arguments, never spliced.
const STAGE_SCRIPT: &str = r#"cd /workspace || exit 90
while [ $# -gt 0 ]; do
  op=$1; shift
  case "$op" in
    l) [ -e "$2/SKILL.md" ] && exit 10; op=c ;;
  esac
  case "$op" in
    c) [ -d "$1" ] || { echo "$1 is not in the sandbox" >&2; exit 91; }
       rm -rf -- "$2" && mkdir -p -- "$(dirname -- "$2")" && cp -R -- "$1" "$2" || exit 92
       shift 2 ;;
    r) rm -rf -- "$1" || exit 92; shift ;;
    m) mkdir -p -- "$1" || exit 92; shift ;;
    *) echo "unknown operation $op" >&2; exit 93 ;;
  esac
done
"#;

/// A source's `subpath`, checked: relative, inside the tree.
fn subpath(raw: Option<&str>) -> Result<Option<String>> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let trimmed = raw.trim_matches('/');
    if trimmed.is_empty() || trimmed == "." {
        return Ok(None);
    }
    check_relative_path(trimmed)
        .map_err(|r| ServiceError::BadRequest(format!("skills_source.subpath: {r}")))?;
    Ok(Some(join(&[trimmed])))
}

impl Sessions {
    /// Stages the agent's skills source into `sandbox` (see the module's
    /// comment); `None` when the agent has none. `fresh` says the workspace starts empty (no
    /// archive or snapshot restored). A refusal is the boot's error.
    #[tracing::instrument(skip_all, fields(session.id = %s.id))]
    pub(crate) async fn stage_skills(
        &self,
        s: &SessionRecord,
        agent: &AgentRecord,
        sandbox: &str,
        fresh: bool,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<SessionSkills>> {
        let Some(source) = &agent.spec.skills_source else {
            return Ok(None);
        };
        let announced = agent
            .spec
            .capabilities
            .iter()
            .flatten()
            .any(|c| *c == Capability::Skills);
        let ws = agent.spec.workspace_source.as_ref();
        let (tree, layout) = self
            .upload_source(s.project_id, sandbox, source, ws, announced, env)
            .await?;
        let skills = index(&tree, layout);
        let mut ops: Vec<String> = Vec::new();
        // The copies an earlier boot made (a restored workspace holds them) and the new index
        // no longer names: stale skills must not linger in `.agents`.
        let earlier = sessions::skills(&self.inner.db, s.session_id()).await?;
        for old in earlier.iter().flat_map(|e| &e.skills) {
            let managed = old.path.starts_with(&format!("{SKILLS_DIR}/"));
            if managed && !skills.skills.iter().any(|k| k.path == old.path) {
                ops.extend(["r".into(), old.path.clone()]);
            }
        }
        match ws {
            Some(ws) => {
                let dest = join(&[&ws.dest]);
                check_relative_path(&dest)
                    .map_err(|r| ServiceError::BadRequest(format!("workspace_source.dest: {r}")))?;
                if fresh {
                    ops.extend(["c".into(), TREE_DIR.into(), dest.clone()]);
                }
                for d in &ws.ensure_dirs {
                    check_relative_path(d).map_err(|r| {
                        ServiceError::BadRequest(format!("workspace_source.ensure_dirs: {r}"))
                    })?;
                    ops.extend(["m".into(), join(&[d])]);
                }
            }
            None => {
                for k in &skills.skills {
                    if skills.lazy {
                        ops.extend(["r".into(), k.path.clone()]);
                    } else {
                        ops.extend(["c".into(), tree_path(&skills, k), k.path.clone()]);
                    }
                }
            }
        }
        if !ops.is_empty() {
            let out = self.run_stage(sandbox, env_pairs(env), &ops).await?;
            if out.exit_code != 0 {
                return Err(ServiceError::BadRequest(format!(
                    "the skills could not be staged in the workspace: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        tracing::info!(skills = skills.skills.len(), lazy = skills.lazy, origin = %skills.origin, "skills staged");
        Ok(Some(skills))
    }

    /// Puts the source's tree at [`TREE_DIR`] and indexes it; the layout its skills get.
    async fn upload_source(
        &self,
        project: ProjectId,
        sandbox: &str,
        source: &SkillsSource,
        ws: Option<&WorkspaceSource>,
        announced: bool,
        env: &BTreeMap<String, String>,
    ) -> Result<(TreeIndex, Layout)> {
        let st = &self.inner;
        let opts = TreeOptions {
            subpath: subpath(source_subpath(source))?,
            docs_file: ws.map(|w| w.docs_file.clone()),
            ..Default::default()
        };
        let (tree, origin, default_name, lazy) = match source {
            SkillsSource::Bundle {
                bundle,
                version,
                lazy,
                ..
            } => {
                let r = resolve_bundle(&st.db, project, bundle, version).await?;
                let stream = self.blob_stream(&r.blob_key).await?;
                let handle = tokio::runtime::Handle::current();
                let o = opts.clone();
                let tree = self
                    .upload_tree(sandbox, move |a| {
                        read_tree(
                            blocking_reader(stream, handle),
                            &o,
                            Some((a, TREE_NAME_TREE)),
                        )
                    })
                    .await?;
                (
                    tree,
                    format!("skill bundle '{bundle}' version {}", r.version),
                    bundle.clone(),
                    *lazy,
                )
            }
            SkillsSource::LocalDir { src, lazy, .. } => {
                let real = st
                    .settings
                    .manifest
                    .local_source(src)
                    .map_err(|r| ServiceError::BadRequest(format!("skills_source.src: {r}")))?;
                let o = opts.clone();
                let tree = self
                    .upload_tree(sandbox, move |a| {
                        let tree = index_dir(&real, &o)?;
                        a.copy_tree(&real, &real, TREE_NAME_TREE, true)
                            .map_err(|e| e.to_string())?;
                        Ok(tree)
                    })
                    .await?;
                let name = std::path::Path::new(src)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "skill".into());
                (tree, format!("the directory {src}"), name, *lazy)
            }
            SkillsSource::GitRepo {
                repo,
                git_ref,
                host,
                ssh_key_id: None,
                ..
            } => {
                // Cloned inside the sandbox over https, with its network and trust store; the
                // control plane then reads the tree back to index it.
                let src = GitSource::parse(host, repo, git_ref, None).map_err(|r| {
                    ServiceError::BadRequest(format!("skills_source.{}: {}", r.field, r.reason))
                })?;
                self.checkout_at(sandbox, &src, TREE_DIR, "the skills tree", env)
                    .await?;
                let stream = st.backend.get_archive(sandbox, TREE_DIR).await?;
                let stream = stream
                    .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())))
                    .boxed();
                let handle = tokio::runtime::Handle::current();
                let o = TreeOptions {
                    strip: 1,
                    skip_special: true,
                    ..opts.clone()
                };
                let tree = tokio::task::spawn_blocking(move || {
                    read_tree::<std::io::Sink>(blocking_reader(stream, handle), &o, None)
                })
                .await
                .map_err(|e| anyhow::anyhow!("indexing the skills stopped: {e}"))?
                .map_err(ServiceError::BadRequest)?;
                // Git sources have no `lazy` field: on demand, the others' default.
                (tree, src.describe(), repo_name(repo), true)
            }
            SkillsSource::GitRepo {
                repo,
                git_ref,
                host,
                ssh_key_id: Some(key),
                ..
            } => {
                // Cloned by the control plane with the deploy key; the sandbox gets plain
                // files, never the key.
                let key_id = GitKeyId::parse(key).ok_or_else(|| {
                    ServiceError::BadRequest(format!(
                        "skills_source.ssh_key_id '{key}' is not a git key id"
                    ))
                })?;
                let checkout = st
                    .credentials
                    .clone_with_key(project, key_id, host, repo, git_ref)
                    .await?;
                let o = opts.clone();
                let tree = self
                    .upload_tree(sandbox, move |a| {
                        let real = checkout.path();
                        let tree = index_dir(&real, &o)?;
                        a.copy_tree(&real, &real, TREE_NAME_TREE, true)
                            .map_err(|e| e.to_string())?;
                        drop(checkout);
                        Ok(tree)
                    })
                    .await?;
                (
                    tree,
                    format!("{repo} at ref '{git_ref}' from {host}"),
                    repo_name(repo),
                    true,
                )
            }
        };
        let workspace_docs = ws.and_then(|w| workspace_docs(w, tree.docs.as_deref()));
        let layout = Layout {
            skills_dir: format!("{TREE_DIR}/{}", opts.subpath.as_deref().unwrap_or(""))
                .trim_end_matches('/')
                .to_owned(),
            subpath: opts.subpath.clone(),
            tree_in_workspace: ws.map(|w| join(&[&w.dest])),
            default_name,
            lazy,
            announced,
            origin,
            workspace_docs,
        };
        Ok((tree, layout))
    }

    /// Streams the archive `work` writes into the sandbox under [`TREE_PARENT`], replacing
    /// what an earlier boot of a reused sandbox left there; returns `work`'s index. `work`
    /// runs on a blocking thread (the tar reader and writer are synchronous).
    async fn upload_tree<F>(&self, sandbox: &str, work: F) -> Result<TreeIndex>
    where
        F: FnOnce(&mut Archive<PipeWriter>) -> std::result::Result<TreeIndex, String>
            + Send
            + 'static,
    {
        let (writer, stream) = pipe();
        let task = tokio::task::spawn_blocking(move || {
            let mut a = Archive::into_writer(writer);
            a.dir(TREE_NAME_TREE).map_err(|e| e.to_string())?;
            let tree = work(&mut a)?;
            let mut w = a.into_inner().map_err(|e| e.to_string())?;
            w.flush().map_err(|e| e.to_string())?;
            Ok::<_, String>(tree)
        });
        let put = self
            .inner
            .backend
            .put_archive_stream(sandbox, TREE_PARENT, stream);
        let (put, tree) = tokio::join!(put, task);
        let tree = tree.map_err(|e| anyhow::anyhow!("staging the skills stopped: {e}"))?;
        match (put, tree) {
            (Ok(()), Ok(tree)) => Ok(tree),
            // An upload the backend gave up on breaks the writer's pipe: its error is the cause.
            (Err(e), Err(r)) if r.contains(PIPE_GONE) => Err(e.into()),
            // The tree's own refusal (a link, a limit) says more than the cut upload it causes.
            (_, Err(refusal)) => Err(ServiceError::BadRequest(refusal)),
            (Err(e), Ok(_)) => Err(e.into()),
        }
    }

    async fn run_stage(
        &self,
        sandbox: &str,
        env: Vec<(String, String)>,
        ops: &[String],
    ) -> Result<sandbox_agents_sandbox::ExecOutput> {
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            STAGE_SCRIPT.to_owned(),
            "sh".to_owned(),
        ];
        argv.extend(ops.iter().cloned());
        let req = ExecRequest {
            argv,
            workdir: None,
            env,
            timeout: STAGE_TIMEOUT,
            max_output: 64 * 1024,
            stdin: None,
        };
        Ok(self.inner.backend.exec(sandbox, &req).await?)
    }

    /// `load_skill`: stages the skill `name` means at its workspace path, unless this boot
    /// already did. Returns the tool's JSON answer, or the error the model reads.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn load_skill(
        &self,
        project: ProjectId,
        id: SessionId,
        name: &str,
    ) -> std::result::Result<serde_json::Value, String> {
        let (s, sandbox) = self
            .running(project, id)
            .await
            .map_err(|e| format!("error: {e}"))?;
        let skills = sessions::skills(&self.inner.db, id)
            .await
            .map_err(|e| format!("error: {e}"))?
            .ok_or("error: this session has no skills")?;
        let skill = match skills.lookup(name) {
            Lookup::Found(k) => k,
            Lookup::Unknown => {
                let names: Vec<&str> = skills.skills.iter().map(|k| k.name.as_str()).collect();
                return Err(format!(
                    "error: there is no skill named '{name}'; the skills are: {}",
                    names.join(", ")
                ));
            }
            Lookup::Ambiguous(found) => {
                let paths: Vec<&str> = found.iter().map(|k| k.path.as_str()).collect();
                return Err(format!(
                    "error: '{name}' names several skills ({}); call {LOAD_SKILL_TOOL} with one of their folders instead",
                    paths.join(", ")
                ));
            }
        };
        let answer = |status: &str| serde_json::json!({"status": status, "skill_name": skill.name, "path": skill.path});
        if !skills.lazy {
            return Ok(answer("already_loaded"));
        }
        let ops = [
            "l".to_owned(),
            tree_path(&skills, skill),
            skill.path.clone(),
        ];
        let out = self
            .run_stage(&sandbox, crate::exec::sandbox_env(&s), &ops)
            .await
            .map_err(|e| format!("error: {e}"))?;
        match out.exit_code {
            0 => Ok(answer("loaded")),
            10 => Ok(answer("already_loaded")),
            91 => Err(format!(
                "error: the files of skill '{}' are no longer in the sandbox; restarting the session stages them again",
                skill.name
            )),
            _ => Err(format!(
                "error: skill '{}' could not be loaded: {}",
                skill.name,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }
}

/// The tree's folder under [`TREE_PARENT`] as archive members name it (a test checks it
/// agrees with [`TREE_DIR`]).
const TREE_NAME_TREE: &str = "sandbox-agents-skills/tree";

/// Where a skill is in the staged tree, as an absolute path in the sandbox.
fn tree_path(skills: &SessionSkills, k: &SkillEntry) -> String {
    match join(&[&k.source]) {
        rel if rel.is_empty() => skills.skills_dir.clone(),
        rel => format!("{}/{rel}", skills.skills_dir),
    }
}

/// The last component of a repository path, for a skill that is the repository itself.
fn repo_name(repo: &str) -> String {
    repo.trim_end_matches(".git")
        .rsplit('/')
        .next()
        .unwrap_or("skill")
        .to_owned()
}

fn env_pairs(env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn source_subpath(source: &SkillsSource) -> Option<&str> {
    match source {
        SkillsSource::Bundle { subpath, .. }
        | SkillsSource::LocalDir { subpath, .. }
        | SkillsSource::GitRepo { subpath, .. } => subpath.as_deref(),
    }
}

/// What a `workspace_source` adds to the instructions: where the tree is, its docs file and
/// its instructions.
fn workspace_docs(ws: &WorkspaceSource, docs: Option<&str>) -> Option<String> {
    let mut parts = vec![format!(
        "## The workspace tree\n\nThe tree your skills come from is in the workspace at `{}/`.",
        join(&[&ws.dest])
    )];
    if let Some(d) = docs.map(str::trim).filter(|d| !d.is_empty()) {
        parts.push(format!("From its {}:\n\n{d}", ws.docs_file));
    }
    if let Some(i) = ws
        .instructions
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        parts.push(i.to_owned());
    }
    Some(parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_constants_agree() {
        assert_eq!(TREE_DIR, format!("{TREE_PARENT}/{TREE_NAME_TREE}"));
    }

    #[test]
    fn subpaths_stay_inside_the_tree() {
        assert_eq!(
            subpath(Some("/skills/")).unwrap().as_deref(),
            Some("skills")
        );
        assert_eq!(subpath(Some(".")).unwrap(), None);
        assert!(subpath(Some("a/../..")).is_err());
    }
}
