//! The `python` capability on real sandboxes: a kernel kept across tool calls and turns, plots
//! saved as files, errors with their tracebacks, cells interrupted at their limit and by an
//! interrupt with the kernel's state kept, a restart after a stop said plainly, the journal
//! as an nbformat notebook, and the built-in `analysis` environment the sessions boot in.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// The first session of a deployment waits for the `analysis` environment's image build (pip
/// over the network; Docker's layer cache makes later deployments' builds quick).
const BUILD: Duration = Duration::from_secs(900);

/// A server whose runs go to `fake`, trusting the host's CA bundle for its image builds (this
/// network inspects TLS).
async fn python_app(fake: &FakeModel) -> TestApp {
    TestApp::builder()
        .with_config(|c| c.extra_ca_certs = Some("/etc/ssl/certs/ca-certificates.crt".into()))
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await
}

/// A running session of a `python` agent (created as `slug`), once its environment is built;
/// `extra` is merged into the create's body.
async fn analysis_session(app: &TestApp, slug: &str, extra: Value) -> String {
    app.create_agent(
        slug,
        json!({"instructions": "Analyse data.", "capabilities": ["python"]}),
    )
    .await;
    let mut body = json!({"agent_id": slug});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, s) = app.post_json("/api/sessions", body).await;
    assert_eq!(status, 202, "{s}");
    let id = s["id"].as_str().unwrap().to_owned();
    wait_running(app, &id).await;
    id
}

async fn wait_running(app: &TestApp, id: &str) {
    app.wait_for_status(id, "running", BUILD).await;
}

/// Runs one turn and returns what its tool calls answered.
async fn turn(app: &TestApp, id: &str, prompt: &str) -> Vec<String> {
    let run = start_run(app, id, prompt, Value::Null).await;
    let evs = wait_for_run(app, id, &run).await;
    assert_eq!(
        evs.last().unwrap()["type"],
        "session.status_idle",
        "{evs:#?}"
    );
    evs.iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .map(|e| e["payload"]["output"].as_str().unwrap().to_owned())
        .collect()
}

/// Each prompt word asks for one cell; a tool result gets a short answer.
fn script(cells: &[(&str, Value)]) -> Script {
    let mut rules = vec![Rule::when().last_message_role("tool").reply_text("done")];
    for (word, args) in cells {
        rules.push(
            Rule::when()
                .last_user_contains(*word)
                .reply_tool_call("python", args.clone()),
        );
    }
    Script::new(rules)
}

async fn notebook(app: &TestApp, id: &str) -> Value {
    let (status, nb) = app.get_json(&format!("/api/sessions/{id}/notebook")).await;
    assert_eq!(status, 200, "{nb}");
    nb
}

fn statuses(nb: &Value) -> Vec<&str> {
    nb["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["sandbox_agents"]["status"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_kernel_keeps_state_across_turns_saves_plots_and_reports_errors() {
    let fake = FakeModel::start(script(&[
        (
            "define",
            json!({"code": "import numpy as np\nx = np.int64(41)\nprint('defined', x)"}),
        ),
        ("use", json!({"code": "int(x) + 1"})),
        (
            "plot",
            json!({"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"}),
        ),
        ("fail", json!({"code": "1 / 0"})),
        ("recover", json!({"code": "print(int(x) * 2)"})),
    ]));
    let app = python_app(&fake).await;
    let id = analysis_session(&app, "analyst", json!({})).await;

    assert_eq!(turn(&app, &id, "define x").await, ["defined 41\n"]);
    assert_eq!(turn(&app, &id, "use x").await, ["42\n"]);
    let plotted = turn(&app, &id, "plot it").await;
    let saved = plotted[0]
        .lines()
        .find_map(|l| l.strip_prefix("[image saved: ")?.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no image named: {plotted:?}"))
        .to_owned();
    assert!(
        saved.starts_with("outputs/") && saved.ends_with(".png"),
        "{saved}"
    );
    let png = sandbox_agents_testkit::files::content_ok(&app, &id, &saved).await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the saved file is a PNG");
    let failed = turn(&app, &id, "fail now").await;
    assert!(
        failed[0].contains("ZeroDivisionError") && failed[0].contains("Traceback"),
        "{failed:?}"
    );
    assert!(!failed[0].contains('\u{1b}'), "colour codes are stripped");
    assert_eq!(turn(&app, &id, "recover").await, ["82\n"]);

    let nb = notebook(&app, &id).await;
    assert_eq!(
        (nb["nbformat"].as_u64(), nb["nbformat_minor"].as_u64()),
        (Some(4), Some(5))
    );
    assert_eq!(statuses(&nb), ["ok", "ok", "ok", "error", "ok"]);
    let plot_outputs = &nb["cells"][2]["outputs"];
    assert!(
        plot_outputs
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["output_type"] == "display_data" && o["data"]["image/png"].is_string()),
        "{plot_outputs}"
    );
    assert_eq!(nb["cells"][1]["outputs"][0]["data"]["text/plain"], "42");
    assert_eq!(
        nb["cells"][0]["source"],
        "import numpy as np\nx = np.int64(41)\nprint('defined', x)"
    );

    // The one built-in environment the sessions of python agents boot in.
    let (_, envs) = app.get_json("/api/environments").await;
    let names: Vec<&str> = envs
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["analysis"]);
    let second = analysis_session(&app, "second-analyst", json!({})).await;
    let (_, envs) = app.get_json("/api/environments").await;
    assert_eq!(envs.as_array().unwrap().len(), 1, "{envs}");
    app.delete_session(&second).await;
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_cell_is_interrupted_at_its_limit_and_by_an_interrupt_and_the_kernel_keeps_its_state() {
    let fake = FakeModel::start(script(&[
        ("define", json!({"code": "x = 41"})),
        (
            "slow",
            json!({"code": "import time\ntime.sleep(300)", "timeout": 2}),
        ),
        (
            "hang",
            json!({"code": "import time\nwhile True:\n    time.sleep(0.1)"}),
        ),
        ("use", json!({"code": "x + 1"})),
        ("die", json!({"code": "import os\nos._exit(1)"})),
    ]));
    let app = python_app(&fake).await;
    let id = analysis_session(&app, "analyst", json!({})).await;
    turn(&app, &id, "define x").await;

    let slow = turn(&app, &id, "slow cell").await;
    assert!(
        slow[0].contains("longer than 2 s and was interrupted")
            && slow[0].contains("KeyboardInterrupt"),
        "{slow:?}"
    );
    assert_eq!(
        turn(&app, &id, "use x").await,
        ["42\n"],
        "state kept after the limit"
    );

    let run = start_run(&app, &id, "hang forever", Value::Null).await;
    eventually("the cell to start", Duration::from_secs(60), async || {
        let started = app
            .events(&id)
            .await
            .iter()
            .any(|e| e["run_id"] == run.as_str() && e["type"] == "agent.tool_use");
        started.then_some(())
    })
    .await;
    app.interrupt(&id).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"], "cancelled");
    let t = std::time::Instant::now();
    assert_eq!(
        turn(&app, &id, "use x").await,
        ["42\n"],
        "state kept after the interrupt"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the kernel was free at once"
    );

    // A kernel that dies is reported; the next cell runs in a fresh one, and says so.
    let died = turn(&app, &id, "die now").await;
    assert!(died[0].contains("the Python kernel died"), "{died:?}");
    let after = turn(&app, &id, "use x again").await;
    assert!(
        after[0].starts_with("note: the Python kernel restarted") && after[0].contains("NameError"),
        "{after:?}"
    );

    let nb = notebook(&app, &id).await;
    assert_eq!(
        statuses(&nb),
        ["ok", "timeout", "ok", "interrupted", "ok", "died", "error"]
    );
    app.delete_session(&id).await;
}

#[tokio::test]
async fn after_a_stop_the_next_cell_says_the_kernel_restarted() {
    let fake = FakeModel::start(script(&[
        ("define", json!({"code": "x = 41"})),
        ("use", json!({"code": "x + 1"})),
        (
            "secret",
            json!({"code": "import os\nprint(os.environ['TOKEN'])"}),
        ),
    ]));
    let app = python_app(&fake).await;
    let (status, _) = app
        .post_json(
            "/api/secrets",
            json!({"name": "KERNEL_TOKEN", "value": "tok-kernel-0123456789"}),
        )
        .await;
    assert_eq!(status, 201);
    let id = analysis_session(
        &app,
        "analyst",
        json!({"secret_bindings": [{"secret": "KERNEL_TOKEN", "env": "TOKEN"}]}),
    )
    .await;
    turn(&app, &id, "define x").await;
    // A secret a cell prints is masked for the model and in the notebook alike.
    assert_eq!(turn(&app, &id, "print the secret").await, ["***\n"]);
    app.stop_session(&id).await;
    app.start_session(&id).await;
    wait_running(&app, &id).await;

    let after = turn(&app, &id, "use x").await;
    assert!(
        after[0].starts_with("note: the Python kernel restarted") && after[0].contains("NameError"),
        "{after:?}"
    );
    // The notebook of a stopped session still reads, with both kernels' cells.
    app.stop_session(&id).await;
    let nb = notebook(&app, &id).await;
    assert_eq!(statuses(&nb), ["ok", "ok", "error"]);
    assert_eq!(nb["cells"][1]["outputs"][0]["text"], "***\n");
    assert!(!nb.to_string().contains("tok-kernel-0123456789"));
    let epochs: Vec<&str> = nb["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["sandbox_agents"]["epoch"].as_str().unwrap())
        .collect();
    assert_eq!(epochs[0], epochs[1]);
    assert_ne!(epochs[1], epochs[2]);
    app.delete_session(&id).await;
}

#[tokio::test]
async fn an_environment_without_the_kernels_packages_is_named_and_the_notebook_needs_the_project() {
    let fake = FakeModel::start(script(&[("use", json!({"code": "1"}))]));
    let app = python_app(&fake).await;
    let (status, _) = app
        .post_json("/api/environments", json!({"name": "bare"}))
        .await;
    assert_eq!(status, 201);
    let id = app
        .running_session(
            "bare-analyst",
            json!({"instructions": "x", "capabilities": ["python"], "environment_id": "bare"}),
        )
        .await;
    let said = turn(&app, &id, "use it").await;
    assert!(
        said[0].contains("lacks the module 'ipykernel'") && said[0].contains("pip packages"),
        "{said:?}"
    );
    // No environment was made for it: it named its own.
    let (_, envs) = app.get_json("/api/environments").await;
    assert_eq!(envs.as_array().unwrap().len(), 1);
    // A client tool may not take the capability's tool name.
    let (status, _) = app
        .post_json(
            &format!("/api/sessions/{id}/messages"),
            json!({"prompt": "x", "max_turns": null, "client_tools": [{"name": "python"}]}),
        )
        .await;
    assert_eq!(status, 422);
    let (status, _) = app.get_json("/api/sessions/not-a-session/notebook").await;
    assert_eq!(status, 404);
    app.delete_session(&id).await;
}
