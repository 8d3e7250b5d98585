//! What an agent's skills source resolves to at a boot: the bundle version a `bundle` source
//! means now (`latest` is resolved at every boot; a pinned retired version, or a bundle with
//! nothing pushed, is refused with a reason a person can act on), and the index of the tree
//! it stages ([`index`]): each skill's name and description from its `SKILL.md` front
//! matter, and where it lives in the workspace.

use sandbox_agents_domain::skills::{
    front_matter, SessionSkills, SkillEntry, NO_DESCRIPTION, SKILLS_DIR,
};
use sandbox_agents_domain::tools::BundleVersion;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::bundles::{self, BundleRef};
use sandbox_agents_store::Error as StoreError;
use sandbox_agents_workspace::skills_tree::TreeIndex;
use sqlx::PgPool;

/// A bundle version a boot stages.
#[derive(Clone, Debug)]
pub struct ResolvedBundle {
    pub blob_key: String,
    pub version: i32,
}

/// The version of bundle `slug` that `version` means now. The refusals are the boot's error.
pub async fn resolve_bundle(
    db: &PgPool,
    project: ProjectId,
    slug: &str,
    version: &BundleVersion,
) -> Result<ResolvedBundle> {
    let bundle = bundles::get(db, project, &BundleRef::parse(slug))
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ServiceError::BadRequest(format!(
                "the agent's skills come from skill bundle '{slug}', which does not exist in this project; create it and push a version"
            )),
            e => e.into(),
        })?;
    let number = match version {
        BundleVersion::Pinned(n) => i32::try_from(*n).unwrap_or(i32::MAX),
        BundleVersion::Label(_) => bundle.latest_version.ok_or_else(|| {
            ServiceError::BadRequest(format!(
                "skill bundle '{slug}' has no versions yet; push one (POST /api/skill-bundles/{slug}/versions) before starting sessions"
            ))
        })?,
    };
    let v = bundles::version(db, bundle.id, number)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ServiceError::BadRequest(format!(
                "skill bundle '{slug}' has no version {number}; pin one of its versions or use \"latest\""
            )),
            e => e.into(),
        })?;
    if v.retired_at.is_some() {
        return Err(ServiceError::BadRequest(format!(
            "version {number} of skill bundle '{slug}' was retired; pin another version or use \"latest\""
        )));
    }
    Ok(ResolvedBundle {
        blob_key: v.blob_key,
        version: number,
    })
}

/// How a tree's skills are laid out in the workspace.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The skills folder of the tree (`subpath`), normalised; `None`: its root.
    pub subpath: Option<String>,
    /// With a `workspace_source`, where the whole tree is in the workspace: skills are used
    /// from there. Otherwise each is staged at `.agents/<folder>`.
    pub tree_in_workspace: Option<String>,
    /// The folder name of a skill that is the skills folder itself.
    pub default_name: String,
    pub lazy: bool,
    pub announced: bool,
    pub origin: String,
    pub workspace_docs: Option<String>,
    /// The skills folder of the tree in the sandbox.
    pub skills_dir: String,
}

/// The session's skills: one entry per folder of `tree` holding a `SKILL.md`.
pub fn index(tree: &TreeIndex, layout: Layout) -> SessionSkills {
    let mut skills: Vec<SkillEntry> = tree
        .skills
        .iter()
        .map(|found| {
            let folder = found
                .dir
                .rsplit('/')
                .next()
                .filter(|f| !f.is_empty())
                .unwrap_or(&layout.default_name)
                .to_owned();
            let (name, description) = front_matter(&found.skill_md);
            let path = match &layout.tree_in_workspace {
                Some(root) => join(&[root, layout.subpath.as_deref().unwrap_or(""), &found.dir]),
                None if found.dir.is_empty() => join(&[SKILLS_DIR, &layout.default_name]),
                None => join(&[SKILLS_DIR, &found.dir]),
            };
            SkillEntry {
                name: name.unwrap_or(folder),
                description: description
                    .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
                    .unwrap_or_else(|| NO_DESCRIPTION.to_owned()),
                source: found.dir.clone(),
                path,
            }
        })
        .collect();
    skills.sort_by(|a, b| a.path.cmp(&b.path));
    SessionSkills {
        skills,
        // A tree staged whole is there already; unannounced skills are staged at boot, since
        // nothing would ever load them.
        lazy: layout.lazy && layout.announced && layout.tree_in_workspace.is_none(),
        announced: layout.announced,
        origin: layout.origin,
        workspace_docs: layout.workspace_docs,
        skills_dir: layout.skills_dir,
    }
}

/// Joins path parts with `/`, dropping empty and `.` components.
pub fn join(parts: &[&str]) -> String {
    parts
        .iter()
        .flat_map(|p| p.split('/'))
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox_agents_workspace::skills_tree::FoundSkill;

    fn tree() -> TreeIndex {
        TreeIndex {
            skills: vec![
                FoundSkill {
                    dir: "pdf".into(),
                    skill_md: "---\nname: pdf-forms\ndescription: Fill\n  PDF forms.\n---".into(),
                },
                FoundSkill {
                    dir: "".into(),
                    skill_md: "# no front matter".into(),
                },
            ],
            ..Default::default()
        }
    }

    fn layout() -> Layout {
        Layout {
            subpath: Some("skills".into()),
            tree_in_workspace: None,
            default_name: "tools".into(),
            lazy: true,
            announced: true,
            origin: "skill bundle 'tools' version 1".into(),
            workspace_docs: None,
            skills_dir: "/tmp/t/skills".into(),
        }
    }

    #[test]
    fn skills_are_staged_under_agents_with_their_front_matter() {
        let s = index(&tree(), layout());
        assert!(s.lazy);
        let by_path: Vec<(&str, &str, &str)> = s
            .skills
            .iter()
            .map(|k| (k.path.as_str(), k.name.as_str(), k.description.as_str()))
            .collect();
        assert_eq!(
            by_path,
            [
                (".agents/pdf", "pdf-forms", "Fill PDF forms."),
                (".agents/tools", "tools", NO_DESCRIPTION),
            ]
        );
    }

    #[test]
    fn a_tree_in_the_workspace_is_used_in_place_and_never_lazily() {
        let s = index(
            &tree(),
            Layout {
                tree_in_workspace: Some("pstack".into()),
                ..layout()
            },
        );
        assert!(!s.lazy);
        assert_eq!(s.skills[0].path, "pstack/skills");
        assert_eq!(s.skills[1].path, "pstack/skills/pdf");
    }

    #[test]
    fn unannounced_skills_are_staged_at_boot() {
        let s = index(
            &tree(),
            Layout {
                announced: false,
                ..layout()
            },
        );
        assert!(!s.lazy);
    }
}
