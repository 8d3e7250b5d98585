//! A project's monthly spend limit (`PATCH /api/projects/{ref}` `limits.monthly_cost_usd`):
//! every model call counts, from every server process; at 80 % one warning, at the limit turns
//! in flight stop before their next call and no turn starts (402, nothing written).

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::runs::{send, start_run, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

/// A model that never stops calling the shell, each call reported at $0.10.
fn looping_model() -> FakeModel {
    FakeModel::start(Script::new([Rule::always()
        .reply_tool_call("shell", json!({"command": "echo again"}))
        .usage_costing(100, 10, 0.1)]))
}

async fn limit(app: &TestApp, body: Value) -> (u16, Value) {
    let r = app
        .http
        .patch(app.url("/api/projects/default"))
        .json(&json!({ "limits": body }))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn spend(app: &TestApp) -> Value {
    app.http
        .get(app.url("/api/projects/default/spend"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn turns_stop_at_the_monthly_limit_across_two_processes_and_none_starts_after_it() {
    let fake = looping_model();
    let plane = MemoryBackend::new("spend-limit-tests");
    let a = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&plane)
        .spawn()
        .await;
    let b = TestApp::builder()
        .with_db(a.db.clone(), a.db_options.clone())
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&plane)
        .spawn()
        .await;
    let (status, p) = limit(&a, json!({"monthly_cost_usd": 1.0})).await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["limits"], json!({"monthly_cost_usd": 1.0}));

    // One looping turn in each process at once.
    let x = a
        .running_session("x", json!({"instructions": "loop"}))
        .await;
    b.create_agent("y", json!({"instructions": "loop"})).await;
    let y = b.create_session(json!({"agent_id": "y"})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    b.wait_for_status(&y, "running", sandbox_agents_testkit::BOOT)
        .await;
    let rx = start_run(&a, &x, "go", json!(100)).await;
    let ry = start_run(&b, &y, "go", json!(100)).await;
    let (ex, ey) = tokio::join!(wait_for_run(&a, &x, &rx), wait_for_run(&b, &y, &ry));
    for evs in [&ex, &ey] {
        let p = &evs.last().unwrap()["payload"];
        assert_eq!(p["stop_reason"], "budget_reached", "{p}");
        assert_eq!(p["run_status"], "completed");
        assert_eq!(p["budget"]["limit"], "monthly_cost_usd");
        assert_eq!(p["budget"]["scope"], "project");
    }
    // Each turn checks the month as the database had it after its own last call: together
    // they pass the limit by at most the one call each had in flight.
    let s = spend(&a).await;
    let spent = s["cost_usd"].as_f64().unwrap();
    assert!((1.0..=1.2 + 1e-9).contains(&spent), "{s}");
    assert_eq!(
        s["requests"].as_i64().unwrap(),
        fake.chat_requests().len() as i64,
        "every call counted once: {s}"
    );
    assert!(s["warned_at"].is_string(), "{s}");
    let warnings: usize = [a.events(&x).await, b.events(&y).await]
        .iter()
        .flatten()
        .filter(|e| e["type"] == "session.spend_warning")
        .count();
    assert_eq!(
        warnings, 1,
        "one warning a month, whichever process crossed 80 %"
    );

    // Over the limit: no turn starts, in either process, and nothing is written.
    let before = a.events(&x).await.len();
    let r = send(&b, &x, json!({"prompt": "more"})).await;
    assert_eq!(r.status(), 402);
    let detail = r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("monthly_cost_usd") && detail.contains("$1"),
        "{detail}"
    );
    assert_eq!(a.events(&x).await.len(), before, "nothing written");
    let r = a
        .http
        .post(a.url("/api/sessions"))
        .json(&json!({"agent_id": "x", "prompt": "start working"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        402,
        "a session with a first prompt is a turn too"
    );
    let sessions: Value = a
        .http
        .get(a.url("/api/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sessions.as_array().map(Vec::len),
        Some(2),
        "nothing created: {sessions}"
    );

    // Raised, turns start again.
    let (status, _) = limit(&b, json!({"monthly_cost_usd": 100.0})).await;
    assert_eq!(status, 200);
    let r = send(&a, &x, json!({"prompt": "more", "max_turns": 1})).await;
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn limits_are_checked_and_only_an_operator_sets_them() {
    let app = TestApp::builder().spawn().await;
    for (body, field) in [
        (json!({"monthly_cost_usd": -1}), "monthly_cost_usd"),
        (json!({"monthly_cost_usd": 1e9}), "monthly_cost_usd"),
        (json!({"max_sandboxes": 0}), "max_sandboxes"),
        (json!({"max_runs": "two"}), "max_runs"),
        (
            json!({"requests_per_minute": 2000000}),
            "requests_per_minute",
        ),
    ] {
        let (status, v) = limit(&app, body.clone()).await;
        assert_eq!(status, 422, "{body}: {v}");
        assert_eq!(
            v["detail"][0]["loc"],
            json!(["body", "limits", field]),
            "{v}"
        );
    }
    let (status, v) = limit(&app, json!({"max_dollars": 1})).await;
    assert_eq!(status, 422, "an unknown limit: {v}");
    let (status, v) = limit(&app, json!(null)).await;
    assert_eq!(status, 422, "limits is not null: {v}");
    // An object, never the fields as an array (serde's derived parsing would take this as
    // "no limits"; the API fuzz sent it).
    for body in [json!([null, null]), json!([]), json!([5.0])] {
        let (status, v) = limit(&app, body.clone()).await;
        assert_eq!(status, 422, "{body}: {v}");
        assert_eq!(v["detail"][0]["loc"], json!(["body", "limits"]), "{v}");
    }
    let s = spend(&app).await;
    assert_eq!(s["limits"], json!({}), "nothing changed: {s}");
    assert_eq!(
        (s["cost_usd"].as_f64(), s["requests"].as_i64()),
        (Some(0.0), Some(0))
    );
    assert!(s["month"].as_str().unwrap().len() == 7, "{s}");
}

#[tokio::test]
async fn a_project_s_own_admin_may_rename_it_but_not_lift_its_limits() {
    use reqwest::Method;
    use sandbox_agents_testkit::auth::{as_person, call, signed_in_person};
    const TOKEN: &str = "spend-limits-token-0123456789abcdef";
    let app = TestApp::builder()
        .with_auth(sandbox_agents_api::auth::Auth::new(Some(TOKEN)))
        .spawn()
        .await;
    let admin = signed_in_person(&app, TOKEN, "lead@example.com", false).await;
    let (s, p) = as_person(
        &app,
        Method::POST,
        "/api/projects",
        &admin,
        Some(json!({"name": "Team", "slug": "team", "description": ""})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    assert_eq!(p["role"], "admin");
    let (s, v) = as_person(
        &app,
        Method::PATCH,
        "/api/projects/team",
        &admin,
        Some(json!({"name": "Team A", "limits": {}})),
    )
    .await;
    assert_eq!(s, 403, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("operator"), "{v}");
    let (s, v) = as_person(
        &app,
        Method::PATCH,
        "/api/projects/team",
        &admin,
        Some(json!({"name": "Team A"})),
    )
    .await;
    assert_eq!((s.as_u16(), &v["name"]), (200, &json!("Team A")), "{v}");
    assert_eq!(v["limits"], json!({}), "the refused PATCH changed nothing");
    let (s, v) = call(
        &app,
        Method::PATCH,
        "/api/projects/team",
        Some(TOKEN),
        None,
        Some(json!({"limits": {"monthly_cost_usd": 25}})),
    )
    .await;
    assert_eq!(
        (s.as_u16(), &v["limits"]["monthly_cost_usd"]),
        (200, &json!(25.0)),
        "{v}"
    );
}
