//! Skills on agents: a skills source (a bundle, a host directory) staged into every boot at
//! `.agents/<skill>/`, `latest` resolved at each boot, a pinned retired version or an empty
//! bundle failing the boot with the reason, skills announced in the system prompt and loaded
//! on demand with `load_skill`, and a `workspace_source` that stages the whole tree.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::skill_bundles::{create, get, push, skills_tree, tar_of};
use sandbox_agents_testkit::TestApp;
use sandbox_agents_testkit::BOOT;
use serde_json::{json, Value};

async fn bundle(app: &TestApp, slug: &str) {
    assert_eq!(create(app, json!({"slug": slug})).await.0, 201);
}

/// A session of `agent` that ends `running` or `error`; returns it.
async fn boot(app: &TestApp, agent: &str) -> Value {
    let s = app.create_session(json!({"agent_id": agent})).await;
    let id = s["id"].as_str().unwrap().to_owned();
    sandbox_agents_testkit::eventually("the boot to end", BOOT, async || {
        let s = app.session(&id).await;
        (s["status"] == "running" || s["status"] == "error").then_some(s)
    })
    .await
}

async fn post(app: &TestApp, path: &str) -> u16 {
    let r = app.http.post(app.url(path)).send().await.unwrap();
    r.status().as_u16()
}

#[tokio::test]
async fn a_bundle_source_stages_every_skill_at_boot_and_each_boot_takes_the_latest_push() {
    let app = TestApp::builder().spawn().await;
    bundle(&app, "tools").await;
    assert_eq!(push(&app, "tools", skills_tree("v1")).await.0, 201);
    app.create_agent(
        "skilled",
        json!({"skills_source": {"kind": "bundle", "bundle": "tools", "lazy": false}}),
    )
    .await;
    let s = boot(&app, "skilled").await;
    assert_eq!(s["status"], "running", "{}", s["error"]);
    let id = s["id"].as_str().unwrap();
    let (code, out, err) = app
        .exec(
            id,
            "ls .agents && cat .agents/pdf/scripts/fill.py && stat -c %u .agents/pdf/SKILL.md",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "csv\npdf\nprint('fill')1000\n");
    // The tree is not part of the workspace: the README outside any skill stays out of it.
    assert_eq!(
        app.exec(id, "test ! -e README.md && test ! -e .agents/README.md")
            .await
            .0,
        0
    );

    // A new push reaches the session at its next boot (stop, start), not before.
    let v2 = tar_of(&[("pdf/SKILL.md", "---\nname: pdf\n---\nversion two\n")]);
    assert_eq!(push(&app, "tools", v2).await.0, 201);
    assert_eq!(
        app.exec(id, "grep -c 'version two' .agents/pdf/SKILL.md || true")
            .await
            .1,
        "0\n"
    );
    assert_eq!(post(&app, &format!("/api/sessions/{id}/stop")).await, 200);
    app.wait_for_status(id, "stopped", BOOT).await;
    assert!(post(&app, &format!("/api/sessions/{id}/start")).await < 300);
    app.wait_for_status(id, "running", BOOT).await;
    let (_, out, _) = app.exec(id, "cat .agents/pdf/SKILL.md; ls .agents").await;
    // The restored workspace held version 1's copies; the boot replaced them, and the csv
    // skill, gone from version 2, went with them.
    assert_eq!(out, "---\nname: pdf\n---\nversion two\npdf\n");
}

#[tokio::test]
async fn a_pinned_retired_version_and_an_empty_bundle_fail_the_boot_saying_so() {
    let app = TestApp::builder().spawn().await;
    bundle(&app, "empty").await;
    app.create_agent(
        "on-empty",
        json!({"skills_source": {"kind": "bundle", "bundle": "empty"}}),
    )
    .await;
    let s = boot(&app, "on-empty").await;
    assert_eq!(s["status"], "error");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("skill bundle 'empty' has no versions yet"),
        "{}",
        s["error"]
    );

    bundle(&app, "pinned").await;
    assert_eq!(push(&app, "pinned", skills_tree("v1")).await.0, 201);
    assert_eq!(push(&app, "pinned", skills_tree("v2")).await.0, 201);
    app.create_agent(
        "on-one",
        json!({"skills_source": {"kind": "bundle", "bundle": "pinned", "version": 1}}),
    )
    .await;
    assert_eq!(boot(&app, "on-one").await["status"], "running");
    let r = app
        .http
        .delete(app.url("/api/skill-bundles/pinned/versions/1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let s = boot(&app, "on-one").await;
    assert_eq!(s["status"], "error");
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("version 1 of skill bundle 'pinned' was retired"),
        "{error}"
    );
    let events = app.events(s["id"].as_str().unwrap()).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "session.status_error");
    assert!(last["payload"]["error"]
        .as_str()
        .unwrap()
        .contains("was retired"));
}

#[tokio::test]
async fn lazy_skills_are_announced_to_the_model_and_staged_when_it_loads_one() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("already_loaded")
            .reply_tool_call("load_skill", json!({"skill_name": "nothing-like-it"})),
        Rule::when()
            .last_tool_result_contains("\"status\":\"loaded\"")
            .reply_tool_call("load_skill", json!({"skill_name": "pdf"})),
        Rule::when()
            .last_tool_result_contains("there is no skill named")
            .reply_text("Loaded pdf."),
        Rule::when()
            .last_user_contains("fill the form")
            .reply_tool_call("load_skill", json!({"skill_name": "pdf"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    bundle(&app, "tools").await;
    assert_eq!(push(&app, "tools", skills_tree("v1")).await.0, 201);
    app.create_agent(
        "lazy",
        json!({
            "instructions": "You fill forms.",
            "capabilities": ["shell", "filesystem", "skills"],
            "skills_source": {"kind": "bundle", "bundle": "tools"}
        }),
    )
    .await;
    let s = boot(&app, "lazy").await;
    assert_eq!(s["status"], "running", "{}", s["error"]);
    let id = s["id"].as_str().unwrap();
    // Lazy: nothing is staged until the model asks.
    assert_eq!(app.exec(id, "test ! -e .agents/pdf").await.0, 0);

    let run = start_run(&app, id, "fill the form", Value::Null).await;
    let evs = wait_for_run(&app, id, &run).await;
    let results: Vec<&str> = evs
        .iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .map(|e| e["payload"]["output"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    let first: Value = serde_json::from_str(results[0]).unwrap();
    assert_eq!(
        first,
        json!({"status": "loaded", "skill_name": "pdf", "path": ".agents/pdf"})
    );
    let second: Value = serde_json::from_str(results[1]).unwrap();
    assert_eq!(second["status"], "already_loaded");
    assert!(
        results[2].contains("there is no skill named 'nothing-like-it'"),
        "{}",
        results[2]
    );
    assert!(results[2].contains("csv, pdf"), "{}", results[2]);
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "Loaded pdf."
    );
    // Only the loaded skill is in the workspace.
    let (code, _, err) = app
        .exec(
            id,
            "test -f .agents/pdf/scripts/fill.py && test ! -e .agents/csv",
        )
        .await;
    assert_eq!(code, 0, "{err}");

    // The model saw the skills and the tool to load them.
    let req = &fake.chat_requests()[0].body;
    let system = req["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You fill forms.\n\n## Skills"),
        "{system}"
    );
    assert!(
        system.contains("- pdf: Fill PDFs. (file: .agents/pdf/SKILL.md)"),
        "{system}"
    );
    assert!(
        system.contains("- csv: No description provided. (file: .agents/csv/SKILL.md)"),
        "{system}"
    );
    let tools: Vec<&str> = req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"load_skill"), "{tools:?}");
}

#[tokio::test]
async fn without_the_skills_capability_skills_are_staged_but_not_announced() {
    let fake = FakeModel::start(Script::new([Rule::always().reply_text("ok")]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    bundle(&app, "tools").await;
    assert_eq!(push(&app, "tools", skills_tree("v1")).await.0, 201);
    app.create_agent(
        "quiet",
        json!({"instructions": "Plain.", "skills_source": {"kind": "bundle", "bundle": "tools"}}),
    )
    .await;
    let s = boot(&app, "quiet").await;
    let id = s["id"].as_str().unwrap();
    // Lazy by default, but nothing would load it: staged at boot.
    assert_eq!(app.exec(id, "test -f .agents/pdf/SKILL.md").await.0, 0);
    let run = start_run(&app, id, "hello", Value::Null).await;
    wait_for_run(&app, id, &run).await;
    let req = &fake.chat_requests()[0].body;
    assert_eq!(req["messages"][0]["content"], "Plain.");
    let tools = req["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t["function"]["name"] != "load_skill"));
}

#[tokio::test]
async fn a_workspace_source_stages_the_whole_tree_and_appends_its_docs_to_the_instructions() {
    let fake = FakeModel::start(Script::new([Rule::always().reply_text("ok")]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    bundle(&app, "stack").await;
    let tree = tar_of(&[
        ("CLAUDE.md", "Run make before committing."),
        ("Makefile", "all:\n\ttrue\n"),
        (
            "skills/pdf/SKILL.md",
            "---\nname: pdf\ndescription: PDFs.\n---\n",
        ),
    ]);
    assert_eq!(push(&app, "stack", tree).await.0, 201);
    app.create_agent(
        "stacked",
        json!({
            "instructions": "Base.",
            "capabilities": ["shell", "skills"],
            "skills_source": {"kind": "bundle", "bundle": "stack", "subpath": "skills"},
            "workspace_source": {"instructions": "Reports go in out/reports.", "ensure_dirs": ["out/reports"]}
        }),
    )
    .await;
    let s = boot(&app, "stacked").await;
    assert_eq!(s["status"], "running", "{}", s["error"]);
    let id = s["id"].as_str().unwrap();
    let (code, _, err) = app
        .exec(
            id,
            "test -f pstack/Makefile && test -f pstack/skills/pdf/SKILL.md && test -d out/reports && test ! -e .agents",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let run = start_run(&app, id, "hello", Value::Null).await;
    wait_for_run(&app, id, &run).await;
    let system = fake.chat_requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.starts_with("Base.\n\n## The workspace tree"),
        "{system}"
    );
    assert!(system.contains("Run make before committing."), "{system}");
    assert!(system.contains("Reports go in out/reports."), "{system}");
    assert!(
        system.contains("- pdf: PDFs. (file: pstack/skills/pdf/SKILL.md)"),
        "{system}"
    );
    assert!(
        !system.contains("load_skill"),
        "the tree is staged whole: {system}"
    );
}

#[tokio::test]
async fn a_local_dir_source_is_staged_from_an_allowed_root_and_refused_outside_it() {
    let root =
        std::env::temp_dir().join(format!("sa-skills-root-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(root.join("mine/review")).unwrap();
    std::fs::write(
        root.join("mine/review/SKILL.md"),
        "---\nname: review\n---\n",
    )
    .unwrap();
    let app = TestApp::builder()
        .with_config(|c| c.local_dir_roots = vec![root.canonicalize().unwrap()])
        .spawn()
        .await;
    let src = root.join("mine");
    app.create_agent(
        "local",
        json!({"skills_source": {"kind": "local_dir", "src": src, "lazy": false}}),
    )
    .await;
    let s = boot(&app, "local").await;
    assert_eq!(s["status"], "running", "{}", s["error"]);
    assert_eq!(
        app.exec(s["id"].as_str().unwrap(), "test -f .agents/review/SKILL.md")
            .await
            .0,
        0
    );

    // A link in the tree could point anywhere on the host: the whole boot is refused, saying so.
    std::fs::create_dir_all(root.join("linked/s")).unwrap();
    std::fs::write(root.join("linked/s/SKILL.md"), "x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("linked/s/passwd")).unwrap();
    app.create_agent(
        "linked",
        json!({"skills_source": {"kind": "local_dir", "src": root.join("linked"), "lazy": false}}),
    )
    .await;
    let s = boot(&app, "linked").await;
    assert_eq!(s["status"], "error");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("is a link or a special file"),
        "{}",
        s["error"]
    );

    app.create_agent(
        "outside",
        json!({"skills_source": {"kind": "local_dir", "src": "/etc"}}),
    )
    .await;
    let s = boot(&app, "outside").await;
    assert_eq!(s["status"], "error");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("outside the directories this server may copy from"),
        "{}",
        s["error"]
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test]
async fn a_workspace_source_without_a_skills_source_is_a_422_and_stores_no_session() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("treeless", json!({"workspace_source": {}}))
        .await;
    let r = app
        .http
        .post(app.url("/api/sessions"))
        .json(&json!({"agent_id": "treeless"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert!(body["detail"][0]["msg"]
        .as_str()
        .unwrap()
        .contains("has no skills_source"));
    let (_, list) = get(&app, "/api/sessions").await;
    assert_eq!(list.as_array().unwrap().len(), 0);
}
