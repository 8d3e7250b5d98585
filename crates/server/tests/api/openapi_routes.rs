//! Every route the API serves, walked in the OpenAPI document: its parameters, the
//! `X-Project` header where the route reads it, the error answers the layers and extractors
//! give, and the input rules of its body and query parameters.
//!
//! The operations come from `sandbox_agents_api::openapi()`, which is the document of the
//! `utoipa_axum::OpenApiRouter` the server routes with: each `routes!` registers a handler and
//! its operation together, so the set walked here is the set routed (axum cannot list a
//! router's routes; `openapi::every_documented_operation_is_served` checks each is answered).
//! What the server serves outside that router (`/openapi.json`, `/docs`, the pages, `/metrics`,
//! the web UI) is not part of the API's contract.

use sandbox_agents_testkit::TestApp;
use serde_json::Value;
use std::collections::BTreeSet;

fn document() -> Value {
    serde_json::to_value(sandbox_agents_api::openapi()).unwrap()
}

/// `(method, path, operation)` for every documented operation.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((method.clone(), path.clone(), op.clone()));
        }
    }
    out
}

fn parameters<'a>(op: &'a Value, place: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |p| p["in"] == place)
}

/// The public operations (no credential): `auth::is_public`'s paths.
const PUBLIC: [&str; 5] = [
    "/api/health",
    "/api/me",
    "/api/auth/login",
    "/api/auth/logout",
    "/api/auth/recovery",
];

/// Input with no rule but the route's body limit (`api::limits`), on purpose; each says why.
/// Named as the walk names them: `Schema.field` (`{}` for a map's values), or `method path
/// "parameter"` for a query parameter. Adding a rule to the server for one of these means
/// adding it to `api::rules_docs` (or an attribute) and taking it out of here.
const NO_RULE: &[&str] = &[
    // Free text a person or a program writes, bounded only by the size of the request: a
    // prompt, a command, a tool's output, inline file content, descriptions, titles, labels
    // and display names, and the values a secret or an `env` map carries.
    "MessageCreate.prompt",
    "SessionCreate.prompt",
    "SessionCreate.instructions",
    "SessionCreate.title",
    "SessionPatch.title",
    "SnapshotCreate.label",
    "ExecBody.command",
    "StartProcess.command",
    "StartProcess.env{}",
    "ToolResultCreate.output",
    "EntrySpec.content",
    "ManifestSpec.environment{}",
    "ClientTool.description",
    "Subagent.description",
    "WorkspaceSource.instructions",
    "ApiKeyCreate.description",
    "ProjectCreate.description",
    "ProjectPatch.description",
    "UserCreate.name",
    "UserPatch.name",
    "ProfilePatch.name",
    // Secrets of people: a password's only rule is its least length (checked), a recovery
    // code is compared with its hash; neither's shape may be hinted.
    "LoginBody.password",
    "RecoveryBody.password",
    "RecoveryBody.code",
    "UserCreate.password",
    // References looked up by value (an id, a slug or a name): whatever their shape, one that
    // names nothing is a 404 or 422 saying so.
    "SessionCreate.agent_id",
    "SessionCreate.environment_id",
    "SessionCreate.from_snapshot_id",
    "WebhookCreate.agent_id",
    "WebhookPatch.agent_id",
    "ToolResultCreate.call_id",
    "ToolConfirmationCreate.call_id",
    "SkillsSource.bundle",
    "Subagent.tool_name",
    "EnvironmentConfig.backend",
    "get /api/sessions \"agent_id\"",
    "get /api/sessions \"environment_id\"",
    "get /api/sessions/{session_id}/terminal \"project\"",
    // Paths inside a workspace or a sandbox, checked for confinement (no `..`, no escape)
    // rather than length; the filesystem refuses what it cannot hold.
    "EntrySpec.prefix",
    "SkillsSource.src",
    "WorkspaceSource.dest",
    "WorkspaceSource.docs_file",
    "WorkspaceSource.ensure_dirs",
    "StartProcess.cwd",
    "delete /api/sessions/{session_id}/files \"path\"",
    "get /api/sessions/{session_id}/files \"path\"",
    "get /api/sessions/{session_id}/files/content \"path\"",
    "post /api/sessions/{session_id}/files \"path\"",
    // Lists taken whole: a closed set whose duplicates are folded (capabilities, event
    // types), ports deduplicated, tools and subagents each checked (unique names, no cycle).
    "AgentCreate.capabilities",
    "AgentPatch.capabilities",
    "AgentCreate.client_tools",
    "AgentPatch.client_tools",
    "MessageCreate.client_tools",
    "AgentCreate.exposed_ports",
    "AgentPatch.exposed_ports",
    "AgentCreate.subagents",
    "AgentPatch.subagents",
    "WebhookCreate.event_types",
    "WebhookPatch.event_types",
    // The most is the server's own flag (`--sandbox-max-cpus`), not a constant.
    "SandboxResources.cpus",
    // Dates whose window is checked together (`usage::MAX_WINDOW`), in either form the
    // parser takes.
    "get /api/usage \"from\"",
    "get /api/usage \"to\"",
];

/// The rule a schema is missing, if any: a string needs a length bound, a closed set, a
/// format or a pattern; a number a minimum and a maximum; an array a most items.
fn missing_rule(schema: &Value) -> Option<&'static str> {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    // The pattern every string without one gets (no U+0000) bounds nothing.
    let has =
        |k: &str| schema.get(k).is_some() && !(k == "pattern" && schema[k] == "^[^\\u0000]*$");
    if types.contains(&"string")
        && !["maxLength", "enum", "format", "pattern", "const"]
            .iter()
            .any(|k| has(k))
    {
        return Some("a string without maxLength, enum, format or pattern");
    }
    if (types.contains(&"integer") || types.contains(&"number"))
        && !((has("minimum") || has("exclusiveMinimum"))
            && (has("maximum") || has("exclusiveMaximum")))
    {
        return Some("a number without minimum and maximum");
    }
    if types.contains(&"array") && !has("maxItems") {
        return Some("an array without maxItems");
    }
    None
}

/// Walks `schema` (following `$ref`s once each), collecting `where: what is missing`.
fn walk(doc: &Value, schema: &Value, at: &str, seen: &mut BTreeSet<String>, out: &mut Vec<String>) {
    let mut at = at.to_owned();
    let mut schema = schema;
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        if !seen.insert(name.to_owned()) {
            return;
        }
        at = name.to_owned();
        schema = &doc["components"]["schemas"][name];
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for s in schema[key].as_array().into_iter().flatten() {
            walk(doc, s, &at, seen, out);
        }
    }
    if let Some(what) = missing_rule(schema) {
        out.push(format!("{at}: {what}"));
    }
    if let Some(items) = schema.get("items") {
        walk(doc, items, &at, seen, out);
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        walk(doc, property, &format!("{at}.{name}"), seen, out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        walk(doc, values, &format!("{at}{{}}"), seen, out);
    }
}

/// Each operation documents its path parameters, its answers, and the rules of its input.
#[test]
fn every_route_documents_its_parameters_answers_and_input_rules() {
    let doc = document();
    let mut problems = Vec::new();
    for (method, path, op) in operations(&doc) {
        let me = format!("{method} {path}");
        let responses = op["responses"].as_object().unwrap();
        let mut expect = |status: &str, why: &str| {
            if !responses.contains_key(status) {
                problems.push(format!("{me}: no {status} ({why})"));
            }
        };
        let public = PUBLIC.contains(&path.as_str());
        let takes_body = op.get("requestBody").is_some();
        let project = parameters(&op, "header").any(|p| p["name"] == "X-Project");
        let changes = !matches!(method.as_str(), "get" | "head" | "options");
        if !public {
            expect("401", "it needs a credential");
        }
        if changes && !public {
            expect("403", "a browser session's change without the CSRF header");
        }
        if path.contains('{') || project {
            expect("404", "its path or X-Project names something");
        }
        if project {
            expect("400", "several projects and none named");
            expect("409", "a person in no project");
        }
        if takes_body {
            expect("413", "it takes a body");
        }
        if path != "/api/health" {
            expect("429", "the rate limit covers it");
        }
        expect("503", "the database may be busy or away");
        for status in ["429", "503"] {
            if let Some(r) = responses.get(status) {
                if r["headers"]["Retry-After"].is_null() {
                    problems.push(format!("{me}: {status} without Retry-After"));
                }
            }
        }
        // Path parameters: one per `{name}`, each with a schema.
        let documented: BTreeSet<String> = parameters(&op, "path")
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect();
        let named: BTreeSet<String> = path
            .split('{')
            .skip(1)
            .map(|s| s.split('}').next().unwrap().to_owned())
            .collect();
        if documented != named {
            problems.push(format!(
                "{me}: path parameters {documented:?}, path names {named:?}"
            ));
        }
        for p in parameters(&op, "query").chain(parameters(&op, "header")) {
            let mut out = Vec::new();
            walk(
                &doc,
                &p["schema"],
                &format!("{me} {}", p["name"]),
                &mut BTreeSet::new(),
                &mut out,
            );
            problems.extend(out);
        }
        for (media, content) in op["requestBody"]["content"]
            .as_object()
            .into_iter()
            .flatten()
        {
            if media == "application/json" {
                walk(
                    &doc,
                    &content["schema"],
                    &me,
                    &mut BTreeSet::new(),
                    &mut problems,
                );
            }
        }
    }
    problems.sort();
    problems.dedup();
    // The exceptions, each of which must still be one (a stale entry hides nothing).
    let mut excepted = BTreeSet::new();
    problems.retain(|p| {
        let at = p.rsplit_once(": ").map_or(p.as_str(), |(at, _)| at);
        let allowed = NO_RULE.contains(&at);
        if allowed {
            excepted.insert(at.to_owned());
        }
        !allowed
    });
    for stale in NO_RULE.iter().filter(|e| !excepted.contains(**e)) {
        problems.push(format!("{stale}: in NO_RULE but has a rule (or is gone)"));
    }
    assert!(
        problems.is_empty(),
        "{} gaps in openapi/openapi.json:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A concrete path for `path`: each parameter replaced by a value of its schema's shape.
fn concrete(path: &str, op: &Value) -> String {
    let mut out = path.to_owned();
    for p in parameters(op, "path") {
        let name = p["name"].as_str().unwrap();
        let value = match (p["schema"]["type"].as_str(), p["schema"]["format"].as_str()) {
            // Ids are UUIDs whether or not the document says so: a malformed one is a 404
            // before the project is looked at.
            (_, Some("uuid")) => uuid::Uuid::now_v7().to_string(),
            (_, _) if name.ends_with("_id") => uuid::Uuid::now_v7().to_string(),
            (Some("integer"), _) => "1".to_owned(),
            _ => "nobody".to_owned(),
        };
        out = out.replace(&format!("{{{name}}}"), &value);
    }
    out
}

/// The operations documented with `X-Project` are exactly those that resolve it: each is sent
/// a project that does not exist, and answers that project's 404 if and only if it reads it.
#[tokio::test]
async fn x_project_is_documented_exactly_where_it_is_read() {
    let app = TestApp::builder().spawn().await;
    let doc = document();
    let named = "p4-no-such-project";
    let mut wrong = Vec::new();
    for (method, path, op) in operations(&doc) {
        let documented = parameters(&op, "header").any(|p| p["name"] == "X-Project");
        let r = app
            .http
            .request(
                method.to_uppercase().parse().unwrap(),
                app.url(&concrete(&path, &op)),
            )
            .header("X-Project", named)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        let reads = status == 404 && body["detail"] == format!("project '{named}' not found");
        if reads != documented {
            wrong.push(format!(
                "{method} {path}: documented {documented}, answered {status} {body}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// An environment's `config` is an object, as the document says: serde's derived parsing
/// also took an array of the fields in order (`[]` was every default and a 201), which the
/// API fuzz found as a schema-violating request accepted.
#[tokio::test]
async fn an_environment_config_that_is_not_an_object_is_a_422() {
    let app = TestApp::builder().spawn().await;
    for config in [serde_json::json!([]), serde_json::json!([null, null])] {
        let r = app
            .http
            .post(app.url("/api/environments"))
            .json(&serde_json::json!({"name": "arrayed", "config": config}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "config {config}");
        let created = app
            .http
            .post(app.url("/api/environments"))
            .json(&serde_json::json!({"name": "fine"}))
            .send()
            .await
            .unwrap();
        assert!(created.status() == 201 || created.status() == 409);
        let r = app
            .http
            .patch(app.url("/api/environments/fine"))
            .json(&serde_json::json!({"config": config}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "PATCH config {config}");
    }
}
