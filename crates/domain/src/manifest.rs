//! The manifest: the files a sandbox starts from.

use crate::git_source::GitSource;
use crate::patch::non_null;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// What the workspace (`/workspace` in the sandbox) holds at boot: `entries` keyed by
/// workspace-relative path, and environment variables for the container. A session's manifest
/// is merged into its agent's: entry by entry (the session's wins per path) and variable by
/// variable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ManifestSpec {
    /// Workspace entries by path. A path is relative to the workspace (no leading `/`), has no
    /// `..` component and no NUL, and names something inside the workspace (not `.` or `""`).
    /// Default `{}`; not null.
    #[serde(default, deserialize_with = "non_null")]
    pub entries: BTreeMap<String, EntrySpec>,
    /// Environment variables of the container, by name (letters, digits and `_`, not starting
    /// with a digit); values are strings. Default `{}`; not null.
    #[serde(default, deserialize_with = "non_null")]
    pub environment: BTreeMap<String, String>,
}

/// One manifest entry, tagged by `kind`: what appears at its path when the sandbox boots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EntrySpec {
    /// A file written into the workspace at boot.
    File {
        /// The file's whole content, as UTF-8 text.
        content: String,
    },
    /// An empty directory, e.g. where the agent is told to put its output.
    Dir {},
    /// A checkout staged into the workspace without its `.git`: a shallow clone of
    /// `https://<host>/<repo>.git` made inside the sandbox at boot (so the repository must be
    /// public); a clone that fails fails the boot, naming the repository and the ref.
    GitRepo {
        /// The repository's path on the host, `owner/name` (more segments allowed, a trailing
        /// `.git` too): segments of letters, digits and `. _ ~ + @ -`, not starting with `-`
        /// or `.`.
        #[schema(
            min_length = 1,
            pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
        )]
        repo: String,
        /// A branch or tag name, or a full 40-hex commit id. Default `main`. No whitespace,
        /// none of `~ ^ : ? * [ \`, no `..` or `@{`, not starting with `-`, `/` or `.`.
        #[serde(rename = "ref", default = "default_ref")]
        #[schema(default = "main")]
        git_ref: String,
        /// The git host, `hostname[:port]`, reached over https. Default `github.com`.
        #[serde(default = "default_host")]
        #[schema(default = "github.com")]
        host: String,
        /// Only this directory of the repository (relative, no `..`, not starting with `-`),
        /// copied alone to the entry's path; null: all of it.
        #[serde(default)]
        subpath: Option<String>,
    },
    /// A directory on the control-plane host, copied in. Refused unless it lies under one of
    /// the server's `--local-dir-roots`.
    LocalDir {
        /// Its absolute path on the control-plane host.
        #[schema(pattern = "^/", min_length = 1)]
        src: String,
    },
    /// A bucket prefix mounted into the workspace. The server fills in the credentials.
    /// Snapshots skip mounted buckets.
    S3Mount {
        /// The bucket's name; not blank.
        #[schema(
            min_length = 1,
            pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
        )]
        bucket: String,
        /// Only keys under this prefix; null: the whole bucket.
        #[serde(default)]
        prefix: Option<String>,
        /// Mount it read-only. Default true.
        #[serde(default = "default_true")]
        #[schema(default = true)]
        read_only: bool,
        /// `read_only: false` is a 422 unless this is true (the contract's rule, kept so that
        /// clients behave the same everywhere; this server never puts a credential in the
        /// sandbox: it writes changes back to the bucket itself). Default false.
        #[serde(default)]
        #[schema(default = false)]
        acknowledge_credential_exposure: bool,
    },
}

pub(crate) fn default_ref() -> String {
    "main".into()
}
pub(crate) fn default_host() -> String {
    "github.com".into()
}
pub(crate) fn default_true() -> bool {
    true
}

/// Checks a workspace-relative path as written in a manifest: relative, no `..`, no empty or
/// `.`-only path, no NUL. Returns the reason when it is refused.
pub fn check_relative_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.trim_matches('/').is_empty() {
        return Err("the path is empty".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "'{path}' is absolute; use a path relative to the workspace"
        ));
    }
    if path.contains('\0') {
        return Err("the path contains a NUL byte".into());
    }
    if path.split('/').any(|c| c == "..") {
        return Err(format!(
            "'{path}' leaves the workspace ('..' is not allowed)"
        ));
    }
    if path.split('/').all(|c| c.is_empty() || c == ".") {
        return Err(format!(
            "'{path}' names the workspace itself, not an entry in it"
        ));
    }
    Ok(())
}

/// [`is_env_name`] as a regular expression, for the OpenAPI document.
pub const ENV_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";

/// Environment variable names: `[A-Za-z_][A-Za-z0-9_]*` ([`ENV_NAME_PATTERN`]).
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ManifestSpec {
    /// Semantic checks that the shape alone does not express. `loc` is where the manifest sits
    /// in the request body.
    pub fn validate(&self, loc: &[&str], v: &mut Violations) {
        for (path, entry) in &self.entries {
            let at = |field: Option<&'static str>| {
                let mut l: Vec<&str> = loc.to_vec();
                l.push("entries");
                l.push(path.as_str());
                if let Some(f) = field {
                    l.push(f);
                }
                l
            };
            if let Err(msg) = check_relative_path(path) {
                v.push("value_error", &at(None), msg, Value::from(path.as_str()));
            }
            match entry {
                EntrySpec::GitRepo { repo, git_ref, host, subpath } => {
                    if let Err(e) = GitSource::parse(host, repo, git_ref, subpath.as_deref()) {
                        let input = match e.field {
                            "host" => host.as_str(),
                            "repo" => repo.as_str(),
                            "ref" => git_ref.as_str(),
                            _ => subpath.as_deref().unwrap_or(""),
                        };
                        v.push("value_error", &at(Some(e.field)), e.reason, Value::from(input));
                    }
                }
                EntrySpec::LocalDir { src } if !src.starts_with('/') => v.push(
                    "value_error",
                    &at(Some("src")),
                    "src must be an absolute path on the control-plane host",
                    Value::from(src.as_str()),
                ),
                EntrySpec::S3Mount { bucket, .. } if bucket.trim().is_empty() => {
                    v.push("value_error", &at(Some("bucket")), "bucket must not be empty", Value::from(""))
                }
                EntrySpec::S3Mount { read_only: false, acknowledge_credential_exposure: false, .. } => v.push(
                    "value_error",
                    &at(Some("acknowledge_credential_exposure")),
                    "a writable s3_mount (read_only: false) needs acknowledge_credential_exposure: true; set it to accept that the agent's changes are written back to the bucket",
                    Value::Bool(false),
                ),
                _ => {}
            }
        }
        for name in self.environment.keys() {
            if !is_env_name(name) {
                let mut l: Vec<&str> = loc.to_vec();
                l.push("environment");
                l.push(name.as_str());
                v.push(
                    "value_error",
                    &l,
                    format!("'{name}' is not a valid environment variable name (letters, digits and '_', not starting with a digit)"),
                    Value::from(name.as_str()),
                );
            }
        }
    }

    /// Session overrides merge per entry, the session winning per path, and per environment
    /// key.
    pub fn merged_with(&self, over: &ManifestSpec) -> ManifestSpec {
        let mut out = self.clone();
        out.entries.extend(over.entries.clone());
        out.environment.extend(over.environment.clone());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_and_full_dumps_both_parse() {
        let m: ManifestSpec = serde_json::from_str(
            r#"{"entries":{"a.md":{"kind":"file","content":"x"},"out":{"kind":"dir"},
                "r":{"kind":"git_repo","repo":"o/r","ref":"main","host":"github.com","subpath":null}}}"#,
        )
        .unwrap();
        assert_eq!(m.entries.len(), 3);
        assert!(m.environment.is_empty());
        assert_eq!(
            m.entries["r"],
            EntrySpec::GitRepo {
                repo: "o/r".into(),
                git_ref: "main".into(),
                host: "github.com".into(),
                subpath: None
            }
        );
    }

    #[test]
    fn an_unknown_kind_is_refused() {
        assert!(
            serde_json::from_str::<ManifestSpec>(r#"{"entries":{"a":{"kind":"nope"}}}"#).is_err()
        );
    }

    #[test]
    fn escaping_paths_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../../b", ".", "./"] {
            assert!(check_relative_path(bad).is_err(), "{bad}");
        }
        for good in ["a", "a/b.txt", "./a", "output/"] {
            assert!(check_relative_path(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn session_entries_win_per_path() {
        let agent: ManifestSpec = serde_json::from_str(
            r#"{"entries":{"a":{"kind":"file","content":"agent"},"b":{"kind":"dir"}},"environment":{"X":"1","Y":"1"}}"#,
        )
        .unwrap();
        let session: ManifestSpec = serde_json::from_str(
            r#"{"entries":{"a":{"kind":"file","content":"session"}},"environment":{"Y":"2"}}"#,
        )
        .unwrap();
        let m = agent.merged_with(&session);
        assert_eq!(
            m.entries["a"],
            EntrySpec::File {
                content: "session".into()
            }
        );
        assert_eq!(m.entries["b"], EntrySpec::Dir {});
        assert_eq!(m.environment["X"], "1");
        assert_eq!(m.environment["Y"], "2");
    }
}
