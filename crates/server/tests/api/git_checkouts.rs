//! `git_repo` manifest entries and `--extra-ca-certs`, end to end on real Docker: a real git
//! server over https (`testkit::git_server`, `git http-backend` with a certificate of a CA
//! the test makes) that sandboxes can clone from only when the server under test is given
//! that CA; branches, tags, commits and subpaths checked out without `.git`; failures that
//! name the repository and the ref; malformed entries refused before anything is stored.

use sandbox_agents_testkit::git_server::{GitServer, Repo};
use sandbox_agents_testkit::{TestApp, BOOT};
use serde_json::{json, Value};

/// A server trusting `git`'s CA (and the host's bundle), with or without a warm pool.
async fn trusting(git: &GitServer, warm_pool: usize) -> TestApp {
    TestApp::builder()
        .with_config(|c| c.extra_ca_certs = Some(git.ca_bundle()))
        .with_pool(warm_pool)
        .spawn()
        .await
}

/// `acme/tools`: `v1` (README v1, docs/guide.md) tagged, then README v2 on `main`, and a
/// `feature` branch with one more file. Returns the repository and the first commit's id.
fn tools(git: &GitServer) -> (Repo, String) {
    let repo = git.repo(
        "acme/tools",
        &[("README.md", "v1\n"), ("docs/guide.md", "the guide\n")],
    );
    let first = repo.head();
    repo.tag("v1");
    repo.commit("second", &[("README.md", "v2\n")]);
    repo.push("main");
    repo.branch("feature");
    repo.commit("feature", &[("feature.txt", "on the branch\n")]);
    repo.push("feature");
    repo.switch("main");
    (repo, first)
}

fn entry(git: &GitServer, repo: &str, git_ref: &str, subpath: Option<&str>) -> Value {
    let mut e = json!({"kind": "git_repo", "host": git.host(), "repo": repo, "ref": git_ref});
    if let Some(s) = subpath {
        e["subpath"] = json!(s);
    }
    e
}

async fn sh(app: &TestApp, id: &str, command: &str) -> String {
    let (code, out, err) = app.exec(id, command).await;
    assert_eq!(code, 0, "{command}: {out}{err}");
    out.trim().to_owned()
}

#[tokio::test]
async fn branches_tags_commits_and_subpaths_are_checked_out_without_git() {
    let git = GitServer::start().await;
    let (_repo, first) = tools(&git);
    let app = trusting(&git, 0).await;
    app.create_agent(
        "coder",
        json!({"manifest": {"entries": {
            "main": entry(&git, "acme/tools", "main", None),
            "tagged": entry(&git, "acme/tools.git", "v1", None),
            "feature": entry(&git, "acme/tools", "feature", None),
            "pinned": entry(&git, "acme/tools", &first, None),
            "vendor/docs": entry(&git, "acme/tools", "main", Some("docs")),
            "main/NOTES.md": {"kind": "file", "content": "laid over the checkout\n"},
        }}}),
    )
    .await;
    let id = app
        .boot_session(json!({"agent_id": "coder", "title": "t"}))
        .await;

    assert_eq!(sh(&app, &id, "cat main/README.md").await, "v2");
    assert_eq!(
        sh(&app, &id, "cat main/NOTES.md").await,
        "laid over the checkout"
    );
    assert_eq!(sh(&app, &id, "cat tagged/README.md").await, "v1");
    assert_eq!(
        sh(&app, &id, "cat feature/feature.txt").await,
        "on the branch"
    );
    assert_eq!(sh(&app, &id, "cat pinned/README.md").await, "v1");
    assert_eq!(sh(&app, &id, "ls -A vendor/docs").await, "guide.md");
    assert_eq!(
        sh(&app, &id, "ls -A main | sort | tr '\\n' ' '").await,
        "NOTES.md README.md docs"
    );
    assert_eq!(
        sh(&app, &id, "find . -name .git | wc -l").await,
        "0",
        "no checkout keeps its .git"
    );
    assert_eq!(
        sh(
            &app,
            &id,
            "stat -c %u main/README.md vendor/docs/guide.md | sort -u"
        )
        .await,
        "1000",
        "the checkouts belong to the sandbox user"
    );
    assert_eq!(
        sh(&app, &id, "ls /tmp | grep -c sa-checkout || true").await,
        "0",
        "the clones' scratch directories are gone"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_sandbox_of_a_server_with_extra_cas_trusts_them_and_is_told_where_they_are() {
    let git = GitServer::start().await;
    let app = trusting(&git, 0).await;
    let id = app.running_session("trusting", json!({})).await;
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    for var in [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "PIP_CERT",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
    ] {
        assert_eq!(sh(&app, &id, &format!("printenv {var}")).await, bundle);
    }
    // Root's, 0644, and not the sandbox user's to change.
    assert_eq!(
        sh(&app, &id, &format!("stat -c '%u %a' {bundle}")).await,
        "0 644"
    );
    let (code, _, _) = app.exec(&id, &format!("echo x >> {bundle}")).await;
    assert_ne!(code, 0, "the sandbox user could write the trust store");
    let ca = std::fs::read_to_string(git.ca_cert()).unwrap();
    let needle = ca.lines().nth(1).unwrap();
    assert_eq!(
        sh(&app, &id, &format!("grep -c '{needle}' {bundle}")).await,
        "1"
    );
    // The test CA's server, with curl's and Python's defaults.
    let url = format!("https://{}/", git.host());
    assert_eq!(
        sh(&app, &id, &format!("curl -sS {url}")).await,
        "git test server"
    );
    let py = format!("python3 -c \"import urllib.request as u; print(u.urlopen('{url}').status)\"");
    assert_eq!(sh(&app, &id, &py).await, "200");
    // And a package index through this network's TLS inspection, if it inspects.
    let (code, _, err) = app
        .exec(&id, "curl -sS -o /dev/null https://pypi.org/simple/six/")
        .await;
    assert_eq!(code, 0, "pypi over https from the sandbox: {err}");
    app.stop().await;
}

#[tokio::test]
async fn a_pooled_sandbox_trusts_the_extra_cas_too() {
    let git = GitServer::start().await;
    let app = trusting(&git, 1).await;
    assert_eq!(app.sessions.fill_pool().await.unwrap(), 1);
    let id = app.running_session("pooled", json!({})).await;
    let (pooled,): (i64,) = sqlx::query_as("select count(*) from sandbox_pool")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(pooled, 0, "the session took the pooled sandbox");
    let url = format!("https://{}/", git.host());
    assert_eq!(
        sh(&app, &id, &format!("curl -sS {url}")).await,
        "git test server"
    );
    assert_eq!(
        sh(&app, &id, "printenv GIT_SSL_CAINFO").await,
        "/etc/ssl/certs/ca-certificates.crt"
    );
    app.stop().await;
}

#[tokio::test]
async fn without_extra_cas_nothing_changes_and_the_test_ca_is_not_trusted() {
    let git = GitServer::start().await;
    git.repo("acme/tools", &[("README.md", "v1\n")]);
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("plain", json!({})).await;
    let (code, out, _) = app.exec(&id, "printenv SSL_CERT_FILE GIT_SSL_CAINFO").await;
    assert_eq!((code, out.as_str()), (1, ""), "no variable is set");
    let (code, _, err) = app
        .exec(&id, &format!("curl -sS https://{}/", git.host()))
        .await;
    assert_eq!(
        code, 60,
        "curl verified a certificate of the test's CA: {err}"
    );
    // The negative half for the network: only where it inspects TLS (detected, not assumed:
    // the host's bundle is what makes it pass, so without it verification fails).
    let (code, _, err) = app
        .exec(&id, "curl -sS -o /dev/null https://pypi.org/simple/six/")
        .await;
    if code == 0 {
        eprintln!("this network does not inspect TLS: pypi verifies without extra CAs");
    } else {
        assert_eq!(
            code, 60,
            "pypi failed for another reason than verification: {err}"
        );
    }
    // A checkout from the test CA's server fails the boot, saying why.
    app.create_agent(
        "cloner",
        json!({"manifest": {"entries": {"r": entry(&git, "acme/tools", "main", None)}}}),
    )
    .await;
    let s = app
        .create_session(json!({"agent_id": "cloner", "title": "t"}))
        .await;
    let s = app
        .wait_for_status(s["id"].as_str().unwrap(), "error", BOOT)
        .await;
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("acme/tools") && error.contains("certificate"),
        "{error}"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_ref_or_repository_fails_the_boot_naming_both() {
    let git = GitServer::start().await;
    tools(&git);
    let app = trusting(&git, 0).await;
    for (slug, repo, git_ref) in [
        ("no-branch", "acme/tools", "no-such-branch"),
        ("no-repo", "acme/nothing", "main"),
        (
            "no-commit",
            "acme/tools",
            "0123456789abcdef0123456789abcdef01234567",
        ),
    ] {
        app.create_agent(
            slug,
            json!({"manifest": {"entries": {"r": entry(&git, repo, git_ref, None)}}}),
        )
        .await;
        let s = app
            .create_session(json!({"agent_id": slug, "title": "t"}))
            .await;
        let id = s["id"].as_str().unwrap();
        let s = app.wait_for_status(id, "error", BOOT).await;
        let error = s["error"].as_str().unwrap();
        assert!(
            error.contains(repo) && error.contains(git_ref),
            "{slug}: {error}"
        );
        let events = app.events(id).await;
        let failed = events
            .iter()
            .find(|e| e["type"] == "session.status_error")
            .unwrap_or_else(|| panic!("{slug}: no session.status_error in {events:?}"));
        assert_eq!(failed["payload"]["error"], error, "{slug}");
    }
    // A subpath the ref does not have.
    app.create_agent(
        "no-subpath",
        json!({"manifest": {"entries": {"r": entry(&git, "acme/tools", "main", Some("nope"))}}}),
    )
    .await;
    let s = app
        .create_session(json!({"agent_id": "no-subpath", "title": "t"}))
        .await;
    let s = app
        .wait_for_status(s["id"].as_str().unwrap(), "error", BOOT)
        .await;
    assert!(
        s["error"].as_str().unwrap().contains("no directory 'nope'"),
        "{s}"
    );
    app.stop().await;
}

#[tokio::test]
async fn malformed_git_entries_are_refused_at_create_and_nothing_is_stored() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("ok", json!({})).await;
    let git = |host: &str, repo: &str, git_ref: &str, subpath: Value| json!({"kind": "git_repo", "host": host, "repo": repo, "ref": git_ref, "subpath": subpath});
    for (e, field) in [
        (
            git(
                "github.com",
                "o/r",
                "--upload-pack=touch /tmp/x",
                Value::Null,
            ),
            "ref",
        ),
        (git("github.com", "o/r", "main branch", Value::Null), "ref"),
        (git("github.com", "-o/r", "main", Value::Null), "repo"),
        (
            git("github.com", "just-a-name", "main", Value::Null),
            "repo",
        ),
        (git("-oProxyCommand=id", "o/r", "main", Value::Null), "host"),
        (git("github.com:0", "o/r", "main", Value::Null), "host"),
        (
            git("github.com", "o/r", "main", json!("../../etc")),
            "subpath",
        ),
        (git("github.com", "o/r", "main", json!("/etc")), "subpath"),
    ] {
        let manifest = json!({"entries": {"r": e}});
        let r = app
            .http
            .post(app.url("/api/sessions"))
            .json(&json!({"agent_id": "ok", "manifest": manifest}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{e}");
        let body: Value = r.json().await.unwrap();
        let loc = body["detail"][0]["loc"].as_array().unwrap();
        assert_eq!(loc.last().unwrap(), field, "{e}: {body}");
        let r = app
            .http
            .post(app.url("/api/agents"))
            .json(&json!({"slug": "bad", "name": "bad", "manifest": manifest}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "an agent with {e}");
    }
    let (sessions,): (i64,) = sqlx::query_as("select count(*) from sessions")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let (agents,): (i64,) = sqlx::query_as("select count(*) from agents")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!((sessions, agents), (0, 1), "nothing was stored");
    app.stop().await;
}

#[tokio::test]
async fn a_commit_id_is_found_on_a_server_that_will_not_send_it_by_id() {
    let git = GitServer::start().await;
    let (repo, _) = tools(&git);
    // `second`, once a third commit lands, is neither a ref's tip nor a tag's target.
    let second = repo.head();
    repo.commit("third", &[("README.md", "v3\n")]);
    repo.push("main");
    repo.speak_only_protocol_v0();
    let app = trusting(&git, 0).await;
    app.create_agent(
        "old-server",
        json!({"manifest": {"entries": {"pinned": entry(&git, "acme/tools", &second, None)}}}),
    )
    .await;
    let id = app
        .boot_session(json!({"agent_id": "old-server", "title": "t"}))
        .await;
    assert_eq!(sh(&app, &id, "cat pinned/README.md").await, "v2");
    // The server does refuse the commit by id (so the checkout above took the other way).
    let url = format!("https://{}/acme/tools.git", git.host());
    let (code, _, err) = app
        .exec(
            &id,
            &format!("git init -q /tmp/x && git -C /tmp/x fetch -q --depth 1 {url} {second}"),
        )
        .await;
    assert_ne!(code, 0, "the server sent an unadvertised commit: {err}");
    app.stop().await;
}

#[tokio::test]
async fn a_git_skills_source_is_cloned_inside_the_sandbox_and_its_skills_staged() {
    let git = GitServer::start().await;
    let repo = git.repo(
        "acme/skills",
        &[
            (
                "skills/pdf/SKILL.md",
                "---\nname: pdf\ndescription: PDFs.\n---\n",
            ),
            ("skills/pdf/fill.sh", "echo fill\n"),
            ("README.md", "not a skill\n"),
        ],
    );
    repo.push("main");
    let app = trusting(&git, 0).await;
    app.create_agent(
        "git-skilled",
        json!({"skills_source": {"kind": "git_repo", "host": git.host(), "repo": "acme/skills", "subpath": "skills"}}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "git-skilled"})).await;
    // Not announced (no skills capability), so staged at boot; the clone has no .git.
    assert_eq!(sh(&app, &id, "cat .agents/pdf/fill.sh").await, "echo fill");
    assert_eq!(
        sh(
            &app,
            &id,
            "test ! -e /tmp/sandbox-agents-skills/tree/.git && ls .agents"
        )
        .await,
        "pdf"
    );

    app.create_agent(
        "git-missing",
        json!({"skills_source": {"kind": "git_repo", "host": git.host(), "repo": "acme/skills", "ref": "nope"}}),
    )
    .await;
    let s = app.create_session(json!({"agent_id": "git-missing"})).await;
    let s = app
        .wait_for_status(s["id"].as_str().unwrap(), "error", BOOT)
        .await;
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("acme/skills") && error.contains("nope"),
        "{error}"
    );
}
