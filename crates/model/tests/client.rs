//! The model client against the scripted fake model server.

use std::time::{Duration, Instant};

use futures::StreamExt;
use sandbox_agents_fake_model::{FakeModel, ModelEntry, Rule, Script};
use sandbox_agents_model::{
    ChatRequest, Message, ModelClient, ModelConfig, ModelError, StreamEvent, ToolSpec, Transport,
    Usage,
};
use serde_json::json;

/// A proxy-transport client with a fast backoff, so retry tests take milliseconds.
fn client(fake: &FakeModel) -> ModelClient {
    client_at(Transport::Proxy {
        base: fake.root_url(),
        api_key: Some("sk-proxy".into()),
    })
}

fn client_at(transport: Transport) -> ModelClient {
    let mut config = ModelConfig::new(transport);
    config.backoff_base = Duration::from_millis(5);
    config.backoff_max = Duration::from_millis(20);
    ModelClient::new(config).unwrap()
}

fn request(user: &str) -> ChatRequest {
    ChatRequest::new(
        "fake-model",
        vec![Message::system("be brief"), Message::user(user)],
    )
}

/// Every item of the stream, errors included.
async fn collect(client: &ModelClient, req: ChatRequest) -> Vec<Result<StreamEvent, ModelError>> {
    client.stream(req).collect().await
}

fn texts(events: &[Result<StreamEvent, ModelError>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn text_streams_in_order_then_one_done() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("count")
        .reply_text("one two three four")]));
    let mut req = request("count to four");
    req.reasoning_effort = Some("low".into());
    req.max_tokens = Some(100);
    req.tools = vec![ToolSpec {
        name: "shell".into(),
        description: "Run a command".into(),
        parameters: json!({"type": "object"}),
    }];
    let events = collect(&client(&fake), req).await;
    assert_eq!(texts(&events), ["one ", "two ", "three ", "four"]);
    let dones: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::Done(c)) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(dones.len(), 1);
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done(_)))));
    assert_eq!(dones[0].text, "one two three four");
    assert_eq!(dones[0].finish_reason, "stop");
    assert!(dones[0].tool_calls.is_empty());

    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.authorization.as_deref(), Some("Bearer sk-proxy"));
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
    assert_eq!(sent.body["reasoning_effort"], "low");
    assert_eq!(sent.body["max_tokens"], 100);
    assert_eq!(sent.body["tools"][0]["type"], "function");
    assert_eq!(sent.body["tools"][0]["function"]["name"], "shell");
}

#[tokio::test]
async fn several_tool_calls_in_one_step_are_assembled_in_order() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .turn(1)
            .last_message_role("tool")
            .reply_text("Both done."),
        Rule::when()
            .reply_tool_call("shell", json!({"command": "ls -la"}))
            .tool_call_with_id("call_b", "read_file", json!({"path": "README.md"}))
            .text("Let me look."),
    ]));
    let client = client(&fake);
    let completion = client.complete(request("look around")).await.unwrap();
    assert_eq!(completion.text, "Let me look.");
    assert_eq!(completion.finish_reason, "tool_calls");
    let calls = &completion.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "shell");
    assert!(!calls[0].id.is_empty());
    let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(args, json!({"command": "ls -la"}));
    assert_eq!(calls[1].id, "call_b");
    assert_eq!(calls[1].arguments, r#"{"path":"README.md"}"#);

    // The calls and their results go back into the conversation for the next step.
    let mut next = request("look around");
    next.messages.push(Message::from_completion(&completion));
    for call in &completion.tool_calls {
        next.messages.push(Message::tool(&call.id, "ok"));
    }
    let answer = client.complete(next).await.unwrap();
    assert_eq!(answer.text, "Both done.");
    // The second chat request (the first call's pricing read the catalogue in between).
    let chats: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    let sent = &chats[1].body["messages"];
    assert_eq!(sent[2]["tool_calls"][1]["function"]["name"], "read_file");
    assert_eq!(sent[4]["tool_call_id"], "call_b");
}

#[tokio::test]
async fn usage_comes_from_the_final_chunk() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("hi")
        .usage(1200, 34)]));
    let completion = client(&fake).complete(request("hello")).await.unwrap();
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 1200,
            output_tokens: 34,
            total_tokens: 1234,
            requests: 1,
            // The fake's catalogue has no prices for its model: unpriced, not free.
            unpriced_requests: 1,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn a_call_is_priced_by_the_providers_figure_else_the_catalogue_read_once() {
    let fake = FakeModel::start(
        Script::new([
            Rule::when()
                .last_user_contains("reported")
                .reply_text("a")
                .usage_costing(100, 10, 0.5),
            Rule::always().reply_text("b").usage(1000, 100),
        ])
        .model(ModelEntry::new("fake-model").prices(2e-6, 10e-6)),
    );
    let client = client(&fake);
    let reported = client.complete(request("reported")).await.unwrap().usage;
    assert_eq!((reported.cost_usd, reported.unpriced_requests), (0.5, 0));
    assert!(
        fake.requests().iter().all(|r| r.path != "/model/info"),
        "a call the provider priced does not read the catalogue"
    );
    for _ in 0..3 {
        let u = client.complete(request("other")).await.unwrap().usage;
        assert!(
            (u.cost_usd - (1000.0 * 2e-6 + 100.0 * 10e-6)).abs() < 1e-12,
            "{u:?}"
        );
        assert_eq!(u.unpriced_requests, 0);
    }
    let reads = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/model/info")
        .count();
    assert_eq!(reads, 1, "the prices are read once and kept");

    // A model the catalogue has no prices for stays unpriced.
    let other = client
        .complete(ChatRequest::new("unlisted", vec![Message::user("other")]))
        .await
        .unwrap()
        .usage;
    assert_eq!((other.cost_usd, other.unpriced_requests), (0.0, 1));
}

#[tokio::test]
async fn reasoning_deltas_come_before_the_text() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("Hello!")
        .reasoning("The user greets me.")]));
    let events = collect(&client(&fake), request("hi")).await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e.as_ref().unwrap() {
            StreamEvent::ReasoningDelta(t) => format!("r:{t}"),
            StreamEvent::TextDelta(t) => format!("t:{t}"),
            StreamEvent::Done(c) => format!("done:{}", c.reasoning.as_deref().unwrap_or("-")),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "r:The ",
            "r:user ",
            "r:greets ",
            "r:me.",
            "t:Hello!",
            "done:The user greets me."
        ]
    );
}

#[tokio::test]
async fn a_503_is_retried_until_it_succeeds() {
    let fake = FakeModel::start(Script::new([
        Rule::always().reply_error(503, "overloaded").times(2),
        Rule::always().reply_text("third time lucky"),
    ]));
    let completion = client(&fake).complete(request("hi")).await.unwrap();
    assert_eq!(completion.text, "third time lucky");
    assert_eq!(fake.chat_requests().len(), 3);
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let fake = FakeModel::start(Script::new([
        Rule::always()
            .reply_error(429, "rate limited")
            .retry_after(1)
            .times(1),
        Rule::always().reply_text("ok"),
    ]));
    let completion = client(&fake).complete(request("hi")).await.unwrap();
    assert_eq!(completion.text, "ok");
    let requests = fake.chat_requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].received_at_ms - requests[0].received_at_ms;
    assert!(
        gap >= 1000,
        "the retry came after {gap} ms, before Retry-After: 1"
    );
}

#[tokio::test]
async fn a_400_surfaces_the_providers_message_without_retry() {
    let fake = FakeModel::start(Script::new([
        Rule::always().reply_error(400, "model `nope` does not exist")
    ]));
    let err = client(&fake).complete(request("hi")).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Http {
            status: 400,
            message: "model `nope` does not exist".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "the model provider answered 400: model `nope` does not exist"
    );
    assert_eq!(fake.chat_requests().len(), 1);
}

#[tokio::test]
async fn retries_run_out_with_the_last_error() {
    let fake = FakeModel::start(Script::new(
        [Rule::always().reply_error(502, "bad gateway")],
    ));
    let err = client(&fake).complete(request("hi")).await.unwrap_err();
    assert_eq!(err.status(), Some(502));
    assert_eq!(
        fake.chat_requests().len(),
        5,
        "the first attempt and 4 retries"
    );
}

#[tokio::test]
async fn connection_refused_is_retried_then_a_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config = ModelConfig::new(Transport::Openai {
        base: format!("http://127.0.0.1:{port}/v1"),
        api_key: None,
    });
    config.max_retries = 2;
    config.backoff_base = Duration::from_millis(100);
    config.backoff_max = Duration::from_millis(100);
    let started = Instant::now();
    let err = ModelClient::new(config)
        .unwrap()
        .complete(request("hi"))
        .await
        .unwrap_err();
    let ModelError::Connect(message) = &err else {
        panic!("expected a connect error, got {err:?}");
    };
    assert!(
        message.contains("could not reach the model provider"),
        "{message}"
    );
    assert!(message.contains("gave up after 3 attempts"), "{message}");
    // Two backoffs of 100 ms × (0.5–1.5) were waited.
    assert!(started.elapsed() >= Duration::from_millis(100));
}

#[tokio::test]
async fn a_disconnect_mid_answer_is_an_error_and_not_retried() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("alpha beta gamma delta epsilon")
        .disconnect_after_chunks(3)]));
    let events = collect(&client(&fake), request("hi")).await;
    assert_eq!(texts(&events), ["alpha ", "beta "]);
    let Some(Err(ModelError::Connect(message))) = events.last() else {
        panic!("expected a connect error at the end, got {events:?}");
    };
    assert!(message.contains("not retried"), "{message}");
    assert_eq!(fake.chat_requests().len(), 1);
}

#[tokio::test]
async fn a_disconnect_before_anything_was_streamed_is_retried() {
    let fake = FakeModel::start(Script::new([
        Rule::always()
            .reply_text("lost")
            .disconnect_after_chunks(1)
            .times(1),
        Rule::always()
            .reply_text("lost too")
            .disconnect_after_chunks(0)
            .times(1),
        Rule::always().reply_text("kept"),
    ]));
    let events = collect(&client(&fake), request("hi")).await;
    assert_eq!(texts(&events), ["kept"]);
    assert_eq!(fake.chat_requests().len(), 3);
}

#[tokio::test]
async fn an_idle_stream_times_out() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("slow words here")
        .chunk_delay_ms(400)]));
    let mut config = ModelConfig::new(Transport::Openai {
        base: fake.base_url(),
        api_key: Some("sk-openai".into()),
    });
    config.idle_timeout = Duration::from_millis(100);
    config.max_retries = 1;
    config.backoff_base = Duration::from_millis(1);
    let err = ModelClient::new(config)
        .unwrap()
        .complete(request("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Timeout(_)), "{err:?}");
    assert_eq!(
        fake.chat_requests().len(),
        2,
        "nothing was streamed, so it was retried"
    );
    assert_eq!(
        fake.requests()[0].authorization.as_deref(),
        Some("Bearer sk-openai")
    );
}

#[tokio::test]
async fn list_models_reads_names_and_limits_from_the_proxy() {
    let fake = FakeModel::start(
        Script::default()
            .model(ModelEntry::new("small").limits(Some(8_000), Some(1_000)))
            .model(ModelEntry::new("plain")),
    );
    let client = client(&fake);
    let models = client.list_models().await.unwrap();
    assert_eq!(models.len(), 2);
    assert_eq!(models[0].id, "small");
    assert_eq!(models[0].owned_by, "fake-model");
    assert_eq!(models[0].max_input_tokens, Some(8_000));
    assert_eq!(models[0].max_output_tokens, Some(1_000));
    assert_eq!(models[1].max_input_tokens, None);
    let paths: Vec<String> = fake.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/models", "/model/info"]);

    fake.set_script(Script::default().without_model_info());
    let models = client.list_models().await.unwrap();
    assert_eq!(models[0].id, "fake-model");
    assert_eq!(
        models[0].max_input_tokens, None,
        "a 404 from /model/info means no limits"
    );
}

#[tokio::test]
async fn list_models_from_a_proxy_that_is_down_is_a_connect_error() {
    // A port nothing listens on: bound, and closed before the request (dropping a std
    // listener closes it at once; a dropped FakeModel's task would take a moment).
    let base = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let err = client_at(Transport::Proxy {
        base,
        api_key: None,
    })
    .list_models()
    .await
    .unwrap_err();
    assert!(matches!(err, ModelError::Connect(_)), "{err:?}");
    assert!(err.to_string().contains("/v1/models"), "{err}");
}
