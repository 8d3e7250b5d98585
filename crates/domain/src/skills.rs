//! The skills a session's sandbox was given at boot: the index built from the agent's
//! `skills_source` (every folder holding a `SKILL.md`), where each skill lives in the
//! workspace, and what the model is told about them. The lifecycle writes it when a boot
//! stages the source; the run loop reads it to announce skills and to answer `load_skill`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where skills land in the workspace: `.agents/<skill>/`, the convention of the OpenAI
/// Agents SDK's sandbox skills.
pub const SKILLS_DIR: &str = ".agents";

/// The description a skill gets when its `SKILL.md` has none.
pub const NO_DESCRIPTION: &str = "No description provided.";

/// The most of a `SKILL.md` read for its front matter.
pub const MAX_SKILL_MD_BYTES: usize = 64 * 1024;

/// The most of a workspace tree's docs file appended to the instructions.
pub const MAX_DOCS_BYTES: usize = 32 * 1024;

/// The name of the tool that stages a skill on demand.
pub const LOAD_SKILL_TOOL: &str = "load_skill";

/// One skill of the index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SkillEntry {
    /// From the front matter's `name`; the folder's name when absent.
    pub name: String,
    /// From the front matter's `description`; [`NO_DESCRIPTION`] when absent.
    pub description: String,
    /// The folder in the source tree, relative to the skills folder (`subpath`); `""` when
    /// the skills folder is itself the skill.
    pub source: String,
    /// Where the skill is (or, for a lazy source, will be) in the workspace, relative to its
    /// root, e.g. `.agents/pdf`.
    pub path: String,
}

/// What a boot staged of the agent's skills source, stored on the session until the next boot
/// replaces it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionSkills {
    /// Sorted by `path`.
    pub skills: Vec<SkillEntry>,
    /// Skills are staged when the model loads them (`load_skill`), not at boot.
    pub lazy: bool,
    /// The agent has the `skills` capability: the model is told about the skills.
    pub announced: bool,
    /// Where the skills came from, for people (`skill bundle 'tools' version 3`).
    #[serde(default)]
    pub origin: String,
    /// The skills folder of the staged tree in the sandbox (absolute), which `load_skill`
    /// copies from: fixed at boot, whatever later edits of the agent say.
    #[serde(default)]
    pub skills_dir: String,
    /// Appended to the instructions (a `workspace_source`'s docs file and instructions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_docs: Option<String>,
}

/// The result of looking a skill up by the name the model gave.
pub enum Lookup<'a> {
    Found(&'a SkillEntry),
    Unknown,
    Ambiguous(Vec<&'a SkillEntry>),
}

impl SessionSkills {
    /// Whether the model gets `load_skill`: skills announced and staged on demand.
    pub fn offers_load_skill(&self) -> bool {
        self.announced && self.lazy && !self.skills.is_empty()
    }

    /// The skill `name` means: its front-matter name, its folder (relative to the skills
    /// folder) or its workspace path. Exact matches on the name win; otherwise any one match.
    pub fn lookup(&self, name: &str) -> Lookup<'_> {
        let name = name.trim().trim_end_matches('/');
        let by_name: Vec<&SkillEntry> = self.skills.iter().filter(|s| s.name == name).collect();
        let found = if by_name.is_empty() {
            self.skills
                .iter()
                .filter(|s| s.source == name || s.path == name || folder(&s.source) == name)
                .collect()
        } else {
            by_name
        };
        match found.as_slice() {
            [] => Lookup::Unknown,
            [one] => Lookup::Found(one),
            _ => Lookup::Ambiguous(found),
        }
    }

    /// The section of the system prompt that tells the model about its skills; `None` when
    /// they are not announced or there are none.
    pub fn prompt_section(&self) -> Option<String> {
        if !self.announced || self.skills.is_empty() {
            return None;
        }
        let mut s = String::from(
            "## Skills\n\nSkills are folders of instructions, scripts and resources for particular tasks, in your workspace. Each one has a SKILL.md that says when and how to use it.\n\nAvailable skills:\n",
        );
        for k in &self.skills {
            s.push_str(&format!(
                "- {}: {} (file: {}/SKILL.md)\n",
                k.name, k.description, k.path
            ));
        }
        s.push_str("\nHow to use skills:\n");
        if self.lazy {
            s.push_str(&format!(
                "- When a task matches a skill's description, call `{LOAD_SKILL_TOOL}` with its name first: that puts its folder in place.\n"
            ));
        }
        s.push_str(
            "- Then open its SKILL.md and follow it. Read only the other files of the skill that the task needs, not the whole folder.\n- Prefer running the scripts a skill provides over rewriting them.\n- If several skills apply, use each for its part; if none does, work without them.\n",
        );
        Some(s)
    }
}

/// The last component of a `/`-separated path.
fn folder(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `name` and `description` from a `SKILL.md`'s YAML front matter (between a first line
/// `---` and the next `---`). Only plain and quoted scalars and `|`/`>` block scalars are
/// read, which is what skill files use; anything else is ignored rather than refused, since
/// a skill with odd front matter still works as a folder of files.
pub fn front_matter(text: &str) -> (Option<String>, Option<String>) {
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return (None, None);
    }
    let body: Vec<&str> = lines.take_while(|l| l.trim_end() != "---").collect();
    let (mut name, mut description) = (None, None);
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let parsed = if value.starts_with('|') || value.starts_with('>') {
            let folded = value.starts_with('>');
            let mut parts = Vec::new();
            while i < body.len() && (body[i].starts_with([' ', '\t']) || body[i].trim().is_empty())
            {
                parts.push(body[i].trim());
                i += 1;
            }
            let joined = parts.join(if folded { " " } else { "\n" });
            joined.trim().to_owned()
        } else {
            // A plain scalar may go on over indented lines, folded into one.
            let mut v = value.to_owned();
            while i < body.len() && body[i].starts_with([' ', '\t']) && !body[i].trim().is_empty() {
                v.push(' ');
                v.push_str(body[i].trim());
                i += 1;
            }
            unquote(&v)
        };
        let parsed = (!parsed.is_empty()).then_some(parsed);
        match key.trim() {
            "name" => name = parsed,
            "description" => description = parsed,
            _ => {}
        }
    }
    (name, description)
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            let inner = &v[1..v.len() - 1];
            return if q == '\'' {
                inner.replace("''", "'")
            } else {
                inner.replace("\\\"", "\"").replace("\\n", "\n")
            };
        }
    }
    // A comment after a plain scalar.
    match v.find(" #") {
        Some(i) => v[..i].trim_end().to_owned(),
        None => v.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_gives_name_and_description() {
        let md =
            "---\nname: pdf\ndescription: \"Fill PDF forms: any kind\"\nlicense: MIT\n---\n# PDF\n";
        assert_eq!(
            front_matter(md),
            (Some("pdf".into()), Some("Fill PDF forms: any kind".into()))
        );
        let block =
            "---\nname: 'it''s'\ndescription: >\n  Folded over\n  two lines.\nother: x\n---\n";
        assert_eq!(
            front_matter(block),
            (Some("it's".into()), Some("Folded over two lines.".into()))
        );
    }

    #[test]
    fn no_front_matter_gives_nothing() {
        assert_eq!(front_matter("# Title\nname: x\n"), (None, None));
        assert_eq!(front_matter("---\nname:\n---\n"), (None, None));
    }

    fn skill(name: &str, source: &str) -> SkillEntry {
        SkillEntry {
            name: name.into(),
            description: NO_DESCRIPTION.into(),
            source: source.into(),
            path: format!(".agents/{source}"),
        }
    }

    #[test]
    fn lookup_prefers_names_and_reports_ambiguity() {
        let s = SessionSkills {
            skills: vec![
                skill("pdf", "docs/pdf"),
                skill("csv", "data/csv"),
                skill("csv", "other/csv"),
            ],
            lazy: true,
            announced: true,
            origin: String::new(),
            skills_dir: String::new(),
            workspace_docs: None,
        };
        assert!(matches!(s.lookup("pdf"), Lookup::Found(k) if k.source == "docs/pdf"));
        assert!(matches!(s.lookup("docs/pdf"), Lookup::Found(_)));
        assert!(matches!(s.lookup("csv"), Lookup::Ambiguous(v) if v.len() == 2));
        assert!(matches!(s.lookup("data/csv"), Lookup::Found(_)));
        assert!(matches!(s.lookup("nope"), Lookup::Unknown));
    }

    #[test]
    fn the_prompt_names_every_skill_and_how_to_load_it() {
        let mut s = SessionSkills {
            skills: vec![skill("pdf", "pdf")],
            lazy: true,
            announced: true,
            origin: String::new(),
            skills_dir: String::new(),
            workspace_docs: None,
        };
        let p = s.prompt_section().unwrap();
        assert!(p.contains("- pdf: No description provided. (file: .agents/pdf/SKILL.md)"));
        assert!(p.contains("load_skill"));
        s.lazy = false;
        assert!(!s.prompt_section().unwrap().contains("load_skill"));
        s.announced = false;
        assert!(s.prompt_section().is_none());
    }
}
