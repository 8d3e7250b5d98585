//! Network policies as the API takes and shows them (issue 36): `network` on agents,
//! `config.network` on environments, a session's own policy at create and by PATCH, and the
//! layers a session copies when it is created. On the in-memory backend: none of this needs
//! a sandbox, and the egress proxy that enforces the layers is tested on its own.

use sandbox_agents_domain::network::{Egress, NetworkPolicy};
use sandbox_agents_domain::SessionId;
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_store::sessions;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

async fn app() -> TestApp {
    TestApp::builder()
        .with_memory_backend(&MemoryBackend::new("network-tests"))
        .spawn()
        .await
}

async fn send(app: &TestApp, method: &str, path: &str, body: Value) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let r = app.http.request(m, app.url(path)).json(&body).send().await;
    let r = r.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The `loc` of every error of a 422.
fn locs(body: &Value) -> Vec<Value> {
    body["detail"]
        .as_array()
        .unwrap_or_else(|| panic!("a 422 list: {body}"))
        .iter()
        .map(|e| e["loc"].clone())
        .collect()
}

fn allowlist(allow: &[&str]) -> Value {
    json!({"egress": "allowlist", "allow": allow, "presets": []})
}

fn open() -> Value {
    json!({"egress": "open", "allow": [], "presets": []})
}

#[tokio::test]
async fn an_agents_policy_defaults_to_open_round_trips_and_a_patch_replaces_it() {
    let app = app().await;
    let plain = app.create_agent("plain", json!({})).await;
    assert_eq!(plain["network"], open());

    let policy = json!({"egress": "allowlist", "allow": ["pypi.org", "*.pythonhosted.org",
        "github.com:443", "203.0.113.0/24"], "presets": ["package_managers"]});
    let made = app
        .create_agent("limited", json!({"network": policy}))
        .await;
    assert_eq!(made["network"], policy);
    assert_eq!(
        app.get_json("/api/agents/limited").await.1["network"],
        policy
    );

    let (s, patched) = send(
        &app,
        "PATCH",
        "/api/agents/limited",
        json!({"version": 1, "network": {"egress": "none"}}),
    )
    .await;
    assert_eq!(s, 200, "{patched}");
    let none = json!({"egress": "none", "allow": [], "presets": []});
    assert_eq!(patched["network"], none);
    assert_eq!(app.get_json("/api/agents/limited").await.1["network"], none);

    // A PATCH that leaves it out keeps it.
    let (s, renamed) = send(
        &app,
        "PATCH",
        "/api/agents/limited",
        json!({"version": 2, "name": "Renamed"}),
    )
    .await;
    assert_eq!((s, &renamed["network"]), (200, &none), "{renamed}");
}

#[tokio::test]
async fn a_bad_policy_is_a_422_at_its_field_and_null_is_refused() {
    let app = app().await;
    let cases = [
        (
            allowlist(&["ok.org", "bad host"]),
            json!(["body", "network", "allow", "1"]),
        ),
        (
            json!({"egress": "allowlist", "presets": ["nope"]}),
            json!(["body", "network", "presets"]),
        ),
        (
            json!({"egress": "open", "allow": ["pypi.org"]}),
            json!(["body", "network", "egress"]),
        ),
        (
            json!({"egress": "none", "presets": ["github"]}),
            json!(["body", "network", "egress"]),
        ),
        (Value::Null, json!(["body", "network"])),
    ];
    for (network, loc) in cases {
        let (s, body) = send(
            &app,
            "POST",
            "/api/agents",
            json!({"slug": "bad", "name": "bad", "network": network}),
        )
        .await;
        assert_eq!(s, 422, "{network}: {body}");
        assert_eq!(locs(&body), [loc], "{network}: {body}");
    }
    let (s, body) = send(
        &app,
        "POST",
        "/api/agents",
        json!({"slug": "bad", "name": "bad", "network": {"egress": "closed"}}),
    )
    .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(
        app.get_json("/api/agents/bad").await.0,
        404,
        "nothing stored"
    );

    app.create_agent("fine", json!({})).await;
    let (s, body) = send(
        &app,
        "PATCH",
        "/api/agents/fine",
        json!({"version": 1, "network": null}),
    )
    .await;
    assert_eq!((s, locs(&body)), (422, vec![json!(["body", "network"])]));
    let (s, body) = send(
        &app,
        "PATCH",
        "/api/agents/fine",
        json!({"version": 1, "network": allowlist(&["*.com"])}),
    )
    .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(locs(&body), [json!(["body", "network", "allow", "0"])]);
    assert_eq!(app.get_json("/api/agents/fine").await.1["version"], 1);

    let too_many: Vec<String> = (0..257).map(|i| format!("h{i}.example.org")).collect();
    let (s, body) = send(
        &app,
        "PATCH",
        "/api/agents/fine",
        json!({"version": 1, "network": {"egress": "allowlist", "allow": too_many}}),
    )
    .await;
    assert_eq!(
        (s, locs(&body)),
        (422, vec![json!(["body", "network", "allow"])])
    );
}

#[tokio::test]
async fn an_environments_config_network_round_trips_beside_networking_and_is_checked() {
    let app = app().await;
    let (s, plain) = send(&app, "POST", "/api/environments", json!({"name": "plain"})).await;
    assert_eq!(s, 201, "{plain}");
    assert_eq!(plain["config"]["network"], open());
    assert_eq!(
        plain["config"]["networking"],
        json!({"type": "unrestricted"})
    );

    let policy = json!({"egress": "allowlist", "allow": ["pypi.org"], "presets": ["github"]});
    let (s, env) = send(
        &app,
        "POST",
        "/api/environments",
        json!({"name": "narrow", "config": {"network": policy}}),
    )
    .await;
    assert_eq!((s, &env["config"]["network"]), (201, &policy), "{env}");
    assert_eq!(
        app.get_json("/api/environments/narrow").await.1["config"]["network"],
        policy
    );
    let (s, env) = send(
        &app,
        "PATCH",
        "/api/environments/narrow",
        json!({"config": {"network": {"egress": "none"}}}),
    )
    .await;
    assert_eq!(s, 200, "{env}");
    assert_eq!(env["config"]["network"]["egress"], "none");

    for (config, status, loc) in [
        (
            json!({"network": allowlist(&["good.org", "no such host"])}),
            422,
            Some(json!(["body", "config", "network", "allow", "1"])),
        ),
        (json!({"network": null}), 422, None),
        (json!({"networking": {"type": "limited"}}), 400, None),
    ] {
        let (s, body) = send(
            &app,
            "POST",
            "/api/environments",
            json!({"name": "refused", "config": config}),
        )
        .await;
        assert_eq!(s, status, "{config}: {body}");
        if let Some(loc) = loc {
            assert_eq!(locs(&body), [loc]);
        }
        if status == 400 {
            let detail = body["detail"].as_str().unwrap();
            assert!(
                detail.contains("config.network") && detail.contains("allowlist"),
                "the refusal says how to limit the network: {detail}"
            );
        }
    }
    assert_eq!(app.get_json("/api/environments/refused").await.0, 404);
}

/// An agent allowing two hosts, an environment allowing one of them: the session's layers.
async fn narrowing_setup(app: &TestApp) {
    app.create_agent(
        "narrowed",
        json!({"network": allowlist(&["a.example.org", "b.example.org"])}),
    )
    .await;
    let (s, env) = send(
        app,
        "POST",
        "/api/environments",
        json!({"name": "only-a", "config": {"network": allowlist(&["a.example.org"])}}),
    )
    .await;
    assert_eq!(s, 201, "{env}");
}

#[tokio::test]
async fn a_session_shows_every_layer_agent_environment_and_its_own_in_order() {
    let app = app().await;
    narrowing_setup(&app).await;
    let own = allowlist(&["a.example.org:443"]);
    let s = app
        .create_session(json!({"agent_id": "narrowed", "environment_id": "only-a", "network": own}))
        .await;
    let expected = json!([
        {"from": "agent", "policy": allowlist(&["a.example.org", "b.example.org"])},
        {"from": "environment", "policy": allowlist(&["a.example.org"])},
        {"from": "session", "policy": own},
    ]);
    assert_eq!(s["network"], own);
    assert_eq!(s["network_layers"], expected, "{s}");
    let id = s["id"].as_str().unwrap();
    let got = app.session(id).await;
    assert_eq!((&got["network"], &got["network_layers"]), (&own, &expected));
    let listed = app.get_json("/api/sessions").await.1;
    assert_eq!(listed[0]["network_layers"], expected, "{listed}");

    // Without an environment or a policy of its own: the agent's layer alone.
    let plain = app.create_session(json!({"agent_id": "narrowed"})).await;
    assert!(plain["network"].is_null(), "{plain}");
    assert_eq!(
        plain["network_layers"],
        json!([{"from": "agent", "policy": allowlist(&["a.example.org", "b.example.org"])}])
    );

    let (s, body) = send(
        &app,
        "POST",
        "/api/sessions",
        json!({"agent_id": "narrowed", "network": allowlist(&["bad host"])}),
    )
    .await;
    assert_eq!(
        (s, locs(&body)),
        (422, vec![json!(["body", "network", "allow", "0"])])
    );
}

#[tokio::test]
async fn a_patch_replaces_or_removes_the_sessions_own_layer_and_the_proxy_reads_it_at_once() {
    let app = app().await;
    narrowing_setup(&app).await;
    let id = app
        .boot_session(json!({"agent_id": "narrowed", "environment_id": "only-a"}))
        .await;
    let sandbox = app.session(&id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = SessionId::parse(&id).unwrap();
    // The policies the proxy gets for the sandbox, in order (their sources aside).
    let by_sandbox = async || {
        let found = sessions::network_layers_by_sandbox(&app.db, &sandbox)
            .await
            .unwrap()
            .expect("the running session holds its sandbox");
        (
            found.session,
            found
                .layers
                .into_iter()
                .map(|l| l.policy)
                .collect::<Vec<_>>(),
        )
    };
    let agent_policy = NetworkPolicy {
        egress: Egress::Allowlist,
        allow: vec!["a.example.org".into(), "b.example.org".into()],
        presets: vec![],
    };
    let env_policy = NetworkPolicy {
        allow: vec!["a.example.org".into()],
        ..agent_policy.clone()
    };
    assert_eq!(
        by_sandbox().await,
        (session, vec![agent_policy.clone(), env_policy.clone()])
    );

    let path = format!("/api/sessions/{id}");
    let (s, patched) = send(&app, "PATCH", &path, json!({"network": {"egress": "none"}})).await;
    assert_eq!(s, 200, "{patched}");
    let none = json!({"egress": "none", "allow": [], "presets": []});
    assert_eq!(patched["network"], none);
    assert_eq!(
        patched["network_layers"][2],
        json!({"from": "session", "policy": none})
    );
    assert_eq!(app.session(&id).await["network"], none);
    let none_policy = NetworkPolicy {
        egress: Egress::None,
        ..Default::default()
    };
    assert_eq!(
        by_sandbox().await.1,
        [agent_policy.clone(), env_policy.clone(), none_policy],
        "the next connection is decided by the new policy"
    );
    let layers = sessions::network_layers(&app.db, session).await.unwrap();
    assert_eq!(layers.unwrap().len(), 3);

    // Other fields leave it; a bad one is refused whole; null removes it.
    let (s, titled) = send(&app, "PATCH", &path, json!({"title": "renamed"})).await;
    assert_eq!((s, &titled["network"]), (200, &none), "{titled}");
    let (s, body) = send(
        &app,
        "PATCH",
        &path,
        json!({"title": "not kept", "network": allowlist(&["x.org:0"])}),
    )
    .await;
    assert_eq!(
        (s, locs(&body)),
        (422, vec![json!(["body", "network", "allow", "0"])])
    );
    assert_eq!(app.session(&id).await["title"], "renamed");
    let (s, removed) = send(&app, "PATCH", &path, json!({"network": null})).await;
    assert_eq!(s, 200, "{removed}");
    assert!(removed["network"].is_null(), "{removed}");
    let from: Vec<&Value> = removed["network_layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["from"])
        .collect();
    assert_eq!(from, [&json!("agent"), &json!("environment")]);
    assert_eq!(by_sandbox().await.1, [agent_policy, env_policy]);
    assert!(
        sessions::network_layers_by_sandbox(&app.db, "no-such-sandbox")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_agent_edited_afterwards_changes_new_sessions_not_existing_ones() {
    let app = app().await;
    app.create_agent(
        "edited",
        json!({"network": allowlist(&["old.example.org"])}),
    )
    .await;
    let before = app.create_session(json!({"agent_id": "edited"})).await;
    let (s, _) = send(
        &app,
        "PATCH",
        "/api/agents/edited",
        json!({"version": 1, "network": allowlist(&["new.example.org"])}),
    )
    .await;
    assert_eq!(s, 200);
    let kept = app.session(before["id"].as_str().unwrap()).await;
    assert_eq!(
        kept["network_layers"],
        json!([{"from": "agent", "policy": allowlist(&["old.example.org"])}])
    );
    let after = app.create_session(json!({"agent_id": "edited"})).await;
    assert_eq!(
        after["network_layers"],
        json!([{"from": "agent", "policy": allowlist(&["new.example.org"])}])
    );
}

#[tokio::test]
async fn a_session_from_before_policies_reads_as_open_and_takes_one_of_its_own() {
    let app = app().await;
    let agent = app.seed_agent("old").await;
    let id = app.seed_session(agent.id).await;
    sqlx::query("update sessions set network = null where id = $1")
        .bind(id.0)
        .execute(&app.db)
        .await
        .unwrap();
    let old = app.session(&id.to_string()).await;
    assert!(old["network"].is_null(), "{old}");
    assert_eq!(old["network_layers"], json!([]));

    let own = allowlist(&["only.example.org"]);
    let (s, patched) = send(
        &app,
        "PATCH",
        &format!("/api/sessions/{id}"),
        json!({"network": own}),
    )
    .await;
    assert_eq!(s, 200, "{patched}");
    assert_eq!(
        patched["network_layers"],
        json!([{"from": "session", "policy": own}])
    );
}
