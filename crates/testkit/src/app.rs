//! What tests do through a [`TestApp`]: seed rows, call the API, wait for states.

use crate::TestApp;
use sandbox_agents_domain::agent::{AgentCreate, AgentRecord};
use sandbox_agents_domain::event::NewEvent;
use sandbox_agents_domain::{AgentId, SessionId};
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_store::{agents, events, sessions};
use std::time::Duration;
impl TestApp {
    /// Runs the webhook dispatcher's loop until the server stops, as the binary does.
    pub fn start_dispatcher(&self) {
        self.dispatcher.spawn(self.shutdown.clone());
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Stops the server and waits for it, failing if graceful shutdown hangs. The warm
    /// pool's refill worker is waited for too, so no sandbox it is creating appears after
    /// the drop has removed this deployment's containers.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.sessions.stop_pool())
            .await
            .expect("the warm pool's worker stopped in time");
        let server = std::mem::replace(&mut self.server, tokio::spawn(async { Ok(()) }));
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server shut down in time")
            .expect("the server task did not panic")
            .expect("the server returned cleanly");
    }

    /// `POST /api/sessions/{id}/stop`, asserting the 200 (the stop itself goes on in the
    /// background: wait for `stopped` when it matters).
    pub async fn stop_session(&self, id: &str) {
        let r = self
            .http
            .post(self.url(&format!("/api/sessions/{id}/stop")))
            .send()
            .await
            .expect("POST stop");
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    }

    /// Shuts this server down and leaves its sandboxes as they are, as a crash or a redeploy
    /// would: a test then starts another server on the same database (`with_db`).
    pub async fn stop_keeping_sandboxes(mut self) {
        self.keep_sandboxes = true;
        let data_dir = self.data_dir.clone();
        self.stop().await;
        let _ = std::fs::remove_dir_all(data_dir);
    }

    /// A restart: this server shuts down (its connections, its daemon bridges and all it
    /// held in memory go with it) and leaves its sandboxes running; a new server starts on the
    /// same database with the default options, as a redeploy would.
    pub async fn restart(self) -> TestApp {
        let (db, options) = (self.db.clone(), self.db_options.clone());
        self.stop_keeping_sandboxes().await;
        TestApp::builder().with_db(db, options).spawn().await
    }

    /// An agent in the default project, straight into the store.
    pub async fn seed_agent(&self, slug: &str) -> AgentRecord {
        let body: AgentCreate =
            serde_json::from_value(serde_json::json!({ "slug": slug, "name": slug }))
                .expect("agent body");
        let (slug, spec) = body.into_spec().expect("a valid agent");
        agents::insert(&self.db, DEFAULT_PROJECT, &slug, &spec, None)
            .await
            .expect("seeding an agent")
    }

    /// A session row (no container: these tests are about the log).
    pub async fn seed_session(&self, agent: AgentId) -> SessionId {
        let id = SessionId::new();
        sessions::insert(
            &self.db,
            &sessions::NewSession {
                id,
                project: DEFAULT_PROJECT,
                agent,
                title: String::new(),
                backend: "docker".into(),
                exposed_ports: Vec::new(),
                model: None,
                instructions: None,
                manifest: None,
                metadata: Default::default(),
                image: None,
                secret_bindings: Vec::new(),
                boot_snapshot_id: None,
                idle_ttl_seconds: None,
                max_lifetime_seconds: None,
                resources: None,
                network: Default::default(),
                budget: None,
                agent_version: None,
                agent_pins: None,
                mcp_servers: None,
            },
        )
        .await
        .expect("seeding a session");
        id
    }

    /// Appends `n` `agent.message` events numbered from `from`, in one transaction.
    pub async fn append_messages(&self, session: SessionId, from: usize, n: usize) -> Vec<i64> {
        let batch: Vec<NewEvent> = (from..from + n)
            .map(|i| {
                NewEvent::new(
                    sandbox_agents_domain::event::EventType::AgentMessage,
                    None,
                    serde_json::json!({ "text": format!("message {i}") }),
                )
            })
            .collect();
        events::append_now(&self.db, session, &batch)
            .await
            .expect("appending")
            .into_iter()
            .map(|e| e.seq)
            .collect()
    }
}

impl TestApp {
    /// Creates an agent through the API (`body` is merged over a minimal one).
    pub async fn create_agent(&self, slug: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut body = serde_json::json!({"slug": slug, "name": slug});
        for (k, v) in extra.as_object().expect("an object") {
            body[k] = v.clone();
        }
        let r = self
            .http
            .post(self.url("/api/agents"))
            .json(&body)
            .send()
            .await
            .expect("POST /api/agents");
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap_or_default());
        r.json().await.expect("an Agent")
    }

    /// `POST /api/sessions`, asserting the 202.
    pub async fn create_session(&self, body: serde_json::Value) -> serde_json::Value {
        let r = self
            .http
            .post(self.url("/api/sessions"))
            .json(&body)
            .send()
            .await
            .expect("POST /api/sessions");
        assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
        r.json().await.expect("a Session")
    }

    /// `GET /api/sessions/{id}` as JSON.
    pub async fn session(&self, id: &str) -> serde_json::Value {
        self.http
            .get(self.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .expect("GET session")
            .json()
            .await
            .expect("JSON")
    }

    /// Polls the session until its status is `status` (or `error`, which fails the test
    /// unless asked for), within `within`.
    pub async fn wait_for_status(
        &self,
        id: &str,
        status: &str,
        within: Duration,
    ) -> serde_json::Value {
        crate::eventually(
            &format!("session {id} to be {status}"),
            within,
            async || {
                let s = self.session(id).await;
                assert!(
                    s["status"] != "error" || status == "error",
                    "the session failed: {}",
                    s["error"]
                );
                (s["status"] == status).then_some(s)
            },
        )
        .await
    }

    /// A new agent `slug` (`agent` merged over a minimal body) and a session of it, once it
    /// runs; returns the session's id.
    pub async fn running_session(&self, slug: &str, agent: serde_json::Value) -> String {
        self.create_agent(slug, agent).await;
        let s = self
            .create_session(serde_json::json!({"agent_id": slug, "title": "t"}))
            .await;
        assert_eq!(s["status"], "provisioning", "{s}");
        let id = s["id"].as_str().expect("an id").to_owned();
        self.wait_for_status(&id, "running", crate::BOOT).await;
        id
    }

    /// `POST /api/sessions` with `body` (of an agent that exists), once the session runs;
    /// returns its id.
    pub async fn boot_session(&self, body: serde_json::Value) -> String {
        let s = self.create_session(body).await;
        let id = s["id"].as_str().expect("an id").to_owned();
        self.wait_for_status(&id, "running", crate::BOOT).await;
        id
    }

    /// `GET path` as (status, JSON body; null when the body is not JSON).
    pub async fn get_json(&self, path: &str) -> (u16, serde_json::Value) {
        let r = self.http.get(self.url(path)).send().await.expect("GET");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// `POST path` with `body` (JSON; none when null) as (status, JSON body; null when the
    /// body is not JSON).
    pub async fn post_json(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let mut req = self.http.post(self.url(path));
        if !body.is_null() {
            req = req.json(&body);
        }
        let r = req.send().await.expect("POST");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// `PATCH path` with `body` (JSON) as (status, JSON body; null when the body is not JSON).
    pub async fn patch_json(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let r = self
            .http
            .patch(self.url(path))
            .json(&body)
            .send()
            .await
            .expect("PATCH");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// `POST /api/sessions/{id}/start`, which must answer 200.
    pub async fn start_session(&self, id: &str) {
        let (status, body) = self
            .post_json(
                &format!("/api/sessions/{id}/start"),
                serde_json::Value::Null,
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// `DELETE /api/sessions/{id}`, which must answer 204.
    pub async fn delete_session(&self, id: &str) {
        let r = self
            .http
            .delete(self.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .expect("DELETE session");
        assert_eq!(r.status(), 204, "{}", r.text().await.unwrap_or_default());
    }

    /// `POST /api/sessions/{id}/interrupt`, which must succeed.
    pub async fn interrupt(&self, id: &str) {
        let r = self
            .http
            .post(self.url(&format!("/api/sessions/{id}/interrupt")))
            .send()
            .await
            .expect("POST interrupt");
        assert!(r.status().is_success(), "{}", r.status());
    }

    /// `POST .../exec`, returning (exit_code, stdout, stderr).
    pub async fn exec(&self, id: &str, command: &str) -> (i64, String, String) {
        let r = self
            .http
            .post(self.url(&format!("/api/sessions/{id}/exec")))
            .json(&serde_json::json!({"command": command, "timeout": 30}))
            .send()
            .await
            .expect("POST exec");
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
        let v: serde_json::Value = r.json().await.expect("ExecResult");
        (
            v["exit_code"].as_i64().expect("exit_code"),
            v["stdout"].as_str().unwrap_or_default().to_owned(),
            v["stderr"].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// A session's log (its first 1000 events), in order.
    pub async fn events(&self, id: &str) -> Vec<serde_json::Value> {
        self.http
            .get(self.url(&format!("/api/sessions/{id}/events?limit=1000")))
            .send()
            .await
            .expect("GET events")
            .json()
            .await
            .expect("events")
    }

    /// The event types of a session's log, in order.
    pub async fn event_types(&self, id: &str) -> Vec<String> {
        self.events(id)
            .await
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}
