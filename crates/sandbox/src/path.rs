//! Workspace paths: every path a caller names is relative to the workspace and must stay in
//! it. Lexical checks happen here, before anything touches the sandbox; symlinks are resolved
//! inside the sandbox by the caller (see `resolve_in_sandbox`), because only there do they
//! mean anything.

use crate::WORKDIR;

/// A workspace-relative path that does not leave the workspace lexically: no absolute path,
/// no `..`, no NUL. `.` and empty mean the workspace itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspacePath {
    /// Normalised: components joined by `/`, without `.` or empty parts; empty = the root.
    rel: String,
}

impl WorkspacePath {
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.contains('\0') {
            return Err("the path contains a NUL byte".into());
        }
        if raw.starts_with('/') {
            return Err(format!(
                "'{raw}' is absolute; paths are relative to the workspace"
            ));
        }
        let mut parts = Vec::new();
        for c in raw.split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    return Err(format!(
                        "'{raw}' leaves the workspace ('..' is not allowed)"
                    ))
                }
                c => parts.push(c),
            }
        }
        Ok(Self {
            rel: parts.join("/"),
        })
    }

    /// The workspace itself?
    pub fn is_root(&self) -> bool {
        self.rel.is_empty()
    }

    /// Relative form (`""` for the root).
    pub fn relative(&self) -> &str {
        &self.rel
    }

    /// Absolute form inside the sandbox.
    pub fn absolute(&self) -> String {
        if self.rel.is_empty() {
            WORKDIR.to_owned()
        } else {
            format!("{WORKDIR}/{}", self.rel)
        }
    }

    /// The last component (`None` for the root).
    pub fn file_name(&self) -> Option<&str> {
        self.rel.rsplit('/').next().filter(|s| !s.is_empty())
    }

    /// The parent directory (the root's parent is the root).
    pub fn parent(&self) -> WorkspacePath {
        match self.rel.rsplit_once('/') {
            Some((p, _)) => Self { rel: p.to_owned() },
            None => Self { rel: String::new() },
        }
    }

    pub fn join(&self, name: &str) -> Result<WorkspacePath, String> {
        Self::parse(&if self.rel.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.rel)
        })
    }
}

/// The directories above a relative `path`, outermost first (`a`, `a/b` for `a/b/c`): the
/// entries an archive needs before `path` so that the backend creates none of them itself
/// (as root, on Docker).
pub fn parent_dirs(path: &std::path::Path) -> Vec<&std::path::Path> {
    let mut parents: Vec<&std::path::Path> = path
        .ancestors()
        .skip(1)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    parents.reverse();
    parents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_workspace() {
        for bad in ["/etc/passwd", "..", "a/../..", "a/../b", "x\0y"] {
            assert!(WorkspacePath::parse(bad).is_err(), "{bad}");
        }
        assert!(WorkspacePath::parse(".").unwrap().is_root());
        assert!(WorkspacePath::parse("").unwrap().is_root());
        let p = WorkspacePath::parse("./out//report.md").unwrap();
        assert_eq!(p.relative(), "out/report.md");
        assert_eq!(p.absolute(), "/workspace/out/report.md");
        assert_eq!(p.file_name(), Some("report.md"));
        assert_eq!(p.parent().relative(), "out");
    }
}
