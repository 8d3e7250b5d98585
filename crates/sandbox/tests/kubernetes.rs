//! What only the Kubernetes backend does, on the test cluster (a real kube-apiserver and etcd,
//! our test node agent), under a service account holding only the Role of
//! `deploy/kubernetes/`. What every backend does is the conformance suite (`backends.rs`).

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::PostParams;
use sandbox_agents_sandbox::kubernetes::network;
use sandbox_agents_sandbox::{KubernetesBackend, KubernetesSettings, SandboxBackend};
use sandbox_agents_testkit::kube::TestNamespace;

mod support;

/// The sweep's `remove_strays` lists policies (the Role allows it) and keeps every policy
/// whose pod exists, or was made too recently to tell (a pod about to be created): a policy
/// without its pod is deleted only past `network::STRAY_GRACE`, which the unit tests of
/// `network::strays` cover.
#[tokio::test]
async fn the_sweep_keeps_policies_of_live_pods_and_of_pods_being_made() {
    let ns = TestNamespace::new().await;
    let mut settings = KubernetesSettings::new(
        &ns.name,
        &sandbox_agents_testkit::kube::sandboxd_image(),
        [9; 32],
    );
    settings.kubeconfig = Some(ns.kubeconfig.clone());
    let deployment = format!("test-{}", uuid::Uuid::new_v4());
    let backend = KubernetesBackend::connect(&settings, &deployment)
        .await
        .expect("the test cluster takes the backend");
    let sb = backend
        .create(&support::spec_of(support::image(), &support::session()))
        .await
        .expect("create");
    // A policy as one is between its apply and its pod's create.
    let policies = kube::Api::<NetworkPolicy>::namespaced(ns.admin.clone(), &ns.name);
    let made_before_its_pod =
        network::network_policy(&settings, &deployment, "sa-about-to-be-made", None);
    policies
        .create(&PostParams::default(), &made_before_its_pod)
        .await
        .unwrap();

    assert_eq!(backend.remove_strays().await.unwrap(), 0);
    let left: Vec<String> = policies
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(left.contains(&sb.id), "{left:?}");
    assert!(left.contains(&"sa-about-to-be-made".to_owned()), "{left:?}");

    backend.remove(&sb.id).await.unwrap();
    ns.remove().await;
}
