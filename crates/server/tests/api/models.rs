use sandbox_agents_fake_model::{FakeModel, ModelEntry, Script};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

#[tokio::test]
async fn models_are_the_proxys_catalogue_with_limits() {
    let fake = FakeModel::start(
        Script::new(Vec::<sandbox_agents_fake_model::Rule>::new())
            .model(ModelEntry::new("small").limits(Some(8000), Some(1000))),
    );
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let r = app.http.get(app.url("/api/models")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let models: Vec<Value> = r.json().await.unwrap();
    let small = models
        .iter()
        .find(|m| m["id"] == "small")
        .expect("the scripted model is listed");
    assert_eq!(small["max_input_tokens"], json!(8000));
    assert_eq!(small["max_output_tokens"], json!(1000));
    // A second read within the cache window does not reach the proxy again.
    let before = fake.requests().len();
    app.http.get(app.url("/api/models")).send().await.unwrap();
    assert_eq!(fake.requests().len(), before);
}

#[tokio::test]
async fn a_proxy_that_is_down_is_a_502_not_an_empty_list() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = TestApp::builder()
        .with_model_proxy(&format!("http://127.0.0.1:{port}"))
        .spawn()
        .await;
    let r = app.http.get(app.url("/api/models")).send().await.unwrap();
    assert_eq!(r.status(), 502);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("proxy"));
    let unconfigured = TestApp::builder().spawn().await;
    let r = unconfigured
        .http
        .get(unconfigured.url("/api/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("LITELLM_PROXY_API_BASE"));
}
