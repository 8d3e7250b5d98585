//! Schedules: created, listed, paused and removed through the API with 422s that name the
//! field; fired once per due time with two server processes claiming the same schedules
//! (a new session per fire, its message the first prompt); a continued session gets a turn
//! per fire and a busy one skips it; missed due times after downtime are skipped or run once;
//! an agent's schedules are bounded, and an archived agent's wait.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::runs::{start_run, wait_for_run, TURN};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};

fn model() -> FakeModel {
    FakeModel::start(Script::new([
        Rule::when()
            .last_user_contains("slow")
            .reply_text("slow answer")
            .delay_ms(3_000),
        Rule::when().reply_text("scheduled answer"),
    ]))
}

async fn app_on(fake: &FakeModel, plane: &MemoryBackend) -> TestApp {
    TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(plane)
        .spawn()
        .await
}

async fn fires(app: &TestApp, agent: &str, id: &str) -> Vec<Value> {
    let (status, body) = app
        .get_json(&format!(
            "/api/agents/{agent}/schedules/{id}/fires?limit=1000"
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().clone()
}

#[tokio::test]
async fn a_schedule_is_created_listed_paused_and_removed_and_bad_ones_name_the_field() {
    let fake = model();
    let app = app_on(&fake, &MemoryBackend::new("schedules-crud")).await;
    app.create_agent("daily", json!({})).await;
    app.create_agent("other", json!({})).await;
    let theirs = app.create_session(json!({"agent_id": "other"})).await;
    let theirs = theirs["id"].as_str().unwrap();
    for (body, loc) in [
        (
            json!({"cron": "61 * * * *", "timezone": "UTC", "message": "m"}),
            "cron",
        ),
        (
            json!({"cron": "0 9 * * 1-5", "timezone": "Mars/Olympus", "message": "m"}),
            "timezone",
        ),
        (
            json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "  "}),
            "message",
        ),
        (
            json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m", "session": theirs}),
            "session",
        ),
        (
            json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m", "session": "nope"}),
            "session",
        ),
        (
            json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m", "budget": {"max_cost_usd": -1}}),
            "budget",
        ),
        (
            json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m", "missed": "sometimes"}),
            "missed",
        ),
    ] {
        let (status, got) = app
            .post_json("/api/agents/daily/schedules", body.clone())
            .await;
        assert_eq!(status, 422, "{body}: {got}");
        let locs = got["detail"].to_string();
        assert!(locs.contains(&format!("\"{loc}\"")), "{body}: {got}");
    }
    let (_, none) = app.get_json("/api/agents/daily/schedules").await;
    assert_eq!(none, json!([]), "nothing was created");

    let (status, s) = app
        .post_json(
            "/api/agents/daily/schedules",
            json!({"name": "standup", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris", "message": "What changed?"}),
        )
        .await;
    assert_eq!(status, 201, "{s}");
    assert_eq!(s["session"], "new");
    assert_eq!(s["missed"], "skip");
    assert_eq!(s["busy"], "skip");
    let next = time::OffsetDateTime::parse(
        s["next_fire_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let paris = next.to_offset(time::macros::offset!(+1)).hour() == 9
        || next.to_offset(time::macros::offset!(+2)).hour() == 9;
    assert!(paris, "09:00 in Paris: {next}");
    assert!(
        matches!(next.weekday().number_from_monday(), 1..=5),
        "{next}"
    );
    let id = s["id"].as_str().unwrap().to_owned();
    let path = format!("/api/agents/daily/schedules/{id}");

    let (_, paused) = app.patch_json(&path, json!({"paused": true})).await;
    assert_eq!(paused["paused"], true);
    assert!(paused["next_fire_at"].is_null(), "{paused}");
    let (_, resumed) = app.patch_json(&path, json!({"paused": false})).await;
    assert!(resumed["next_fire_at"].is_string(), "{resumed}");
    let (status, got) = app.patch_json(&path, json!({"cron": "bad"})).await;
    assert_eq!(status, 422, "{got}");
    let (_, list) = app.get_json("/api/agents/daily/schedules").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(
        list[0]["cron"], "0 9 * * 1-5",
        "a refused patch changes nothing"
    );

    let r = app.http.delete(app.url(&path)).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let (status, _) = app.get_json(&path).await;
    assert_eq!(status, 404);
    let (status, _) = app.get_json(&format!("{path}/fires")).await;
    assert_eq!(status, 404);

    let r = app
        .http
        .post(app.url("/api/agents/other/archive"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, got) = app
        .post_json(
            "/api/agents/other/schedules",
            json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m"}),
        )
        .await;
    assert_eq!(status, 422, "{got}");
    assert_eq!(got["detail"][0]["loc"], json!(["path", "ref"]));
}

#[tokio::test]
async fn each_due_time_fires_once_with_two_processes_a_new_session_each() {
    let fake = model();
    let plane = MemoryBackend::new("schedules-twice");
    let a = app_on(&fake, &plane).await;
    let b = TestApp::builder()
        .with_db(a.db.clone(), a.db_options.clone())
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&plane)
        .spawn()
        .await;
    a.create_agent("ticker", json!({})).await;
    let (status, s) = a
        .post_json(
            "/api/agents/ticker/schedules",
            json!({"cron": "* * * * * *", "timezone": "UTC", "message": "tick"}),
        )
        .await;
    assert_eq!(status, 201, "{s}");
    let id = s["id"].as_str().unwrap().to_owned();
    a.schedules.spawn_worker(a.shutdown.clone());
    b.schedules.spawn_worker(b.shutdown.clone());

    eventually("five fires", TURN, async || {
        let n = fires(&a, "ticker", &id).await.len();
        (n >= 5).then_some(())
    })
    .await;
    let (_, paused) = a
        .patch_json(
            &format!("/api/agents/ticker/schedules/{id}"),
            json!({"paused": true}),
        )
        .await;
    assert_eq!(paused["paused"], true);
    let fired = fires(&a, "ticker", &id).await;
    let mut due: Vec<&str> = fired
        .iter()
        .map(|f| f["due_at"].as_str().unwrap())
        .collect();
    due.sort_unstable();
    let n = due.len();
    due.dedup();
    assert_eq!(due.len(), n, "each due time once: {fired:?}");
    for f in &fired {
        assert_eq!(f["status"], "started", "{f}");
    }
    // One session per fire, and no more: its message the first prompt, answered.
    let (_, sessions) = a.get_json("/api/sessions?agent_id=ticker&limit=1000").await;
    let sessions = sessions.as_array().unwrap().clone();
    assert_eq!(sessions.len(), n, "{sessions:?}");
    let mut ids: Vec<&str> = fired
        .iter()
        .map(|f| f["session_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);
    for s in &sessions {
        assert_eq!(s["metadata"]["schedule_id"], id.as_str(), "{s}");
    }
    let first = fired.last().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    eventually("the first fire's turn to end", TURN, async || {
        let evs = a.events(&first).await;
        evs.iter()
            .find(|e| e["type"] == "session.status_idle")
            .map(|e| e["payload"]["final_output"].clone())
    })
    .await;
    let (_, page) = a
        .get_json(&format!("/api/agents/ticker/schedules/{id}/fires?limit=1"))
        .await;
    assert!(
        page[0]["run_id"].is_string(),
        "a started session's run: {page}"
    );
}

#[tokio::test]
async fn a_continued_session_gets_a_turn_per_fire_and_a_busy_one_skips_it() {
    let fake = model();
    let app = app_on(&fake, &MemoryBackend::new("schedules-continue")).await;
    app.create_agent("keeper", json!({})).await;
    let sid = app.boot_session(json!({"agent_id": "keeper"})).await;
    // A slow turn keeps the session busy while the schedule comes due.
    let slow = start_run(&app, &sid, "slow", Value::Null).await;
    let (status, s) = app
        .post_json(
            "/api/agents/keeper/schedules",
            json!({"cron": "* * * * * *", "timezone": "UTC", "message": "again", "session": sid}),
        )
        .await;
    assert_eq!(status, 201, "{s}");
    assert_eq!(s["session"], sid.as_str());
    let id = s["id"].as_str().unwrap().to_owned();
    app.schedules.spawn_worker(app.shutdown.clone());
    let skipped = eventually("a fire skipped while busy", TURN, async || {
        let f = fires(&app, "keeper", &id).await;
        f.into_iter().find(|f| f["status"] == "skipped")
    })
    .await;
    assert_eq!(skipped["detail"], "the session was busy with a turn");
    wait_for_run(&app, &sid, &slow).await;
    let started = eventually("a fire that started a turn", TURN, async || {
        let f = fires(&app, "keeper", &id).await;
        f.into_iter().find(|f| f["status"] == "started")
    })
    .await;
    let run = started["run_id"].as_str().unwrap().to_owned();
    let evs = wait_for_run(&app, &sid, &run).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "scheduled answer"
    );
    assert!(
        evs.iter()
            .any(|e| e["type"] == "user.message" && e["payload"]["text"] == "again"),
        "{evs:?}"
    );
}

#[tokio::test]
async fn missed_due_times_after_downtime_are_skipped_or_run_once() {
    let fake = model();
    let app = app_on(&fake, &MemoryBackend::new("schedules-missed")).await;
    app.create_agent("late", json!({})).await;
    let mut ids = Vec::new();
    for missed in ["skip", "run_once"] {
        let (status, s) = app
            .post_json(
                "/api/agents/late/schedules",
                json!({"cron": "0 * * * *", "timezone": "UTC", "message": "hourly", "missed": missed}),
            )
            .await;
        assert_eq!(status, 201, "{s}");
        ids.push(s["id"].as_str().unwrap().to_owned());
    }
    // As if no server had run since a due time between hours, two and a half hours before
    // this hour began: the three hours' tops since then are due too, 4 in all, whatever the
    // minute this runs at (an offset from now would count one more in an hour's first
    // minutes).
    sqlx::query(
        "update schedules set next_fire_at = date_trunc('hour', now()) - interval '2 hours 30 minutes'",
    )
        .execute(&app.db)
        .await
        .unwrap();
    app.schedules.fire_due().await.unwrap();
    let skip = fires(&app, "late", &ids[0]).await;
    assert_eq!(skip.len(), 1, "{skip:?}");
    assert_eq!(skip[0]["status"], "skipped");
    assert!(
        skip[0]["detail"]
            .as_str()
            .unwrap()
            .contains("4 due time(s) skipped"),
        "{skip:?}"
    );
    let once = fires(&app, "late", &ids[1]).await;
    assert_eq!(once.len(), 1, "{once:?}");
    assert_eq!(once[0]["status"], "started");
    for id in &ids {
        let (_, s) = app
            .get_json(&format!("/api/agents/late/schedules/{id}"))
            .await;
        let next = time::OffsetDateTime::parse(
            s["next_fire_at"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        assert!(
            next > time::OffsetDateTime::now_utc(),
            "the next due time is ahead: {s}"
        );
    }
}

#[tokio::test]
async fn a_fire_that_waits_for_a_busy_session_starts_once_it_is_idle() {
    let fake = model();
    let app = app_on(&fake, &MemoryBackend::new("schedules-wait")).await;
    app.create_agent("patient", json!({})).await;
    let sid = app.boot_session(json!({"agent_id": "patient"})).await;
    let slow = start_run(&app, &sid, "slow", Value::Null).await;
    // A waiting fire waits until the next due time: yearly, so that it is weeks away from
    // the moment made due below. (Every 30 s made that moment fall within a second of the
    // next due time whenever the test ran just before :00 or :30, and the fire was skipped.)
    let (status, s) = app
        .post_json(
            "/api/agents/patient/schedules",
            json!({"cron": "0 0 0 1 1 *", "timezone": "UTC", "message": "when free",
                   "session": sid, "busy": "wait"}),
        )
        .await;
    assert_eq!(status, 201, "{s}");
    let id = s["id"].as_str().unwrap().to_owned();
    // Due now: as if its time had just come while the slow turn runs.
    sqlx::query("update schedules set next_fire_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    app.schedules.spawn_worker(app.shutdown.clone());
    let started = eventually(
        "the fire to start once the session is idle",
        TURN,
        async || fires(&app, "patient", &id).await.into_iter().next(),
    )
    .await;
    assert_eq!(
        started["status"], "started",
        "it waited rather than skipping: {started}"
    );
    let evs = wait_for_run(&app, &sid, &slow).await;
    let slow_end = evs.last().unwrap()["seq"].as_i64().unwrap();
    let run = started["run_id"].as_str().unwrap().to_owned();
    let evs = wait_for_run(&app, &sid, &run).await;
    assert!(
        evs[0]["seq"].as_i64().unwrap() > slow_end,
        "after the busy turn ended"
    );
    assert_eq!(fires(&app, "patient", &id).await.len(), 1);
}

#[tokio::test]
async fn an_agent_has_at_most_its_schedules_and_an_archived_ones_wait() {
    use sandbox_agents_domain::schedule::MAX_SCHEDULES_PER_AGENT as MAX;
    let fake = model();
    let app = app_on(&fake, &MemoryBackend::new("schedules-bounds")).await;
    app.create_agent("crowded", json!({})).await;
    // Creates racing for the last places: the count holds, since creates of one agent take
    // turns on its row.
    let body = json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m", "paused": true});
    let answers = futures::future::join_all(
        (0..MAX + 5).map(|_| app.post_json("/api/agents/crowded/schedules", body.clone())),
    )
    .await;
    assert_eq!(answers.iter().filter(|(s, _)| *s == 201).count(), MAX);
    for (status, b) in answers.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(*status, 422, "{b}");
        assert_eq!(b["detail"][0]["loc"], json!(["path", "ref"]), "{b}");
        let msg = b["detail"][0]["msg"].as_str().unwrap();
        assert!(msg.contains("the most an agent has"), "{msg}");
    }
    let (_, list) = app.get_json("/api/agents/crowded/schedules").await;
    assert_eq!(list.as_array().unwrap().len(), MAX);

    // An archived agent's due schedule waits; unarchived, it fires.
    app.create_agent("shelved", json!({})).await;
    let (status, s) = app
        .post_json(
            "/api/agents/shelved/schedules",
            json!({"cron": "0 * * * *", "timezone": "UTC", "message": "hourly"}),
        )
        .await;
    assert_eq!(status, 201, "{s}");
    let id = s["id"].as_str().unwrap().to_owned();
    sqlx::query(
        "update schedules set next_fire_at = now() - interval '10 seconds' where id = $1::uuid",
    )
    .bind(&id)
    .execute(&app.db)
    .await
    .unwrap();
    let (status, _) = app
        .post_json("/api/agents/shelved/archive", json!({}))
        .await;
    assert_eq!(status, 200);
    app.schedules.fire_due().await.unwrap();
    assert_eq!(fires(&app, "shelved", &id).await, Vec::<Value>::new());
    let (status, _) = app
        .post_json("/api/agents/shelved/unarchive", json!({}))
        .await;
    assert_eq!(status, 200);
    app.schedules.fire_due().await.unwrap();
    let fired = fires(&app, "shelved", &id).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["status"], "started", "{fired:?}");
}
