//! The chaos test (issue 17): two `sandbox-agents serve` processes, A and B, on one database
//! and one blob store; A is killed with SIGKILL and restarted on the same port again and again
//! (a fixed schedule, [`KILLS`]) while sessions boot, runs stream, deferrable client tool calls
//! wait on their answers and webhooks deliver. Every session runs rounds of a turn that calls
//! the `shell` sandbox tool, then a deferrable client tool (`approve`, answered through B as
//! soon as a reader sees the call), then streams its answer. Sessions are created, and
//! messages sent, through A and B alternately; a request A died under is looked up through
//! B once A is back, and sent again through B only if it did not happen. Afterwards:
//!
//! * no run is stuck: every session runs, is idle, waits on no call, and every run ended with
//!   exactly one terminal event, its last, which says the run's status (a run whose process
//!   died is failed by the recovery of the next process to start);
//! * a reader of each session's SSE stream, which goes through A and B in turn and resumes
//!   from the last seq it saw (`?after=` or `Last-Event-ID`) whenever its connection ends (A's
//!   death, or its own hang-up every few events), saw exactly the log's pages (`GET
//!   .../events`, through A and through B): no gap, no repeat, seqs strictly increasing;
//! * every event reached the webhook subscription (all types, all agents) at least once,
//!   signed with its secret, its body the logged event, and the outbox says delivered;
//! * the deployment's containers are exactly the sessions' own, and none is left once every
//!   session is deleted; both processes still shut down cleanly.
//!
//! What it found, and what keeps it honest: a boot of a session whose previous boot died with
//! its process must replace the container that boot left, even while Docker is still making
//! it (`sandbox::docker`: the name stays taken for a while after the removal); and a restart's
//! orphan sweep must not remove the container another process's boot has just recorded
//! (`sessions::reconciler`), which left a running session without its sandbox, then stopped.
//!
//! Bounded in time: the whole scenario runs under [`LIMIT`] (4 minutes) or fails, and each
//! wait has its own deadline; on a loaded 2-core machine it takes 45 to 80 seconds (A's
//! schedule is about 30 s of it; its restarts, boots and the settling after it the rest).

use futures::StreamExt;
use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::SandboxBackend;
use sandbox_agents_testkit::process::{Leftovers, ServerProcess};
use sandbox_agents_testkit::receiver::{Answer, Receiver};
use sandbox_agents_testkit::sse::take_frame;
use sandbox_agents_testkit::webhooks::verify;
use sandbox_agents_testkit::{
    database_url, eventually, fresh_named_database, test_image, test_sandboxd, BOOT,
};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Sessions, created through B and A alternately, one every [`STAGGER`], so that boots
/// happen all through A's deaths.
const SESSIONS: usize = 10;
const STAGGER: Duration = Duration::from_millis(700);
/// A's lives: how long it serves before the SIGKILL, then how long it stays down before its
/// restart (milliseconds). Fixed, so that a failure can be run again the same way. Some
/// lives are very short: A dies again while its start-up recovers the previous life's runs
/// and boots again the sessions that life left half-booted.
const KILLS: [(u64, u64); 20] = [
    (900, 0),
    (2_300, 400),
    (200, 0),
    (1_300, 0),
    (2_700, 300),
    (600, 0),
    (1_600, 0),
    (150, 200),
    (2_100, 500),
    (1_200, 0),
    (400, 0),
    (1_800, 0),
    (250, 300),
    (3_000, 0),
    (700, 200),
    (1_100, 0),
    (2_400, 0),
    (300, 0),
    (1_500, 600),
    (2_000, 0),
];
/// Runs per session (the first prompt's included): at least this many, more while A is
/// still being killed, at most [`MAX_ROUNDS`].
const MIN_ROUNDS: usize = 2;
const MAX_ROUNDS: usize = 8;
/// The most any run may take to end, a dead process's runs included (the next process's
/// start fails them).
const TURN: Duration = Duration::from_secs(90);
/// How long the webhook outbox has to deliver everything (an in-flight delivery of a killed
/// process is sent again once its lease, 2 × 1 s + 5 s, expires).
const DELIVER: Duration = Duration::from_secs(60);
/// The whole test.
const LIMIT: Duration = Duration::from_secs(240);

const AGENT: &str = "chaos";

fn prompt(session: usize, round: usize) -> String {
    format!("chaos job s{session} r{round}")
}

/// A turn: the shell tool, then the deferrable `approve`, then a streamed answer.
fn script() -> Script {
    Script::new([
        Rule::when()
            .last_message_role("tool")
            .last_tool_result_contains("approved ")
            .reply_text(
                "All done: the command ran, a person approved it, and this answer streams \
                 in many small pieces so that readers are cut off in the middle of it.",
            )
            .chunk_delay_ms(25),
        Rule::when()
            .last_message_role("tool")
            .last_tool_result_contains("chaos-exec-ok")
            .reply_tool_call("approve", json!({"what": "the result"}))
            .delay_ms(200),
        Rule::when()
            .last_message_role("user")
            .last_user_contains("chaos job")
            .reply_tool_call(
                "shell",
                json!({"command": "echo chaos-exec-ok && sleep 0.3"}),
            )
            .delay_ms(200),
    ])
}

/// The two processes' addresses, and the client every request of the test goes through.
#[derive(Clone)]
struct Ctx {
    http: reqwest::Client,
    /// A, killed and restarted on the same port.
    a: String,
    /// B, never killed.
    b: String,
    /// Answers given to deferrable calls.
    answered: Arc<AtomicUsize>,
    /// Titles of sessions whose creation through A lost its answer (A died under the
    /// request). The test looks such a session up once A is back and creates it through B
    /// when it is not there; but a commit the dead process had sent may land later still
    /// (seen on a machine whose disk was busy), and the API has no idempotency key, so such
    /// a title may end up with two sessions. Both are held to every guarantee all the same.
    ambiguous: Arc<std::sync::Mutex<BTreeSet<String>>>,
    /// What went wrong in the background (answering a call), checked at the end.
    problems: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Ctx {
    /// `POST`: `Err` when the connection could not be made (A is down) or broke (A died
    /// under the request).
    async fn post(
        &self,
        base: &str,
        path: &str,
        body: Value,
    ) -> Result<(u16, Value), reqwest::Error> {
        let r = self
            .http
            .post(format!("{base}{path}"))
            .json(&body)
            .send()
            .await?;
        let status = r.status().as_u16();
        let body = r.bytes().await?;
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    /// After a request to A failed: unless it was never sent (A was down), waits until A
    /// serves again, so that whatever the dead process committed is visible.
    async fn after_failure(&self, e: &reqwest::Error) {
        if !e.is_connect() {
            self.wait_for_a().await;
        }
    }

    /// `GET` through B, which is never killed, as JSON.
    async fn get_b(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.b))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path} through B: {e}"));
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.expect("JSON")
    }

    /// Waits until A serves again: a new process, the one a failed request went to is dead.
    async fn wait_for_a(&self) {
        let health = format!("{}/api/health", self.a);
        eventually("A to be back", Duration::from_secs(60), async || {
            let r = self.http.get(&health).send().await.ok()?;
            (r.status() == 200).then_some(())
        })
        .await;
    }

    async fn session(&self, id: &str) -> Value {
        self.get_b(&format!("/api/sessions/{id}")).await
    }

    /// Creates session `n` through B (even) or A (odd), with its first prompt.
    async fn create_session(&self, n: usize) -> String {
        let title = format!("chaos-{n}");
        let body = json!({"agent_id": AGENT, "title": title, "prompt": prompt(n, 0)});
        let first = if n.is_multiple_of(2) {
            &self.b
        } else {
            &self.a
        };
        match self.post(first, "/api/sessions", body.clone()).await {
            Ok((202, s)) => return s["id"].as_str().expect("an id").to_owned(),
            Ok((status, s)) => panic!("creating session {n}: {status} {s}"),
            Err(e) => {
                if !e.is_connect() {
                    self.ambiguous.lock().unwrap().insert(title.clone());
                }
                self.after_failure(&e).await
            }
        }
        let listed = self.get_b("/api/sessions?limit=100").await;
        if let Some(s) = listed
            .as_array()
            .expect("a list")
            .iter()
            .find(|s| s["title"] == title.as_str())
        {
            return s["id"].as_str().expect("an id").to_owned();
        }
        let (status, s) = self
            .post(&self.b, "/api/sessions", body)
            .await
            .expect("B answers");
        assert_eq!(status, 202, "creating session {n} through B: {s}");
        s["id"].as_str().expect("an id").to_owned()
    }

    /// The run of `prompt` in session `id`, if it started.
    async fn run_of(&self, id: &str, prompt: &str) -> Option<String> {
        let s = self.session(id).await;
        s["runs"]
            .as_array()?
            .iter()
            .find(|r| r["prompt"] == prompt)
            .map(|r| r["id"].as_str().expect("an id").to_owned())
    }

    /// Sends round `round` of session `n` through A or B (alternately); returns its run.
    async fn start_run(&self, id: &str, n: usize, round: usize) -> String {
        let prompt = prompt(n, round);
        let path = format!("/api/sessions/{id}/messages");
        let body = json!({"prompt": prompt});
        let first = if !(n + round).is_multiple_of(2) {
            &self.a
        } else {
            &self.b
        };
        match self.post(first, &path, body.clone()).await {
            Ok((202, run)) => return run["id"].as_str().expect("an id").to_owned(),
            Ok((status, r)) => panic!("sending {prompt}: {status} {r}"),
            Err(e) => self.after_failure(&e).await,
        }
        eventually(
            &format!("{prompt} to start"),
            TURN,
            async || -> Result<String, String> {
                if let Some(run) = self.run_of(id, &prompt).await {
                    return Ok(run);
                }
                match self.post(&self.b, &path, body.clone()).await {
                    Ok((202, run)) => Ok(run["id"].as_str().expect("an id").to_owned()),
                    // The dead process's run committed after all, and holds the session.
                    Ok((409, r)) => Err(format!("409 {r}")),
                    Ok((status, r)) => panic!("sending {prompt} through B: {status} {r}"),
                    Err(e) => panic!("B failed: {e}"),
                }
            },
        )
        .await
    }

    /// Waits (through B) until the run is no longer `running`; returns it.
    async fn wait_for_end(&self, id: &str, run: &str) -> Value {
        eventually(
            &format!("run {run} of session {id} to end"),
            TURN,
            async || {
                let s = self.session(id).await;
                let r = s["runs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["id"] == run)
                    .cloned();
                match r {
                    Some(r) if r["status"] != "running" => Ok(r),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await
    }

    /// Answers a deferrable call through B, as the person it waits on would. Runs in the
    /// background: what goes wrong goes to `problems`.
    async fn answer(&self, id: &str, call_id: &str) {
        let answered = self
            .post(
                &self.b,
                &format!("/api/sessions/{id}/tool-results"),
                json!({"call_id": call_id, "output": format!("approved {call_id}")}),
            )
            .await;
        match answered {
            Ok((status, _)) if (200..300).contains(&status) => {
                self.answered.fetch_add(1, Ordering::Relaxed);
            }
            // The run ended first (failed by the recovery, its calls cancelled), or the call
            // was answered already.
            Ok((404, _)) => {}
            other => self
                .problems
                .lock()
                .unwrap()
                .push(format!("answering {call_id} of {id}: {other:?}")),
        }
    }
}

/// What one resuming reader of a session's stream saw.
#[derive(Default)]
struct Seen {
    /// Stored events, in the order received.
    events: Vec<Value>,
    /// Ephemeral events (text deltas).
    deltas: usize,
    /// Connections opened (the first included).
    connects: usize,
    /// Connections that ended under it (A's death).
    cut: usize,
    /// What went wrong: a seq at or below the cursor, an `id:` that is not the seq, an answer
    /// other than a stream.
    problems: Vec<String>,
}

/// Reads session `id`'s stream until its cursor reaches the seq `until` is given, through A
/// and B in turn, resuming from the last seq seen after every disconnect. Deferrable calls
/// it sees are answered through B.
async fn read_stream(
    ctx: Ctx,
    id: String,
    n: usize,
    mut until: watch::Receiver<Option<i64>>,
) -> Seen {
    let mut seen = Seen::default();
    let mut cursor = 0i64;
    let reached = |until: &watch::Receiver<Option<i64>>, cursor: i64| {
        until.borrow().is_some_and(|last| cursor >= last)
    };
    let mut refused = 0usize;
    loop {
        if reached(&until, cursor) {
            return seen;
        }
        let base = if (seen.connects + n).is_multiple_of(2) {
            &ctx.a
        } else {
            &ctx.b
        };
        let url = format!("{base}/api/sessions/{id}/events/stream");
        // Resume by the query's cursor, or by `Last-Event-ID` as EventSource does.
        let req = if seen.connects.is_multiple_of(2) {
            ctx.http.get(url).query(&[("after", cursor)])
        } else {
            ctx.http
                .get(url)
                .header("Last-Event-ID", cursor.to_string())
        };
        seen.connects += 1;
        let resp = match req.send().await {
            Ok(r) if r.status() == 200 => r,
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                seen.problems
                    .push(format!("{base} answered the stream with {status}: {body}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(_) => {
                // A is down: the next try goes to B. Both refusing would be odd; pace it.
                refused += 1;
                if refused.is_multiple_of(2) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                continue;
            }
        };
        refused = 0;
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut here = 0;
        // Hang up on our own after a few events, as a client whose network drops does.
        let hang_up_after = 4 + n;
        'connection: loop {
            let chunk = tokio::select! {
                c = body.next() => c,
                changed = until.changed() => {
                    if changed.is_err() || reached(&until, cursor) {
                        return seen;
                    }
                    continue 'connection;
                }
            };
            match chunk {
                Some(Ok(bytes)) => buf.extend_from_slice(&bytes),
                // The process died under the stream (a stream never ends on its own).
                Some(Err(_)) | None => {
                    seen.cut += 1;
                    break 'connection;
                }
            }
            while let Some(frame) = take_frame(&mut buf) {
                // Comments (`: ping`) carry no data.
                let (frame_id, Some(data)) = (frame.id, frame.data) else {
                    continue;
                };
                let e: Value = serde_json::from_str(&data).expect("an event");
                let seq = e["seq"].as_i64().expect("a seq");
                if seq == 0 {
                    seen.deltas += 1;
                    continue;
                }
                if frame_id.as_deref() != Some(seq.to_string().as_str()) {
                    seen.problems
                        .push(format!("event {seq} came with id {frame_id:?}"));
                }
                if seq <= cursor {
                    seen.problems
                        .push(format!("event {seq} ({}) came after {cursor}", e["type"]));
                    continue;
                }
                cursor = seq;
                if e["type"] == "agent.client_tool_call" && e["payload"]["deferrable"] == true {
                    let call_id = e["payload"]["call_id"]
                        .as_str()
                        .expect("a call id")
                        .to_owned();
                    let (ctx, id) = (ctx.clone(), id.clone());
                    tokio::spawn(async move { ctx.answer(&id, &call_id).await });
                }
                seen.events.push(e);
                here += 1;
                if reached(&until, cursor) {
                    return seen;
                }
            }
            if here >= hang_up_after {
                break 'connection;
            }
        }
    }
}

/// Every page of the log, `limit` events at a time.
async fn pages(ctx: &Ctx, base: &str, id: &str) -> Vec<Value> {
    let mut all: Vec<Value> = Vec::new();
    loop {
        let after = all.last().map_or(0, |e| e["seq"].as_i64().expect("a seq"));
        let r = ctx
            .http
            .get(format!("{base}/api/sessions/{id}/events"))
            .query(&[("after", after), ("limit", 50)])
            .send()
            .await
            .expect("a page");
        assert_eq!(r.status(), 200);
        let page: Vec<Value> = r.json().await.expect("a page");
        let end = page.len() < 50;
        all.extend(page);
        if end {
            return all;
        }
    }
}

fn is_terminal(e: &Value) -> bool {
    e["type"] == "session.status_error"
        || (e["type"] == "session.status_idle" && e["payload"]["stop_reason"] != "requires_action")
}

/// Drives session `n`: creates it, then runs rounds until A's chaos is over (and at least
/// [`MIN_ROUNDS`]), each to its end. Returns the session's id, its reader and the reader's
/// stop signal.
async fn drive(
    ctx: Ctx,
    n: usize,
    chaos_over: watch::Receiver<bool>,
) -> (
    String,
    tokio::task::JoinHandle<Seen>,
    watch::Sender<Option<i64>>,
) {
    tokio::time::sleep(STAGGER * n as u32).await;
    let id = ctx.create_session(n).await;
    let (until, until_rx) = watch::channel(None);
    let reader = tokio::spawn(read_stream(ctx.clone(), id.clone(), n, until_rx));
    // The first prompt's run starts with the boot, whichever process ends up doing it.
    let first = eventually(
        &format!("session {n} to boot and start its first run"),
        BOOT * 2,
        async || {
            let s = ctx.session(&id).await;
            assert_ne!(s["status"], "error", "session {n} failed: {}", s["error"]);
            s["runs"][0]["id"]
                .as_str()
                .map(str::to_owned)
                .ok_or(format!("{} {}", s["status"], s["activity"]))
        },
    )
    .await;
    ctx.wait_for_end(&id, &first).await;
    for round in 1..MAX_ROUNDS {
        if round >= MIN_ROUNDS && *chaos_over.borrow() {
            break;
        }
        let run = ctx.start_run(&id, n, round).await;
        ctx.wait_for_end(&id, &run).await;
    }
    (id, reader, until)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_one_of_two_processes_loses_duplicates_and_leaks_nothing() {
    let started = Instant::now();
    tokio::time::timeout(LIMIT, scenario())
        .await
        .unwrap_or_else(|_| panic!("the chaos test did not finish within {LIMIT:?}"));
    eprintln!("chaos: {:.1} s in all", started.elapsed().as_secs_f64());
}

async fn scenario() {
    let (db, _options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    let deployment = sandbox_agents_store::deployment::id(&db).await.unwrap();
    let fake = FakeModel::start(script());
    let receiver = Receiver::start(Answer::Ok).await;
    // One blob store for both processes, as one deployment's processes share theirs.
    let shared = std::env::temp_dir().join(format!("sa-chaos-{}", uuid::Uuid::new_v4().simple()));
    let _leftovers = Leftovers {
        deployment: deployment.clone(),
        dir: shared.clone(),
    };
    std::fs::create_dir_all(shared.join("blobs")).unwrap();
    let blob_url = format!("file://{}", shared.join("blobs").display());
    let model = fake.root_url();
    let sandboxd = test_sandboxd().display().to_string();
    let image = test_image();
    let env = [
        ("SANDBOX_AGENTS_BLOB_URL", blob_url.as_str()),
        ("SANDBOX_AGENTS_IMAGE", image.as_str()),
        ("SANDBOX_AGENTS_SANDBOXD_BIN", sandboxd.as_str()),
        ("LITELLM_PROXY_API_BASE", model.as_str()),
        ("LITELLM_PROXY_API_KEY", "test-key"),
        ("SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("SANDBOX_AGENTS_WEBHOOK_RETRY_BASE_SECONDS", "0.2"),
        ("SANDBOX_AGENTS_WEBHOOK_RETRY_MAX_SECONDS", "0.5"),
        ("SANDBOX_AGENTS_WEBHOOK_MAX_ATTEMPTS", "100"),
        ("SANDBOX_AGENTS_WEBHOOK_TIMEOUT_SECONDS", "1"),
        // The test polls (as one address, in open mode) far more than a client would.
        ("SANDBOX_AGENTS_RATE_LIMIT_PER_MINUTE", "0"),
    ];
    let (mut a, b) = tokio::join!(
        ServerProcess::start(&url, &env),
        ServerProcess::start(&url, &env)
    );
    let ctx = Ctx {
        // No connection is kept: a request to A after its restart never meets the dead
        // process's socket, so a failed request means A died under it.
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap(),
        a: a.base.clone(),
        b: b.base.clone(),
        answered: Arc::default(),
        ambiguous: Arc::default(),
        problems: Arc::default(),
    };
    let (status, hook) = ctx
        .post(
            &ctx.b,
            "/api/webhooks",
            json!({"name": "chaos", "url": receiver.url, "agent_id": null, "active": true}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{hook}");
    let secret = hook["secret"].as_str().unwrap().to_owned();
    let (status, agent) = ctx
        .post(
            &ctx.a,
            "/api/agents",
            json!({"slug": AGENT, "name": "Chaos", "model": "fake-model",
                   "instructions": "Run the command, ask for approval, answer.",
                   "client_tools": [{"name": "approve", "description": "Ask a person.",
                                     "deferrable": true}]}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{agent}");

    // A's chaos: killed and restarted on the same port, on a fixed schedule.
    // The schedule and the sessions' drivers run concurrently in this task (`eventually`'s
    // futures are not `Send`, so they are joined rather than spawned).
    let (over, chaos_over) = watch::channel(false);
    let chaos = async move {
        for (up, down) in KILLS {
            tokio::time::sleep(Duration::from_millis(up)).await;
            a.crash().await;
            tokio::time::sleep(Duration::from_millis(down)).await;
            a.restart().await;
        }
        let _ = over.send(true);
        a
    };
    let drivers =
        futures::future::join_all((0..SESSIONS).map(|n| drive(ctx.clone(), n, chaos_over.clone())));
    let (a, sessions) = tokio::join!(chaos, drivers);
    let chaos_done = Instant::now();

    // No run is stuck: every session runs, rests, and waits on nothing.
    let details: Vec<Value> = eventually(
        "every session to run, idle, with every run ended",
        TURN,
        async || -> Result<Vec<Value>, String> {
            let mut all = Vec::new();
            let mut problems = Vec::new();
            for s in ctx
                .get_b("/api/sessions?limit=100")
                .await
                .as_array()
                .unwrap()
            {
                let id = s["id"].as_str().unwrap();
                let d = ctx.session(id).await;
                let calls = ctx.get_b(&format!("/api/sessions/{id}/tool-calls")).await;
                if d["status"] != "running" || d["activity"] != "idle" {
                    problems.push(format!(
                        "{id}: {} {} {}",
                        d["status"], d["activity"], d["error"]
                    ));
                }
                for r in d["runs"].as_array().unwrap() {
                    if r["status"] == "running" {
                        problems.push(format!("{id}: run {} is running", r["id"]));
                    }
                }
                if let Some(calls) = calls.as_array().filter(|c| !c.is_empty()) {
                    problems.push(format!("{id} waits on {calls:?}"));
                    // A session nobody streams (a second one of an ambiguous create) has
                    // nobody to answer it but this.
                    for c in calls.iter().filter(|c| c["deferrable"] == true) {
                        ctx.answer(id, c["call_id"].as_str().unwrap()).await;
                    }
                }
                all.push(d);
            }
            if problems.is_empty() {
                Ok(all)
            } else {
                Err(problems.join("; "))
            }
        },
    )
    .await;
    // One session per driver; two only for a title whose creation lost its answer.
    let ambiguous = ctx.ambiguous.lock().unwrap().clone();
    for n in 0..SESSIONS {
        let title = format!("chaos-{n}");
        let count = details
            .iter()
            .filter(|d| d["title"] == title.as_str())
            .count();
        let most = if ambiguous.contains(&title) { 2 } else { 1 };
        assert!(
            (1..=most).contains(&count),
            "{count} sessions titled {title} (ambiguous creations: {ambiguous:?})"
        );
    }
    assert!(details.len() <= SESSIONS + ambiguous.len());

    // The log, page by page, as each process serves it.
    let mut logs: HashMap<String, Vec<Value>> = HashMap::new();
    for d in &details {
        let id = d["id"].as_str().unwrap();
        let through_b = pages(&ctx, &ctx.b, id).await;
        let through_a = pages(&ctx, &ctx.a, id).await;
        assert_eq!(through_a, through_b, "both processes serve the same log");
        let seqs: Vec<i64> = through_b
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "the pages are in seq order: {seqs:?}"
        );
        logs.insert(id.to_owned(), through_b);
    }

    // No run is stuck, none ended twice: exactly one terminal event per run, its last,
    // saying what the run row says.
    let (mut completed, mut failed) = (0, 0);
    for d in &details {
        let id = d["id"].as_str().unwrap();
        let log = &logs[id];
        for r in d["runs"].as_array().unwrap() {
            let mine: Vec<&Value> = log.iter().filter(|e| e["run_id"] == r["id"]).collect();
            let ends: Vec<&&Value> = mine.iter().filter(|e| is_terminal(e)).collect();
            assert_eq!(
                ends.len(),
                1,
                "run {} of {id} has one end: {mine:#?}",
                r["id"]
            );
            assert!(
                is_terminal(mine.last().unwrap()),
                "nothing of run {} follows its end: {mine:#?}",
                r["id"]
            );
            assert_eq!(ends[0]["payload"]["run_status"], r["status"], "{r}");
            match r["status"].as_str() {
                Some("completed") => completed += 1,
                // A run fails only because the process driving it died.
                _ => {
                    assert!(
                        r["error"].as_str().is_some_and(
                            |e| e.contains("the server process running this turn stopped")
                        ),
                        "run {} of {id} failed for another reason: {r}",
                        r["id"]
                    );
                    failed += 1
                }
            }
        }
    }

    // The resuming readers saw exactly the log: no gap, no repeat.
    let mut stats = (0, 0, 0);
    for (id, reader, until) in sessions {
        let log = &logs[&id];
        until
            .send(Some(log.last().unwrap()["seq"].as_i64().unwrap()))
            .unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(60), reader)
            .await
            .unwrap_or_else(|_| panic!("the reader of {id} did not reach the end of its log"))
            .expect("a reader");
        assert!(seen.problems.is_empty(), "{id}: {:#?}", seen.problems);
        let got: Vec<i64> = seen
            .events
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        let want: Vec<i64> = log.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
        assert_eq!(
            got, want,
            "the reader of {id} saw every event once, in order"
        );
        assert_eq!(
            &seen.events, log,
            "the reader of {id} saw the events as logged"
        );
        stats.0 += seen.connects;
        stats.1 += seen.cut;
        stats.2 += seen.deltas;
    }
    assert!(stats.1 > 0, "A's deaths cut some streams");
    let problems = ctx.problems.lock().unwrap().clone();
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(stats.2 > 0, "text deltas streamed live");

    // Every event reached the webhook, signed, as logged; the outbox agrees.
    let by_seq: HashMap<i64, &Value> = logs
        .values()
        .flatten()
        .map(|e| (e["seq"].as_i64().unwrap(), e))
        .collect();
    let want: BTreeSet<i64> = by_seq.keys().copied().collect();
    receiver
        .wait_for(DELIVER, "every event", |got| {
            let seqs: BTreeSet<i64> = got
                .iter()
                .filter_map(|r| r.json()["event"]["seq"].as_i64())
                .collect();
            want.is_subset(&seqs)
        })
        .await;
    let got = receiver.received();
    for r in &got {
        assert!(
            verify(&secret, r),
            "every delivery is signed with the secret"
        );
        let body = r.json();
        let seq = body["event"]["seq"].as_i64().unwrap();
        assert_eq!(
            &body["event"],
            *by_seq.get(&seq).expect("a logged event"),
            "delivery {}",
            body["id"]
        );
    }
    eventually("the outbox to record every delivery", DELIVER, async || {
        let (all, pending): (i64, i64) = sqlx::query_as(
            "select count(*), count(*) filter (where status <> 'delivered') from webhook_deliveries",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        (all == want.len() as i64 && pending == 0)
            .then_some(())
            .ok_or(format!("{pending} of {all} not delivered, {} events", want.len()))
    })
    .await;

    // The deployment's containers are the sessions' own; deleting the sessions removes them.
    let docker = DockerBackend::connect(&deployment).await.unwrap();
    let containers: BTreeSet<String> = docker
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    let owned: BTreeSet<String> = details
        .iter()
        .map(|d| d["container_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(containers, owned, "no container but the sessions' own");
    for (i, d) in details.iter().enumerate() {
        let base = if i.is_multiple_of(2) { &ctx.a } else { &ctx.b };
        let r = ctx
            .http
            .delete(format!("{base}/api/sessions/{}", d["id"].as_str().unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    }
    eventually(
        "no container of the deployment to remain",
        Duration::from_secs(20),
        async || {
            let left: Vec<String> = docker
                .list()
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.name)
                .collect();
            left.is_empty().then_some(()).ok_or(format!("{left:?}"))
        },
    )
    .await;

    eprintln!(
        "chaos: {} kills; {} runs completed, {} failed by a death; {} answers; \
         {} stream connections, {} cut by a death, {} deltas; {} webhook requests for {} \
         events; settled {:.1} s after the last restart",
        KILLS.len(),
        completed,
        failed,
        ctx.answered.load(Ordering::Relaxed),
        stats.0,
        stats.1,
        stats.2,
        got.len(),
        want.len(),
        chaos_done.elapsed().as_secs_f64()
    );
    receiver.stop();
    a.terminate().await;
    b.terminate().await;
}
