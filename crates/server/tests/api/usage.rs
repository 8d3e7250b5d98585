//! `GET /api/usage`: real turns against the scripted fake model, summed by agent, model and
//! day in the database, within the window asked for and the project asked about.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{start_run, test_agent, wait_for_run};
use sandbox_agents_testkit::{TestApp, DEFAULT_MODEL};
use serde_json::{json, Value};

async fn usage(app: &TestApp, query: &str) -> (u16, Value) {
    let r = app
        .http
        .get(app.url(&format!("/api/usage{query}")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn tokens(g: &Value) -> (i64, i64, i64, i64, i64) {
    let n = |k: &str| g[k].as_i64().unwrap_or_else(|| panic!("{k} in {g}"));
    (
        n("input_tokens"),
        n("output_tokens"),
        n("total_tokens"),
        n("requests"),
        n("runs"),
    )
}

#[tokio::test]
async fn usage_is_summed_by_agent_model_and_day_within_the_window_and_the_project() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_user_contains("alpha")
            .reply_text("a")
            .usage(10, 5),
        Rule::when()
            .last_user_contains("beta")
            .reply_text("b")
            .usage(20, 7),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let a = app.running_session("alpha", test_agent()).await;
    let b = app.running_session("beta", test_agent()).await;
    for (session, prompt) in [(&a, "alpha 1"), (&b, "beta 1"), (&b, "beta 2")] {
        let run = start_run(&app, session, prompt, Value::Null).await;
        wait_for_run(&app, session, &run).await;
    }

    let (s, r) = usage(&app, "?group_by=agent").await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["group_by"], "agent");
    let groups = r["groups"].as_array().unwrap();
    let keys: Vec<&str> = groups.iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["beta", "alpha"], "most tokens first: {r}");
    assert_eq!(tokens(&groups[0]), (40, 14, 54, 2, 2));
    assert_eq!(tokens(&groups[1]), (10, 5, 15, 1, 1));
    for g in groups {
        assert!(g["active_seconds"].as_f64().unwrap() > 0.0, "{g}");
        assert!(g["sandbox_seconds"].as_f64().unwrap() > 0.0, "{g}");
    }
    assert_eq!(tokens(&r["total"]), (50, 19, 69, 3, 3));

    let (_, r) = usage(&app, "?group_by=model").await;
    assert_eq!(r["groups"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["groups"][0]["key"], DEFAULT_MODEL);
    assert_eq!(tokens(&r["groups"][0]), (50, 19, 69, 3, 3));
    assert!(r["groups"][0]["sandbox_seconds"].as_f64().unwrap() > 0.0);

    // By day (the default), on the UTC day the turns started.
    let (_, r) = usage(&app, "").await;
    assert_eq!(r["group_by"], "day");
    let day = &app.session(&a).await["runs"][0]["created_at"]
        .as_str()
        .unwrap()[..10]
        .to_owned();
    assert_eq!(r["groups"][0]["key"], day.as_str(), "{r}");
    assert_eq!(tokens(&r["total"]), (50, 19, 69, 3, 3));
    let sandbox = r["total"]["sandbox_seconds"].as_f64().unwrap();
    assert!(sandbox > 0.0);
    let from = time::OffsetDateTime::parse(
        r["from"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let to = time::OffsetDateTime::parse(
        r["to"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(to - from, time::Duration::days(30));

    // A window after all of it holds nothing: no turn started then, no sandbox was up.
    let rfc3339 = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let now = time::OffsetDateTime::now_utc();
    let later = rfc3339(now + time::Duration::hours(1));
    let end = rfc3339(now + time::Duration::hours(3));
    let (s, r) = usage(&app, &format!("?from={}", later.replace('+', "%2B"))).await;
    assert_eq!(s, 422, "from after the default to: {r}");
    let (s, r) = usage(&app, &format!("?from={later}&to={end}&group_by=agent")).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["groups"], json!([]));
    assert_eq!(tokens(&r["total"]), (0, 0, 0, 0, 0));

    // Another project's usage is its own.
    let p = app
        .http
        .post(app.url("/api/projects"))
        .json(&json!({"name": "Elsewhere", "slug": "elsewhere", "description": ""}))
        .send()
        .await
        .unwrap();
    assert_eq!(p.status(), 201);
    let r: Value = app
        .http
        .get(app.url("/api/usage?group_by=agent"))
        .header("x-project", "elsewhere")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["groups"], json!([]), "{r}");
}

#[tokio::test]
async fn bad_parameters_are_422s_that_name_each_one() {
    let app = sandbox_agents_testkit::TestApp::builder().spawn().await;
    for (query, fields) in [
        ("?group_by=week", vec!["group_by"]),
        ("?from=yesterday&to=2026-13-01", vec!["from", "to"]),
        (
            "?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z",
            vec!["from"],
        ),
        (
            "?from=2020-01-01T00:00:00Z&to=2026-12-01T00:00:00Z",
            vec!["from"],
        ),
    ] {
        let (s, r) = usage(&app, query).await;
        assert_eq!(s, 422, "{query}: {r}");
        let got: Vec<&str> = r["detail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert_eq!(e["loc"][0], "query");
                assert!(!e["msg"].as_str().unwrap().is_empty());
                e["loc"][1].as_str().unwrap()
            })
            .collect();
        assert_eq!(got, fields, "{query}");
    }
    // A `+` that the query string turned into a space is still an offset.
    let (s, r) = usage(
        &app,
        "?from=2026-11-01T00:00:00+02:00&to=2026-11-02T00:00:00%2B02:00",
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["from"], "2026-10-31T22:00:00Z");
}

#[tokio::test]
async fn plain_dates_are_utc_days_and_to_includes_its_whole_day() {
    // What the UI's date pickers send: the 5th is in the window, so it ends on the 6th.
    let app = sandbox_agents_testkit::TestApp::builder().spawn().await;
    let (s, r) = usage(&app, "?from=2026-12-01&to=2026-12-05&group_by=day").await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["from"], "2026-12-01T00:00:00Z");
    assert_eq!(r["to"], "2026-12-06T00:00:00Z");
    // A single day is a day's window; an RFC 3339 `to` is still the instant, exclusive.
    let (s, r) = usage(&app, "?from=2026-12-05&to=2026-12-05").await;
    assert_eq!((s, &r["to"]), (200, &json!("2026-12-06T00:00:00Z")), "{r}");
    let (s, r) = usage(&app, "?from=2026-12-01&to=2026-12-05T00:00:00Z").await;
    assert_eq!((s, &r["to"]), (200, &json!("2026-12-05T00:00:00Z")), "{r}");
    // Not a day of the calendar: still a 422 naming the parameter.
    let (s, r) = usage(&app, "?from=2026-02-30").await;
    assert_eq!(s, 422, "{r}");
    assert_eq!(r["detail"][0]["loc"], json!(["query", "from"]));
}
