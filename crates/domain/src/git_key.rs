//! Git deploy keys on the wire, and the remote a key is tested
//! against, parsed strictly: its parts end up on the command lines of `git` and `ssh`, so
//! anything that could be read as an option or split by a shell is refused before anything
//! runs.

use crate::patch::non_null;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Longest key name, repository path and host accepted.
pub const MAX_NAME: usize = 200;
pub const MAX_REPO: usize = 512;
pub const MAX_HOST: usize = 300;

/// An ed25519 deploy key the server generated for the project, to register (read-only) with
/// a git host. There is no field for the private half: it is stored sealed under the master
/// key and never leaves the server. An agent's `skills_source.ssh_key_id` names one.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct GitKey {
    /// The key's id (a UUID).
    pub id: String,
    /// Unique in the project.
    pub name: String,
    /// OpenSSH format, `ssh-ed25519 AAAA… sandbox-agents:<project>:<name>`: register it with
    /// the git host.
    pub public_key: String,
    /// `SHA256:…`, as `ssh-keygen -lf` prints it.
    pub fingerprint: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When a test (or a clone) last used the key successfully; null if never.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
}

/// The body of `POST /api/git-keys`: the server generates the pair.
#[derive(Debug, Deserialize, ToSchema)]
pub struct GitKeyCreate {
    /// Unique in the project (409 when taken): 1 to 200 characters, not blank, without
    /// control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
}

/// The body of `POST /api/git-keys/{key_id}/test`: where to try the key. Both parts end up
/// on the command lines of `git` and `ssh`, so they are checked strictly before anything
/// runs.
#[derive(Debug, Deserialize, ToSchema)]
pub struct GitKeyTestRequest {
    /// The repository's path on the host, e.g. `owner/name`: 1 to 512 ASCII letters, digits
    /// and `. _ ~ / + @ : -`, not starting with `-`.
    #[schema(
        pattern = "^[A-Za-z0-9._~/+@:][A-Za-z0-9._~/+@:-]*$",
        min_length = 1,
        max_length = 512
    )]
    pub repo: String,
    /// `[user@]hostname[:port]`, at most 300 characters: a user of letters, digits, `.`, `_`
    /// and `-` (default `git`), a hostname of letters, digits, `.` and `-` not starting with
    /// `-` or `.` (or an IPv6 address in brackets), and a port from 1 to 65535 (a port makes
    /// the remote an `ssh://` URL). Default `github.com`; not null.
    #[serde(default = "default_host", deserialize_with = "non_null")]
    #[schema(
        default = "github.com",
        min_length = 1,
        max_length = 300,
        pattern = "^([A-Za-z0-9._][A-Za-z0-9._-]*@)?([A-Za-z0-9][A-Za-z0-9.-]*|\\[[0-9A-Fa-f:]+\\])(:0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$"
    )]
    pub host: String,
}

fn default_host() -> String {
    "github.com".into()
}

/// Whether the key could read the repository (`git ls-remote` from the control plane). A
/// failure is `ok: false` with git's or ssh's own words in `detail`, never an HTTP error.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct GitKeyTest {
    /// The repository answered; `last_used_at` is set.
    pub ok: bool,
    /// What happened: on failure, git's and ssh's own words.
    pub detail: String,
}

/// A name: 1 to [`MAX_NAME`] characters, not blank, no control characters.
pub fn check_name(errors: &mut Violations, name: &str) {
    if name.trim().is_empty()
        || name.chars().count() > MAX_NAME
        || name.chars().any(char::is_control)
    {
        errors.push(
            "value_error",
            &["name"],
            format!("the name must be 1 to {MAX_NAME} characters, not blank, without control characters"),
            Value::from(name),
        );
    }
}

/// Where a key is tested: `user@host[:port]` and a repository path, every part checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitRemote {
    user: String,
    /// A DNS name or IPv4 address, or an IPv6 address in brackets (`[::1]`).
    host: String,
    port: Option<u16>,
    repo: String,
}

impl GitRemote {
    /// Parses `host` (`[user@]hostname[:port]`) and `repo`, recording a 422 for each part
    /// that is not acceptable; `None` when anything was.
    pub fn parse(errors: &mut Violations, repo: &str, host: &str) -> Option<GitRemote> {
        let parsed_host = parse_host(host);
        if parsed_host.is_none() {
            errors.push(
                "value_error",
                &["host"],
                "host is [user@]hostname[:port]: a user of letters, digits, '.', '_' or '-', a \
                 hostname of letters, digits, '.' and '-' (or an IPv6 address in brackets), a \
                 port from 1 to 65535; nothing may start with '-'",
                Value::from(host),
            );
        }
        let repo_ok = check_repo(repo);
        if !repo_ok {
            errors.push(
                "value_error",
                &["repo"],
                format!(
                    "repo is the repository's path on the host (e.g. owner/name): 1 to \
                     {MAX_REPO} letters, digits and . _ ~ / + @ : -, not starting with '-'"
                ),
                Value::from(repo),
            );
        }
        let (user, host, port) = parsed_host?;
        repo_ok.then(|| GitRemote {
            user,
            host,
            port,
            repo: repo.to_owned(),
        })
    }

    /// The URL git is given: scp-like `user@host:repo` without a port, and
    /// `ssh://user@host:port/repo` with one (scp-like syntax cannot carry a port).
    pub fn url(&self) -> String {
        match self.port {
            None => format!("{}@{}:{}", self.user, self.host, self.repo),
            Some(port) => format!(
                "ssh://{}@{}:{}/{}",
                self.user,
                self.host,
                port,
                self.repo.trim_start_matches('/')
            ),
        }
    }
}

fn is_user_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_hostname_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-')
}

/// `[user@]hostname[:port]` into its parts, the user defaulting to `git`.
fn parse_host(raw: &str) -> Option<(String, String, Option<u16>)> {
    if raw.is_empty() || raw.len() > MAX_HOST {
        return None;
    }
    let (user, rest) = match raw.split_once('@') {
        Some((u, rest)) => (u, rest),
        None => ("git", raw),
    };
    if user.is_empty() || user.starts_with('-') || !user.chars().all(is_user_char) {
        return None;
    }
    let (hostname, port) = if let Some(inner) = rest.strip_prefix('[') {
        // A bracketed IPv6 address, maybe followed by `:port`.
        let (addr, after) = inner.split_once(']')?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return None;
        }
        let port = match after {
            "" => None,
            p => Some(parse_port(p.strip_prefix(':')?)?),
        };
        (format!("[{addr}]"), port)
    } else {
        let (name, port) = match rest.split_once(':') {
            Some((name, p)) => (name, Some(parse_port(p)?)),
            None => (rest, None),
        };
        let ok =
            !name.is_empty() && !name.starts_with(['-', '.']) && name.chars().all(is_hostname_char);
        if !ok {
            return None;
        }
        (name.to_owned(), port)
    };
    Some((user.to_owned(), hostname, port))
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|&n| n != 0)
}

/// A repository path: a conservative character set with nothing a shell or option parser
/// would read specially (no whitespace, quotes, `$`, `;`, backslashes), not an option.
fn check_repo(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= MAX_REPO
        && !repo.starts_with('-')
        && repo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._~/+@:-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(repo: &str, host: &str) -> Option<String> {
        GitRemote::parse(&mut Violations::new(), repo, host).map(|r| r.url())
    }

    #[test]
    fn hosts_become_scp_like_urls_without_a_port_and_ssh_urls_with_one() {
        assert_eq!(
            url("o/r", "github.com").as_deref(),
            Some("git@github.com:o/r")
        );
        assert_eq!(
            url("o/r.git", "deploy@git.example.com").as_deref(),
            Some("deploy@git.example.com:o/r.git")
        );
        assert_eq!(
            url("/srv/git/r.git", "root@127.0.0.1:2222").as_deref(),
            Some("ssh://root@127.0.0.1:2222/srv/git/r.git")
        );
        assert_eq!(
            url("o/r", "[::1]:22").as_deref(),
            Some("ssh://git@[::1]:22/o/r")
        );
        assert_eq!(
            url("o/r", "[fe80::1]").as_deref(),
            Some("git@[fe80::1]:o/r")
        );
    }

    #[test]
    fn anything_that_could_be_an_option_or_split_by_a_shell_is_refused() {
        for (repo, host) in [
            ("o/r", "-oProxyCommand=touch /tmp/x"),
            ("o/r", "-oProxyCommand=id"),
            ("o/r", "git@-oProxyCommand=id"),
            ("o/r", "-git@github.com"),
            ("o/r", "github.com:0"),
            ("o/r", "github.com:65536"),
            ("o/r", "github.com:22x"),
            ("o/r", "git hub.com"),
            ("o/r", "github.com\n"),
            ("o/r", ".github.com"),
            ("o/r", "[::1"),
            ("o/r", "[zz::1]"),
            ("o/r", "a@b@c"),
            ("o/r", ""),
            ("--upload-pack=touch /tmp/x", "github.com"),
            ("-u", "github.com"),
            ("o/r; id", "github.com"),
            ("o/r$(id)", "github.com"),
            ("o/'r'", "github.com"),
            ("o/r\t", "github.com"),
            ("", "github.com"),
        ] {
            let mut v = Violations::new();
            assert!(
                GitRemote::parse(&mut v, repo, host).is_none(),
                "{repo:?} at {host:?} was accepted"
            );
            assert!(!v.is_empty());
        }
    }

    #[test]
    fn names_are_not_blank_and_have_no_control_characters() {
        for bad in ["", "   ", "a\nb", &"x".repeat(MAX_NAME + 1)] {
            let mut v = Violations::new();
            check_name(&mut v, bad);
            assert!(!v.is_empty(), "{bad:?}");
        }
        let mut v = Violations::new();
        check_name(&mut v, "deploy key (ci)");
        assert!(v.is_empty());
    }
}
