//! Where a checkout comes from (`git_repo` manifest entries and skills sources): a host, a
//! repository path on it, a ref and an optional subdirectory, parsed strictly. Each part ends
//! up on `git`'s command line (as its own argument, never through a shell), so anything git
//! could read as an option, or a shell or URL parser could split, is refused at the door:
//! a clone that fails at boot is much harder to understand than a 422 at create.

use crate::git_key::{MAX_HOST, MAX_REPO};

/// Longest ref and subpath accepted.
pub const MAX_REF: usize = 255;
pub const MAX_SUBPATH: usize = 1024;

/// A checked `host` / `repo` / `ref` / `subpath`: the https remote is
/// `https://<host>/<repo>.git`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitSource {
    /// `hostname[:port]`.
    pub host: String,
    /// `owner/name` (more segments allowed), without a trailing `.git`.
    pub repo: String,
    /// A branch or tag name, or a full commit id (see [`GitSource::commit`]).
    pub git_ref: String,
    /// A directory of the repository, relative, normalised (no `.`, no empty segment); `None`
    /// for the whole tree.
    pub subpath: Option<String>,
}

/// Which part of a source was refused, and why (written for the person who wrote it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// `host`, `repo`, `ref` or `subpath`: the field's name on the wire.
    pub field: &'static str,
    pub reason: String,
}

fn refused(field: &'static str, reason: impl Into<String>) -> Refused {
    Refused {
        field,
        reason: reason.into(),
    }
}

impl GitSource {
    /// Parses the four parts; the first part that is not acceptable is refused.
    pub fn parse(
        host: &str,
        repo: &str,
        git_ref: &str,
        subpath: Option<&str>,
    ) -> Result<GitSource, Refused> {
        check_host(host).map_err(|r| refused("host", r))?;
        let repo = check_repo(repo).map_err(|r| refused("repo", r))?;
        check_ref(git_ref).map_err(|r| refused("ref", r))?;
        let subpath = match subpath {
            None => None,
            Some(s) => check_subpath(s).map_err(|r| refused("subpath", r))?,
        };
        Ok(GitSource {
            host: host.to_owned(),
            repo,
            git_ref: git_ref.to_owned(),
            subpath,
        })
    }

    /// `https://<host>/<repo>.git`.
    pub fn https_url(&self) -> String {
        format!("https://{}/{}.git", self.host, self.repo)
    }

    /// Whether the ref is a full commit id (40 hex digits, or 64 for SHA-256 repositories):
    /// those are fetched by id, everything else is cloned as a branch or tag name.
    pub fn commit(&self) -> bool {
        is_commit_id(&self.git_ref)
    }

    /// How a person recognises this source in a message: `owner/name@ref on host`.
    pub fn describe(&self) -> String {
        format!("{} at ref '{}' on {}", self.repo, self.git_ref, self.host)
    }
}

/// 40 or 64 hex digits.
pub fn is_commit_id(r: &str) -> bool {
    matches!(r.len(), 40 | 64) && r.chars().all(|c| c.is_ascii_hexdigit())
}

/// `hostname[:port]`: letters, digits, `.` and `-`, not starting with `-` or `.`, no empty
/// label; a port from 1 to 65535. No user (an https clone has none) and no brackets.
pub fn check_host(host: &str) -> Result<(), String> {
    let said = "host is a hostname with an optional :port (e.g. github.com or git.example.com:8443): letters, digits, '.' and '-', not starting with '-' or '.'";
    if host.is_empty() || host.len() > MAX_HOST {
        return Err(said.into());
    }
    let (name, port) = match host.split_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    let name_ok = !name.is_empty()
        && !name.starts_with(['-', '.'])
        && !name.ends_with('-')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
    let port_ok = port.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 5
            && p.chars().all(|c| c.is_ascii_digit())
            && p.parse::<u16>().is_ok_and(|n| n != 0)
    });
    if name_ok && port_ok {
        Ok(())
    } else {
        Err(said.into())
    }
}

/// `owner/name`, maybe with more segments: each segment of letters, digits and `. _ ~ + @ -`,
/// not starting with `-` or `.`; no empty segment, no leading or trailing `/`. A trailing
/// `.git` is dropped (the URL adds it). Returns the repository path without it.
pub fn check_repo(repo: &str) -> Result<String, String> {
    let said = format!(
        "repo is the repository's path on the host, like owner/name: segments of letters, digits and . _ ~ + @ -, not starting with '-' or '.', separated by '/', at most {MAX_REPO} characters"
    );
    let bare = repo.strip_suffix(".git").unwrap_or(repo);
    let segments: Vec<&str> = bare.split('/').collect();
    let ok = !bare.is_empty()
        && repo.len() <= MAX_REPO
        && segments.len() >= 2
        && segments.iter().all(|s| {
            !s.is_empty()
                && !s.starts_with(['-', '.'])
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._~+@-".contains(c))
        });
    if ok {
        Ok(bare.to_owned())
    } else {
        Err(said)
    }
}

/// A branch or tag name as `git check-ref-format` would take it, a little stricter: no
/// whitespace or control characters, none of `~ ^ : ? * [ \`, no `..`, no `@{`, no leading
/// `-`, `/` or `.`, no trailing `/`, `.` or `.lock`, no empty segment; or a commit id.
pub fn check_ref(r: &str) -> Result<(), String> {
    let said = "ref is a branch or tag name (e.g. main, v1.2) or a full 40-hex commit id: no whitespace, none of ~ ^ : ? * [ \\, no '..' or '@{', not starting with '-', '/' or '.'";
    let ok = !r.is_empty()
        && r.len() <= MAX_REF
        && !r.starts_with(['-', '/', '.'])
        && !r.ends_with(['/', '.'])
        && !r.ends_with(".lock")
        && !r.contains("..")
        && !r.contains("@{")
        && !r.contains("//")
        && r != "@"
        && !r
            .split('/')
            .any(|s| s.starts_with('.') || s.ends_with(".lock"))
        && r.chars().all(|c| {
            c.is_ascii_graphic() && !matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\')
        });
    if ok {
        Ok(())
    } else {
        Err(said.into())
    }
}

/// A directory of the repository: relative, no `..`, no NUL or control character, not
/// starting with `-`. Returns it normalised (`a/./b/` is `a/b`), `None` when it names the
/// whole tree (`.`).
pub fn check_subpath(p: &str) -> Result<Option<String>, String> {
    let said = format!(
        "subpath is a directory of the repository, relative (no leading '/'), without '..' or control characters, not starting with '-', at most {MAX_SUBPATH} characters"
    );
    if p.is_empty()
        || p.len() > MAX_SUBPATH
        || p.starts_with(['/', '-'])
        || p.chars().any(char::is_control)
        || p.split('/').any(|c| c == "..")
    {
        return Err(said);
    }
    let parts: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.contains(&".git") {
        return Err("subpath may not name the repository's .git directory".into());
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(host: &str, repo: &str, r: &str, sub: Option<&str>) -> GitSource {
        GitSource::parse(host, repo, r, sub).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn good_sources_parse_into_an_https_url() {
        let s = ok("github.com", "owner/name", "main", None);
        assert_eq!(s.https_url(), "https://github.com/owner/name.git");
        assert!(!s.commit());
        let s = ok(
            "172.17.0.3:8443",
            "group/sub/name.git",
            "release/v1.2",
            Some("./docs/"),
        );
        assert_eq!(s.https_url(), "https://172.17.0.3:8443/group/sub/name.git");
        assert_eq!(s.subpath.as_deref(), Some("docs"));
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert!(ok("github.com", "o/r", sha, Some(".")).commit());
        assert_eq!(ok("github.com", "o/r", "v1", Some(".")).subpath, None);
    }

    #[test]
    fn option_look_alikes_whitespace_and_climbing_are_refused_by_field() {
        for (host, repo, r, sub, field) in [
            ("-oProxyCommand=x", "o/r", "main", None, "host"),
            ("github.com:0", "o/r", "main", None, "host"),
            ("github.com:99999", "o/r", "main", None, "host"),
            ("git hub.com", "o/r", "main", None, "host"),
            ("user@github.com", "o/r", "main", None, "host"),
            ("github.com/x", "o/r", "main", None, "host"),
            ("", "o/r", "main", None, "host"),
            ("github.com", "name", "main", None, "repo"),
            ("github.com", "-o/r", "main", None, "repo"),
            ("github.com", "o/-r", "main", None, "repo"),
            ("github.com", "o/../r", "main", None, "repo"),
            ("github.com", "/o/r", "main", None, "repo"),
            ("github.com", "o/r/", "main", None, "repo"),
            ("github.com", "o/r x", "main", None, "repo"),
            ("github.com", "o/r?x=1", "main", None, "repo"),
            ("github.com", "o/r#x", "main", None, "repo"),
            ("github.com", "o/r", "--upload-pack=x", None, "ref"),
            ("github.com", "o/r", "-b", None, "ref"),
            ("github.com", "o/r", "a b", None, "ref"),
            ("github.com", "o/r", "a..b", None, "ref"),
            ("github.com", "o/r", "a~1", None, "ref"),
            ("github.com", "o/r", "HEAD@{1}", None, "ref"),
            ("github.com", "o/r", "main\n", None, "ref"),
            ("github.com", "o/r", "", None, "ref"),
            ("github.com", "o/r", "x.lock", None, "ref"),
            ("github.com", "o/r", "main", Some("../etc"), "subpath"),
            ("github.com", "o/r", "main", Some("a/../../b"), "subpath"),
            ("github.com", "o/r", "main", Some("/etc"), "subpath"),
            ("github.com", "o/r", "main", Some("-x"), "subpath"),
            ("github.com", "o/r", "main", Some("a\nb"), "subpath"),
            ("github.com", "o/r", "main", Some(".git"), "subpath"),
            ("github.com", "o/r", "main", Some(""), "subpath"),
        ] {
            let got = GitSource::parse(host, repo, r, sub);
            match got {
                Err(e) => assert_eq!(e.field, field, "{host:?} {repo:?} {r:?} {sub:?}: {e:?}"),
                Ok(s) => panic!("{host:?} {repo:?} {r:?} {sub:?} was accepted: {s:?}"),
            }
        }
    }
}
