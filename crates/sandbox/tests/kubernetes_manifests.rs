//! The objects the Kubernetes backend sends, as golden files reviewed by hand
//! (`tests/golden/kubernetes/`): a change to what the backend asks a cluster to run shows in
//! review as a change of these files. `UPDATE_GOLDEN=1` rewrites them. That the real API
//! server accepts them is the conformance suite's part (`backends.rs`, `kubernetes`).

use sandbox_agents_sandbox::kubernetes::pod;
use sandbox_agents_sandbox::{KubernetesSettings, Limits, SandboxSpec};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn golden(name: &str, value: &serde_json::Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/kubernetes")
        .join(name);
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        text,
        want,
        "{} changed: review it, then UPDATE_GOLDEN=1",
        path.display()
    );
}

#[test]
fn a_sessions_pod() {
    let mut settings =
        KubernetesSettings::new("sandboxes", "registry.example/sandbox-agents:0.8", [7; 32]);
    settings.runtime_class = Some("gvisor".into());
    settings.node_selector = BTreeMap::from([("pool".into(), "sandboxes".into())]);
    settings.image_pull_secret = Some("registry".into());
    let spec = SandboxSpec {
        session: "0b6f3a52-8f4e-4d6e-9a51-4c1a2e3f4d5b".into(),
        image: "registry.example/sandbox:1".into(),
        env: BTreeMap::from([("GREETING".into(), "hello".into())]),
        exposed_ports: vec![8080],
        limits: Limits {
            cpus: 1.5,
            memory_bytes: 1 << 30,
            pids: 512,
        },
    };
    let name = format!("{}-0123abcd", pod::pod_name(&spec.session));
    let hash = "ab".repeat(32);
    let pod = pod::pod(
        &settings,
        "deployment-1",
        &name,
        (&spec, pod::Owner::Session),
        &spec.image,
        &hash,
    );
    golden("pod.json", &serde_json::to_value(&pod).unwrap());
}
