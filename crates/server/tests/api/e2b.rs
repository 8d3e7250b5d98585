//! The E2B-compatible API (issue 40), driven by the real E2B Python SDKs (tests/e2b/drive.py):
//! the newest 2.x and the oldest sqlsaber-sandbox accepts (2.46, whose create and connect
//! paths differ). Each E2B sandbox is a session of ours, in the project of the key that made
//! it; another project's key sees nothing of it.

use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::path::PathBuf;

const TOKEN: &str = "e2b-test-operator-token";

fn python(venv: &str) -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target")
        .join(venv)
        .join("bin/python");
    assert!(
        bin.exists(),
        "the E2B SDK is not installed at {}: scripts/test installs it (tests/e2b/requirements*.txt)",
        bin.display()
    );
    bin
}

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    project: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = app.http.request(method, app.url(path)).bearer_auth(TOKEN);
    if let Some(p) = project {
        r = r.header("x-project", p);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// `GET path` as the operator, in `project` when given.
async fn get(app: &TestApp, path: &str, project: Option<&str>) -> (u16, Value) {
    call(app, reqwest::Method::GET, path, project, None).await
}

/// A key bound to `project`.
async fn key(app: &TestApp, project: &str) -> String {
    let (s, k) = call(
        app,
        reqwest::Method::POST,
        "/api/api-keys",
        Some(project),
        Some(json!({"name": format!("e2b {project}"), "description": ""})),
    )
    .await;
    assert_eq!(s, 201, "{k}");
    k["key"].as_str().unwrap().to_owned()
}

async fn drive(app: &TestApp, venv: &str, scenario: &str, key: &str, other_key: &str) -> Value {
    let mut command = tokio::process::Command::new(python(venv));
    // With an E2B domain, the sandbox's `domain` (from create) names its hosts.
    if scenario != "hosts" {
        command.env("E2B_SANDBOX_URL", app.url("/e2b-sandbox"));
    }
    let out = command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/e2b/drive.py"
        ))
        .args([scenario, other_key])
        .env("E2B_API_URL", app.url("/e2b"))
        .env("E2B_API_KEY", key)
        .env_remove("E2B_DOMAIN")
        .env_remove("E2B_DEBUG")
        .output()
        .await
        .expect("running tests/e2b/drive.py");
    assert!(
        out.status.success(),
        "drive.py ({venv}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("drive.py prints JSON")
}

async fn the_control_plane_serves(venv: &str) {
    let plane = MemoryBackend::new("e2b");
    let app = TestApp::builder()
        .with_memory_backend(&plane)
        .with_token(TOKEN)
        .spawn()
        .await;
    let (s, other) = call(
        &app,
        reqwest::Method::POST,
        "/api/projects",
        None,
        Some(json!({"name": "other"})),
    )
    .await;
    assert_eq!(s, 201, "{other}");
    let (mine, theirs) = (key(&app, "default").await, key(&app, "other").await);
    let seen = drive(&app, venv, "control", &mine, &theirs).await;

    let created = &seen["created"];
    assert_eq!(created["template"], "base", "{seen}");
    assert_eq!(created["state"], "running", "{seen}");
    assert_eq!(
        created["metadata"],
        json!({"run": created["metadata"]["run"], "purpose": "first one"})
    );
    assert_eq!(
        created["lifetime"], 120,
        "the timeout is the sandbox's lifetime: {seen}"
    );
    let lifetime = seen["after_timeout"].as_i64().unwrap();
    assert!(
        (600..=610).contains(&lifetime),
        "set_timeout counts from now: {seen}"
    );

    let all: Vec<Value> = seen["all_ids"].as_array().unwrap().clone();
    let pages = seen["pages"].as_array().unwrap();
    assert_eq!(
        pages
            .iter()
            .map(|p| p.as_array().unwrap().len())
            .collect::<Vec<_>>(),
        [2, 1],
        "{seen}"
    );
    let mut paged: Vec<Value> = pages
        .iter()
        .flat_map(|p| p.as_array().unwrap().clone())
        .collect();
    paged.sort_by_key(|v| v.to_string());
    assert_eq!(
        paged, all,
        "paging with x-next-token lists each once: {seen}"
    );
    assert_eq!(
        seen["by_purpose"],
        json!([[created["id"]]]),
        "metadata filters: {seen}"
    );

    assert_eq!(seen["pause"], json!(true), "{seen}");
    assert_eq!(seen["state_paused"], "paused", "{seen}");
    assert_eq!(seen["paused_list"], json!([[created["id"]]]), "{seen}");
    assert_eq!(
        seen["pause_again"],
        json!(false),
        "pausing a paused sandbox: {seen}"
    );
    assert_eq!(seen["state_resumed"], "running", "connect resumes: {seen}");

    assert_eq!(
        seen["other_project_get"]["type"], "SandboxNotFoundException",
        "{seen}"
    );
    assert_eq!(seen["other_project_list"], json!([]), "{seen}");
    assert_eq!(seen["other_project_kill"], json!(false), "{seen}");
    assert_eq!(
        seen["wrong_key"]["type"], "AuthenticationException",
        "{seen}"
    );

    assert_eq!(seen["kill"], json!(true), "{seen}");
    assert_eq!(seen["kill_again"], json!(false), "{seen}");
    assert_eq!(
        seen["get_killed"]["type"], "SandboxNotFoundException",
        "{seen}"
    );
    assert_eq!(
        seen["after_kill"],
        json!([[]]),
        "killed sandboxes list nowhere: {seen}"
    );

    // Each sandbox is a session of ours, in the key's project, with its metadata.
    let id = created["id"].as_str().unwrap();
    let (s, session) = get(&app, &format!("/api/sessions/{id}"), Some("default")).await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["metadata"]["purpose"], "first one");
    assert_eq!(
        session["stopped_reason"], "lifetime",
        "a kill ends its lifetime: {session}"
    );
    let (s, _) = get(&app, &format!("/api/sessions/{id}"), Some("other")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn the_newest_python_sdk_drives_the_control_plane() {
    the_control_plane_serves("e2b-venv").await;
}

#[tokio::test]
async fn the_oldest_python_sdk_sqlsaber_takes_drives_the_control_plane() {
    the_control_plane_serves("e2b-old-venv").await;
}

/// The sandbox's data plane, on Docker: commands and files through envd's protocol, served
/// over our daemon.
async fn the_data_plane_serves(venv: &str) {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let key = key(&app, "default").await;
    let seen = drive(&app, venv, "sandbox", &key, "").await;
    assert_eq!(
        seen["run"],
        json!({"stdout": "hello from /workspace\n", "stderr": "oops\n", "exit_code": 0}),
        "envVars reach commands; E2B's home is the workspace: {seen}"
    );
    assert_eq!(seen["failed"]["type"], "CommandExitException", "{seen}");
    assert!(
        seen["failed"]["message"].as_str().unwrap().contains('3'),
        "{seen}"
    );
    assert_eq!(
        seen["background"],
        json!({"exit_code": 0, "lines": ["line1\n", "line2\n", "line3\n"]}),
        "{seen}"
    );
    assert_eq!(seen["timeout"]["type"], "TimeoutException", "{seen}");
    assert_eq!(seen["listed"], json!(true), "{seen}");
    assert_eq!(seen["kill"], json!(true), "{seen}");
    assert_eq!(
        seen["killed"]["type"], "CommandExitException",
        "a killed command exits: {seen}"
    );
    assert_eq!(seen["kill_gone"], json!(false), "{seen}");
    assert_eq!(seen["read"], "hello file", "{seen}");
    assert_eq!(
        seen["big_equal"],
        json!(true),
        "a large file byte for byte: {seen}"
    );
    assert_eq!(seen["list"], json!(["a.txt"]), "{seen}");
    assert_eq!(seen["exists"], json!([true, false]), "{seen}");
    assert_eq!(seen["after_remove"], json!(false), "{seen}");
    assert_eq!(
        seen["read_missing"]["type"], "FileNotFoundException",
        "{seen}"
    );
    assert_eq!(
        seen["write_files"],
        json!({"paths": ["/home/user/many/1.txt", "/home/user/many/2.bin"], "read": ["one", "two"]}),
        "several files in one upload: {seen}"
    );
    assert_eq!(seen["gzip"], json!(true), "a gzip-encoded upload: {seen}");
    assert_eq!(
        seen["connect"],
        json!({"exit_code": 0, "last": ["tick6\n"]}),
        "a disconnected command runs on and is connected to again: {seen}"
    );
    assert_eq!(seen["connect_gone"]["type"], "NotFoundException", "{seen}");
    assert_eq!(
        seen["pty"],
        json!({"echoed": true, "resized": true, "exit_code": 0}),
        "a terminal typed into, resized and exited: {seen}"
    );
    assert_eq!(
        seen["kept"], "kept across a pause",
        "pause and resume keep files: {seen}"
    );
    assert_eq!(
        seen["after_kill"]["type"], "AuthenticationException",
        "a killed sandbox takes no command: {seen}"
    );
    assert_eq!(seen["own_token"], json!([200, null]), "{seen}");
    for refused in ["other_token", "no_token", "garbled_id", "after_kill_raw"] {
        assert_eq!(
            seen[refused],
            json!([401, "unauthenticated"]),
            "{refused}: only a sandbox's own token opens it: {seen}"
        );
    }
    // The sandbox was a session of ours, in the key's project; killed, its lifetime is over.
    let id = seen["id"].as_str().unwrap();
    let (s, session) = get(&app, &format!("/api/sessions/{id}"), None).await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["title"], "E2B sandbox (base)", "{session}");
    assert_eq!(session["stopped_reason"], "lifetime", "{session}");
}

#[tokio::test]
async fn the_newest_python_sdk_runs_commands_and_files() {
    the_data_plane_serves("e2b-venv").await;
}

#[tokio::test]
async fn the_oldest_python_sdk_runs_commands_and_files() {
    the_data_plane_serves("e2b-old-venv").await;
}

/// The code interpreter, on Docker: `run_code` in our Python kernel (the template
/// `code-interpreter-v1` boots the built-in analysis environment), and code contexts.
async fn the_code_interpreter_serves(venv: &str) {
    // The analysis environment's build trusts the host's CA bundle (this network inspects
    // TLS); Docker's layer cache makes it quick after the first.
    let app = TestApp::builder()
        .with_token(TOKEN)
        .with_config(|c| c.extra_ca_certs = Some("/etc/ssl/certs/ca-certificates.crt".into()))
        .spawn()
        .await;
    let key = key(&app, "default").await;
    let seen = drive(&app, venv, "interpreter", &key, "").await;
    assert_eq!(seen["template"], "code-interpreter-v1", "{seen}");
    assert_eq!(
        seen["state"],
        json!({"stdout": ["set\n"], "text": "42", "count": 2}),
        "state is kept between runs: {seen}"
    );
    assert_eq!(seen["streamed"], "0\n1\n2\n", "{seen}");
    assert_eq!(
        seen["error"],
        json!({"name": "NameError", "value": "name 'undefined_name' is not defined", "traceback": true}),
        "{seen}"
    );
    assert_eq!(
        seen["png"],
        json!([true]),
        "a figure is one PNG result: {seen}"
    );
    assert_eq!(seen["env"], "'yes'", "{seen}");
    assert_eq!(
        seen["env_after"], "'None'",
        "envs hold for one run only: {seen}"
    );
    assert!(
        seen["js"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Python only")),
        "{seen}"
    );
    assert_eq!(
        seen["context"],
        json!({"cwd": "/home/user/sub", "language": "python"}),
        "{seen}"
    );
    assert_eq!(
        seen["context_isolated"], "False",
        "a context has its own state: {seen}"
    );
    assert_eq!(seen["context_cwd"], "'/workspace/sub'", "{seen}");
    let ctx = seen["context_id"].as_str().unwrap();
    let mut listed = vec!["default".to_owned(), ctx.to_owned()];
    listed.sort();
    assert_eq!(seen["contexts"], json!(listed), "{seen}");
    assert_eq!(
        seen["after_restart"], "False",
        "a restart clears state: {seen}"
    );
    assert_eq!(seen["contexts_after_remove"], json!(["default"]), "{seen}");
    assert_eq!(
        seen["removed_run"],
        format!("context {ctx} was not found"),
        "{seen}"
    );
    assert_eq!(
        seen["default_state"], "41",
        "the default context kept its state throughout: {seen}"
    );
    assert_eq!(seen["contexts_no_token"], 401, "{seen}");
    assert_eq!(seen["contexts_wrong_token"], 401, "{seen}");
    // The default context's cells are the session's notebook.
    let id = seen["id"].as_str().unwrap();
    let (s, notebook) = get(&app, &format!("/api/sessions/{id}/notebook"), None).await;
    assert_eq!(s, 200, "{notebook}");
    let sources: Vec<String> = notebook["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| match &c["source"] {
            Value::String(s) => s.clone(),
            Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
            _ => String::new(),
        })
        .collect();
    assert!(
        sources.iter().any(|s| s == "x + 1") && !sources.iter().any(|s| s == "y = 1"),
        "the default context is journaled, other contexts are not: {sources:?}"
    );
}

#[tokio::test]
async fn the_newest_code_interpreter_sdk_runs_code() {
    the_code_interpreter_serves("e2b-venv").await;
}

#[tokio::test]
async fn the_oldest_code_interpreter_sdk_runs_code() {
    the_code_interpreter_serves("e2b-old-venv").await;
}

/// In open mode (nothing configured) the E2B API takes whatever the SDKs insist on sending
/// that is not a key of ours (an `ak_` value must be a valid key, as a bearer must on the REST
/// API); once a key exists, only keys open it.
#[tokio::test]
async fn open_mode_takes_any_key_and_a_closed_server_only_its_own() {
    let plane = MemoryBackend::new("e2b-open");
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    let list = |key: &'static str| {
        app.http
            .get(app.url("/e2b/v2/sandboxes"))
            .header("x-api-key", key)
            .send()
    };
    let open = list("anything").await.unwrap();
    assert_eq!(open.status(), 200, "{:?}", open.text().await);
    let wrong = list("ak_not_a_key_of_this_server").await.unwrap();
    assert_eq!(
        wrong.status(),
        401,
        "a key of ours that is wrong is refused"
    );
    let (s, made) = app
        .post_json(
            "/api/api-keys",
            json!({"name": "closes the server", "description": ""}),
        )
        .await;
    assert_eq!(s, 201, "{made}");
    let closed = list("anything").await.unwrap();
    assert_eq!(closed.status(), 401);
    let body: Value = closed.json().await.unwrap();
    assert_eq!(body["code"], 401, "E2B's error shape: {body}");
    let key = made["key"].as_str().unwrap().to_owned();
    let own = app
        .http
        .get(app.url("/e2b/v2/sandboxes"))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
}

/// The npm SDKs (`e2b` and `@e2b/code-interpreter`, tests/e2b/js) for the basic flow, on
/// Docker.
#[tokio::test]
async fn the_npm_sdk_runs_the_basic_flow() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2b/js");
    assert!(
        dir.join("node_modules/e2b").exists(),
        "the npm E2B SDK is not installed in {}: scripts/test installs it (npm ci there)",
        dir.display()
    );
    let app = TestApp::builder()
        .with_token(TOKEN)
        .with_config(|c| c.extra_ca_certs = Some("/etc/ssl/certs/ca-certificates.crt".into()))
        .spawn()
        .await;
    let key = key(&app, "default").await;
    let out = tokio::process::Command::new("node")
        .arg(dir.join("drive.mjs"))
        .current_dir(&dir)
        .env("E2B_API_URL", app.url("/e2b"))
        .env("E2B_SANDBOX_URL", app.url("/e2b-sandbox"))
        .env("E2B_API_KEY", &key)
        .env_remove("E2B_DOMAIN")
        .env_remove("E2B_DEBUG")
        .output()
        .await
        .expect("running node tests/e2b/js/drive.mjs");
    assert!(
        out.status.success(),
        "drive.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("drive.mjs prints JSON");
    assert_eq!(seen["created"]["template"], "base", "{seen}");
    assert_eq!(
        seen["run"],
        json!({"stdout": "hello from /workspace\n", "stderr": "oops\n", "exitCode": 0}),
        "{seen}"
    );
    assert_eq!(seen["failed"]["type"], "CommandExitError", "{seen}");
    assert_eq!(
        seen["background"],
        json!({"exitCode": 0, "lines": ["line1\n", "line2\n", "line3\n"]}),
        "{seen}"
    );
    assert_eq!(seen["read"], "hello from js", "{seen}");
    assert_eq!(seen["bigEqual"], json!(true), "byte for byte: {seen}");
    assert_eq!(seen["list"], json!(["a.txt"]), "{seen}");
    assert_eq!(seen["afterRemove"], json!(false), "{seen}");
    assert_eq!(seen["listed"], json!([seen["id"]]), "{seen}");
    assert_eq!(seen["wrongKey"]["type"], "AuthenticationError", "{seen}");
    assert_eq!(seen["kill"], json!(true), "{seen}");
    assert!(seen["afterKill"].is_object(), "{seen}");
    assert_eq!(
        seen["code"],
        json!({"text": "42", "stdout": ["from js\n"]}),
        "{seen}"
    );
}

/// `--e2b-domain`: sandbox hosts `{port}-{id}.{domain}` reach the data plane with no headers
/// naming the sandbox, and the SDK's signed file URLs (on those hosts) open a file without a
/// token. The SDK speaks https to hosts; the test fetches the URLs it made over the test
/// server's http, resolving the hosts to it as wildcard DNS would.
#[tokio::test]
async fn sandbox_hosts_and_signed_urls_under_the_e2b_domain() {
    let app = TestApp::builder()
        .with_token(TOKEN)
        .with_config(|c| c.e2b_domain = Some("e2b.localhost".into()))
        .spawn()
        .await;
    let key = key(&app, "default").await;
    let seen = drive(&app, "e2b-venv", "hosts", &key, "").await;
    let (id, token) = (
        seen["id"].as_str().unwrap(),
        seen["token"].as_str().unwrap(),
    );
    let host = format!("49983-{id}.e2b.localhost");
    assert_eq!(seen["envd_host"], host, "{seen}");
    let addr: std::net::SocketAddr = app.base.strip_prefix("http://").unwrap().parse().unwrap();
    let client = reqwest::Client::builder()
        .resolve(&host, addr)
        .resolve(
            "49983-00000000-0000-0000-0000-000000000000.e2b.localhost",
            addr,
        )
        .resolve("nope.e2b.localhost", addr)
        .build()
        .unwrap();
    // The SDK's URL, over the test server's plain http.
    let here = |url: &Value| {
        url.as_str()
            .unwrap()
            .replacen("https://", "http://", 1)
            .replacen(&host, &format!("{host}:{}", addr.port()), 1)
    };

    // By host, with the token, as the SDK's envd calls go.
    let files = format!("http://{host}:{}/files", addr.port());
    let r = client
        .post(format!("{files}?path=/home/user/signed.txt"))
        .header("x-access-token", token)
        .header("content-type", "application/octet-stream")
        .body("signed contents")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let r = client
        .post(format!(
            "http://{host}:{}/filesystem.Filesystem/Stat",
            addr.port()
        ))
        .header("x-access-token", token)
        .header("content-type", "application/json")
        .header("connect-protocol-version", "1")
        .json(&json!({"path": "/home/user/signed.txt"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "Connect calls by host too");
    let r = client
        .get(format!("{files}?path=/home/user/signed.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "no token, no signature");

    // Signed URLs open the file with no header at all.
    for url in [&seen["download_url"], &seen["expiring_url"]] {
        let r = client.get(here(url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{url}");
        assert_eq!(r.text().await.unwrap(), "signed contents");
    }
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"uploaded by URL".to_vec()).file_name("uploaded.txt"),
    );
    let r = client
        .post(here(&seen["upload_url"]))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let r = client
        .get(format!("{files}?path=/home/user/uploaded.txt"))
        .header("x-access-token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "uploaded by URL");

    // An upload URL writes its one file: a second part is refused, and is not written.
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"again".to_vec()).file_name("uploaded.txt"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"smuggled".to_vec()).file_name("/home/user/.bashrc"),
        );
    let r = client
        .post(here(&seen["upload_url"]))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = client
        .get(format!("{files}?path=/home/user/.bashrc"))
        .header("x-access-token", token)
        .send()
        .await
        .unwrap();
    assert_ne!(r.text().await.unwrap(), "smuggled");

    // A download URL does not upload, a changed path is not signed, a past expiry is refused.
    let download = here(&seen["download_url"]);
    let r = client
        .post(&download)
        .body("x")
        .header("content-type", "application/octet-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let moved = download.replace("signed.txt", "uploaded.txt");
    assert_eq!(client.get(&moved).send().await.unwrap().status(), 401);
    // Nor does another path beside the signed one, first or last: the signature would be
    // checked against one and the file read from the other.
    for smuggled in [
        download.replacen('?', "?path=%2Fhome%2Fuser%2Fuploaded.txt&", 1),
        format!("{download}&path=%2Fhome%2Fuser%2Fuploaded.txt"),
    ] {
        let r = client.get(&smuggled).send().await.unwrap();
        assert_eq!(r.status(), 401, "{smuggled}");
    }
    let r = client
        .post(here(&seen["upload_url"]).replacen('?', "?path=%2Fhome%2Fuser%2F.profile&", 1))
        .body("smuggled")
        .header("content-type", "application/octet-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let past = sandbox_agents_e2b::envd::file_signature(
        "/home/user/signed.txt",
        "read",
        "",
        token,
        Some(1_000_000),
    );
    let expired = format!(
        "{files}?path=%2Fhome%2Fuser%2Fsigned.txt&signature={}&signature_expiration=1000000",
        past.replace('+', "%2B").replace('/', "%2F")
    );
    assert_eq!(client.get(&expired).send().await.unwrap().status(), 401);

    // A host under the domain that names no sandbox, or another sandbox, opens nothing.
    let r = client
        .get(format!("http://nope.e2b.localhost:{}/files", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .get(format!(
            "http://49983-00000000-0000-0000-0000-000000000000.e2b.localhost:{}/files?path=/home/user/signed.txt",
            addr.port()
        ))
        .header("x-access-token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}
