//! Git checkouts inside a sandbox (`git_repo` manifest entries; skills sources cloned over
//! https): a shallow clone run as the sandbox user, with the sandbox's network and trust
//! store, moved into the workspace without its `.git`.
//!
//! Invariants:
//! - the parts of the source are arguments of one fixed script (`sh -c SCRIPT sh url ref
//!   ...`), never text of it, and were checked by `GitSource::parse` (nothing starts with
//!   `-`, no whitespace); git only speaks https, and never prompts;
//! - the clone is made in a fresh directory under `/tmp` that is removed however the script
//!   ends, so a failed checkout leaves nothing in the workspace;
//! - it is bounded by [`CHECKOUT_TIMEOUT`]; the error says so, and names the repository and
//!   the ref.

use crate::Sessions;
use sandbox_agents_credentials::git_probe::bounded_detail;
use sandbox_agents_domain::git_source::GitSource;
use sandbox_agents_domain::manifest::check_relative_path;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::{ExecRequest, WORKDIR};
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest a checkout may take, clone and move included.
pub const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(300);

/// `$1` url, `$2` ref, `$3` `commit` or `name`, `$4` subpath (may be empty), `$5` the
/// destination (absolute). Exit 3: a problem the script found itself (its words on stderr).
const SCRIPT: &str = r#"set -eu
url=$1 ref=$2 kind=$3 sub=$4 dest=$5
tmp=$(mktemp -d /tmp/sa-checkout-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
g() { git -c protocol.allow=never -c protocol.https.allow=always -c credential.helper= \
  -c advice.detachedHead=false -c init.defaultBranch=main "$@"; }
if [ "$kind" = commit ]; then
  g init -q "$tmp/repo"
  if g -C "$tmp/repo" fetch -q --depth 1 -- "$url" "$ref" 2>"$tmp/err"; then
    g -C "$tmp/repo" checkout -q --detach FETCH_HEAD
  else
    # A server that refuses to send a commit by id: fetch its branches and tags, look there.
    g -C "$tmp/repo" fetch -q --tags -- "$url" '+refs/heads/*:refs/remotes/origin/*' \
      || { cat "$tmp/err" >&2; exit 1; }
    g -C "$tmp/repo" checkout -q --detach "$ref" 2>/dev/null \
      || { echo "commit $ref is not in the repository" >&2; exit 3; }
  fi
else
  g clone -q --depth 1 --single-branch --branch="$ref" -- "$url" "$tmp/repo"
fi
rm -rf "$tmp/repo/.git"
src=$tmp/repo
if [ -n "$sub" ]; then
  src=$tmp/repo/$sub
  [ -d "$src" ] || { echo "the repository has no directory '$sub' at this ref" >&2; exit 3; }
  case $(realpath -- "$src") in
    "$tmp/repo"/*) ;;
    *) echo "subpath '$sub' leads out of the repository" >&2; exit 3 ;;
  esac
fi
mkdir -p -- "$(dirname -- "$dest")"
if [ -d "$dest" ] && [ ! -L "$dest" ] && [ -z "$(ls -A -- "$dest")" ]; then rmdir -- "$dest"; fi
if [ -e "$dest" ] || [ -L "$dest" ]; then echo "'$dest' exists already" >&2; exit 3; fi
mv -- "$src" "$dest"
"#;

/// The arguments of [`SCRIPT`] for a checkout of `src` into `dest` (absolute).
fn argv(src: &GitSource, dest: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "sh".into(),
        src.https_url(),
        src.git_ref.clone(),
        if src.commit() { "commit" } else { "name" }.into(),
        src.subpath.clone().unwrap_or_default(),
        dest.to_owned(),
    ]
}

impl Sessions {
    /// Checks `src` out into `dest_rel` (relative to the workspace; its parents are made as
    /// needed; an empty directory there is replaced, anything else is an error): a shallow
    /// clone of the ref (a branch or tag by name, a full commit id by id), only `subpath`
    /// when given, without `.git`, owned by the sandbox user. Runs in the sandbox with
    /// `env` (the session's variables, which carry the trust store's) and
    /// `GIT_TERMINAL_PROMPT=0`. A failure is a `BadRequest` naming the repository and the
    /// ref, with git's words.
    pub(crate) async fn checkout_in_sandbox(
        &self,
        sandbox_id: &str,
        src: &GitSource,
        dest_rel: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<()> {
        check_relative_path(dest_rel).map_err(ServiceError::BadRequest)?;
        let dest = format!(
            "{WORKDIR}/{}",
            sandbox_agents_workspace::manifest::normalise(dest_rel)
        );
        self.checkout_at(sandbox_id, src, &dest, dest_rel, env)
            .await
    }

    /// [`Self::checkout_in_sandbox`] into `dest`, an absolute path of the sandbox that the
    /// server chose (a skills source's tree outside the workspace); `shown` names it in errors.
    pub(crate) async fn checkout_at(
        &self,
        sandbox_id: &str,
        src: &GitSource,
        dest: &str,
        shown: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<()> {
        let dest_rel = shown;
        let mut env: Vec<(String, String)> =
            env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
        let req = ExecRequest {
            argv: argv(src, dest),
            workdir: None,
            env,
            timeout: CHECKOUT_TIMEOUT,
            max_output: 64 * 1024,
            stdin: None,
        };
        let started = std::time::Instant::now();
        let out = self.inner.backend.exec(sandbox_id, &req).await?;
        let failed = |why: String| {
            ServiceError::BadRequest(format!(
                "could not check out {} into '{dest_rel}': {why}",
                src.describe()
            ))
        };
        if out.timed_out {
            return Err(failed(format!(
                "git did not finish within {} s; is the repository large, or the host slow to reach from the sandbox?",
                CHECKOUT_TIMEOUT.as_secs()
            )));
        }
        if out.exit_code != 0 {
            let said = bounded_detail(&out.stderr);
            let said = if said.is_empty() {
                format!(
                    "git failed (exit code {}) without saying why",
                    out.exit_code
                )
            } else {
                said
            };
            // Exit 3 is the script's own finding; anything else is git's, and usually means
            // the repository cannot be read anonymously from here.
            return Err(failed(if out.exit_code == 3 {
                said
            } else {
                format!(
                    "{said} (the clone runs inside the sandbox over https without credentials: \
                     the repository must be public, the ref must exist, and the host must be \
                     reachable from sandboxes)"
                )
            }));
        }
        tracing::info!(container.id = %sandbox_id, repo = %src.repo, git_ref = %src.git_ref, dest = %dest_rel, ms = started.elapsed().as_millis() as u64, "git checkout done");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_is_passed_as_arguments_of_a_fixed_script() {
        let src = GitSource::parse("h.example:8443", "o/r", "v1", Some("docs")).unwrap();
        let a = argv(&src, "/workspace/x");
        assert_eq!(a[2], SCRIPT);
        assert_eq!(
            &a[4..],
            [
                "https://h.example:8443/o/r.git",
                "v1",
                "name",
                "docs",
                "/workspace/x"
            ]
        );
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let src = GitSource::parse("h.example", "o/r", sha, None).unwrap();
        assert_eq!(&argv(&src, "/workspace/x")[6..8], ["commit", ""]);
    }
}
