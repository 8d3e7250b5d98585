//! The Docker labels that tie a container or a volume to its node, cluster and pod: a
//! restarted agent finds its containers by them, and `scripts/kube-test-cluster down` removes
//! what the node left by them.

use std::collections::HashMap;

pub const NODE: &str = "io.sandbox-agents.kube-test-node.node";
/// The API server's URL: two clusters on one machine may both name their node
/// `kube-test-node`, and must not take each other's containers for orphans.
pub const CLUSTER: &str = "io.sandbox-agents.kube-test-node.cluster";
pub const NAMESPACE: &str = "io.sandbox-agents.kube-test-node.namespace";
pub const POD: &str = "io.sandbox-agents.kube-test-node.pod";
pub const UID: &str = "io.sandbox-agents.kube-test-node.uid";
/// The container's name in the pod spec.
pub const CONTAINER: &str = "io.sandbox-agents.kube-test-node.container";

/// Whose containers these are: one agent's, on one cluster.
#[derive(Clone, Debug)]
pub struct Owner {
    pub node: String,
    pub cluster: String,
}

impl Owner {
    /// The labels every container and volume of a pod carries.
    pub fn pod_labels(&self, namespace: &str, pod: &str, uid: &str) -> HashMap<String, String> {
        HashMap::from([
            (NODE.to_owned(), self.node.clone()),
            (CLUSTER.to_owned(), self.cluster.clone()),
            (NAMESPACE.to_owned(), namespace.to_owned()),
            (POD.to_owned(), pod.to_owned()),
            (UID.to_owned(), uid.to_owned()),
        ])
    }

    /// A Docker `filters` value selecting this owner's objects (and one pod's, given its uid).
    pub fn filters(&self, uid: Option<&str>) -> HashMap<String, Vec<String>> {
        let mut labels = vec![
            format!("{NODE}={}", self.node),
            format!("{CLUSTER}={}", self.cluster),
        ];
        if let Some(uid) = uid {
            labels.push(format!("{UID}={uid}"));
        }
        HashMap::from([("label".to_owned(), labels)])
    }
}
