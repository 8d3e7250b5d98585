//! `--extra-ca-certs` on the control plane's own clients: a model provider and a webhook
//! receiver behind a certificate of a CA the test makes (`testkit::tls`) are reached only by
//! clients given that CA, and the server given it passes it on to both.

use sandbox_agents_model::{ModelClient, ModelConfig, Transport};
use sandbox_agents_testkit::tls::{HttpsStub, TestCa};
use sandbox_agents_testkit::webhooks::subscribe;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

#[tokio::test]
async fn a_model_client_trusts_the_extra_cas_and_only_with_them() {
    let ca = TestCa::new();
    let stub = HttpsStub::start(&ca).await;
    let transport = Transport::Openai {
        base: format!("{}/v1", stub.url()),
        api_key: Some("sk-test".into()),
    };
    let mut plain = ModelConfig::new(transport.clone());
    plain.max_retries = 0;
    let e = ModelClient::new(plain)
        .unwrap()
        .list_models()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    let pem = std::fs::read_to_string(ca.cert()).unwrap();
    let trusting = ModelConfig::new(transport)
        .with_extra_roots_pem(&pem)
        .unwrap();
    let models = ModelClient::new(trusting)
        .unwrap()
        .list_models()
        .await
        .unwrap();
    assert_eq!(models[0].id, "stub-model");
}

async fn ping(app: &TestApp, url: &str) -> Value {
    let hook = subscribe(
        app,
        json!({"name": "p", "url": url, "agent_id": null, "active": false}),
    )
    .await;
    let id = hook["id"].as_str().unwrap();
    let r = app
        .http
        .post(app.url(&format!("/api/webhooks/{id}/ping")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn webhooks_reach_a_receiver_of_an_extra_ca_and_only_with_it() {
    let ca = TestCa::new();
    let stub = HttpsStub::start(&ca).await;
    let url = format!("{}/hook", stub.url());

    let plain = TestApp::builder().spawn().await;
    let result = ping(&plain, &url).await;
    assert_eq!(result["delivered"], false, "{result}");
    plain.stop().await;

    let trusting = TestApp::builder()
        .with_config(|c| c.extra_ca_certs = Some(ca.cert()))
        .spawn()
        .await;
    let result = ping(&trusting, &url).await;
    assert_eq!(
        (result["delivered"].clone(), result["status_code"].clone()),
        (json!(true), json!(200)),
        "{result}"
    );
    // The git the control plane runs gets the system bundle and the extra CA.
    let bundle = std::fs::read_to_string(trusting.data_dir.join("git-ca-bundle.pem")).unwrap();
    let ca_pem = std::fs::read_to_string(ca.cert()).unwrap();
    assert!(bundle.trim_end().ends_with(ca_pem.trim_end()));
    if let Ok(system) = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt") {
        assert!(bundle.starts_with(system.trim_end()));
    }
    trusting.stop().await;
}
