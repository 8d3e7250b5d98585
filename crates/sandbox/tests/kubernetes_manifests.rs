//! The objects the Kubernetes backend sends, as golden files reviewed by hand
//! (`tests/golden/kubernetes/`): a change to what the backend asks a cluster to run shows in
//! review as a change of these files. `UPDATE_GOLDEN=1` rewrites them. That the real API
//! server accepts them is the conformance suite's part (`backends.rs`, `kubernetes`).

use sandbox_agents_sandbox::kubernetes::{network, pod};
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
    // 4 GiB: `ephemeral-storage` requested at 1 GiB, limited at 5 GiB.
    settings.disk_limit = Some(4 << 30);
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
        runtime_class: None,
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
        None,
    );
    golden("pod.json", &serde_json::to_value(&pod).unwrap());
}

#[test]
fn the_kubelets_disk_limit_leaves_the_measurement_room_and_the_request_is_at_most_a_gib() {
    assert_eq!(pod::ephemeral_storage_limit(4 << 30), 5 << 30);
    // Small limits get at least 256 MiB of room.
    assert_eq!(pod::ephemeral_storage_limit(512 << 20), 768 << 20);
    assert_eq!(pod::ephemeral_storage_limit(u64::MAX), u64::MAX);
    assert_eq!(pod::ephemeral_storage_request(4 << 30), 1 << 30);
    assert_eq!(pod::ephemeral_storage_request(512 << 20), 512 << 20);
}

/// Under the egress proxy: the daemon's way to it, the tools' proxy variables, names asked
/// of the daemon (no cluster DNS), and the sysctl that lets it answer on port 53.
#[test]
fn a_pod_under_the_egress_proxy() {
    let settings =
        KubernetesSettings::new("sandboxes", "registry.example/sandbox-agents:0.8", [7; 32]);
    let spec = SandboxSpec {
        session: "0b6f3a52-8f4e-4d6e-9a51-4c1a2e3f4d5b".into(),
        image: "registry.example/sandbox:1".into(),
        env: BTreeMap::new(),
        exposed_ports: vec![],
        limits: Limits::default(),
        runtime_class: None,
    };
    let name = format!("{}-0123abcd", pod::pod_name(&spec.session));
    let egress = pod::PodEgress {
        proxy: "10.96.0.20:3129".parse().unwrap(),
        token: format!("{name} {}", "cd".repeat(32)),
    };
    let pod = pod::pod(
        &settings,
        "deployment-1",
        &name,
        (&spec, pod::Owner::Session),
        &spec.image,
        &"ab".repeat(32),
        Some(&egress),
    );
    golden("pod-egress.json", &serde_json::to_value(&pod).unwrap());
}

#[test]
fn a_sandboxs_network_policy_without_and_with_the_egress_proxy() {
    let settings =
        KubernetesSettings::new("sandboxes", "registry.example/sandbox-agents:0.8", [7; 32]);
    let name = "sa-0b6f3a52-8f4e-4d6e-9a51-4c1a2e3f4d5b-0123abcd";
    let open = network::network_policy(&settings, "deployment-1", name, None);
    golden("networkpolicy.json", &serde_json::to_value(&open).unwrap());
    let proxied = network::network_policy(&settings, "deployment-1", name, Some(3129));
    golden(
        "networkpolicy-egress.json",
        &serde_json::to_value(&proxied).unwrap(),
    );
}
