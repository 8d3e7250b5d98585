//! What model calls cost: the provider's figure, else the catalogue's per-token prices, else
//! unpriced and counted as such; on runs, sessions and `GET /api/usage` (with `agent`).

use sandbox_agents_fake_model::{FakeModel, ModelEntry, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::{TestApp, DEFAULT_MODEL};
use serde_json::{json, Value};

/// Per-token prices of the default model in the fake's catalogue.
const INPUT: f64 = 2e-6;
const OUTPUT: f64 = 10e-6;

fn close(got: &Value, want: f64) -> bool {
    got.as_f64().is_some_and(|g| (g - want).abs() < 1e-9)
}

async fn get(app: &TestApp, path: &str) -> (u16, Value) {
    let r = app.http.get(app.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn calls_are_priced_by_the_provider_else_the_catalogue_else_counted_unpriced() {
    let fake = FakeModel::start(
        // Rules match in order: "unpriced" before "priced", which it contains.
        Script::new([
            Rule::when()
                .last_user_contains("reported")
                .reply_text("r")
                .usage_costing(100, 10, 0.5),
            Rule::when()
                .last_user_contains("unpriced")
                .reply_text("u")
                .usage(10, 5),
            Rule::when()
                .last_user_contains("priced")
                .reply_text("p")
                .usage(1000, 100),
        ])
        .model(ModelEntry::new(DEFAULT_MODEL).prices(INPUT, OUTPUT))
        .model(ModelEntry::new("no-prices")),
    );
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&MemoryBackend::new("cost-tests"))
        .spawn()
        .await;
    let a = app
        .running_session("alpha", json!({"instructions": "a"}))
        .await;
    let b = app
        .running_session("beta", json!({"instructions": "b", "model": "no-prices"}))
        .await;
    let mut runs = Vec::new();
    for (session, prompt) in [(&a, "priced"), (&a, "reported"), (&b, "unpriced")] {
        let run = start_run(&app, session, prompt, Value::Null).await;
        wait_for_run(&app, session, &run).await;
        let s = app.session(session).await;
        let found = s["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == run.as_str());
        runs.push(found.cloned().unwrap_or_else(|| panic!("run {run} in {s}")));
    }
    let catalogue = 1000.0 * INPUT + 100.0 * OUTPUT;
    assert!(
        close(&runs[0]["usage"]["cost_usd"], catalogue),
        "{}",
        runs[0]
    );
    assert_eq!(runs[0]["usage"]["unpriced_requests"], 0);
    assert!(
        close(&runs[1]["usage"]["cost_usd"], 0.5),
        "the provider's figure: {}",
        runs[1]
    );
    assert!(close(&runs[2]["usage"]["cost_usd"], 0.0), "{}", runs[2]);
    assert_eq!(runs[2]["usage"]["unpriced_requests"], 1, "{}", runs[2]);

    let sa = app.session(&a).await;
    assert!(close(&sa["usage"]["cost_usd"], catalogue + 0.5), "{sa}");
    assert!(close(
        &sa["usage"]["by_model"][DEFAULT_MODEL]["cost_usd"],
        catalogue + 0.5
    ));
    assert!(close(
        &sa["usage"]["by_agent"]["alpha"]["cost_usd"],
        catalogue + 0.5
    ));
    assert_eq!(sa["usage"]["unpriced_requests"], 0);
    let sb = app.session(&b).await;
    assert_eq!(sb["usage"]["unpriced_requests"], 1, "{sb}");

    let (s, r) = get(&app, "/api/usage?group_by=agent").await;
    assert_eq!(s, 200, "{r}");
    let group = |key: &str| {
        r["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} in {r}"))
    };
    assert!(close(&group("alpha")["cost_usd"], catalogue + 0.5), "{r}");
    assert_eq!(group("alpha")["unpriced_requests"], 0);
    assert!(close(&group("beta")["cost_usd"], 0.0));
    assert_eq!(group("beta")["unpriced_requests"], 1);
    assert!(close(&r["total"]["cost_usd"], catalogue + 0.5));
    assert_eq!(r["total"]["unpriced_requests"], 1);

    // One agent's usage, by slug or id; one the project lacks is a 422 at the parameter.
    let alpha_id = app.session(&a).await["agent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for agent in ["alpha", alpha_id.as_str()] {
        let (s, r) = get(&app, &format!("/api/usage?agent={agent}&group_by=model")).await;
        assert_eq!(s, 200, "{r}");
        assert_eq!(r["groups"].as_array().unwrap().len(), 1, "{r}");
        assert_eq!(r["groups"][0]["key"], DEFAULT_MODEL);
        assert!(close(&r["total"]["cost_usd"], catalogue + 0.5), "{r}");
        assert_eq!(r["total"]["runs"], 2);
    }
    let (s, r) = get(&app, "/api/usage?agent=nobody").await;
    assert_eq!(s, 422, "{r}");
    assert_eq!(r["detail"][0]["loc"], json!(["query", "agent"]));

    // A turn recorded before calls were priced has an unknown cost, not a zero one.
    sqlx::query(
        "update runs set usage = usage - 'cost_usd' - 'unpriced_requests' \
         where id = (select id from runs where session_id = $1::uuid order by created_at limit 1)",
    )
    .bind(&a)
    .execute(&app.db)
    .await
    .unwrap();
    let (_, r) = get(&app, "/api/usage?agent=alpha").await;
    assert!(close(&r["total"]["cost_usd"], 0.5), "{r}");
    assert_eq!(r["total"]["unpriced_requests"], 1, "{r}");
}
