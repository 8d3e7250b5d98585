//! A sandbox pod's NetworkPolicy: who reaches it, and what it reaches.
//!
//! - **In**: the control plane's pods (`ControlPlanePods`), on the daemon's port, and nobody
//!   else: no other sandbox, nothing outside the cluster. Previews reach a sandbox's ports
//!   through its daemon, so no other port is opened.
//! - **Out, under the egress proxy**: the control plane's pods on the proxy's port, and
//!   nothing else (not even the cluster's DNS: the daemon answers names by asking the proxy).
//!   The proxy decides every connection by the session's policy, as on Docker.
//! - **Out, without it**: any public address (IPv4 and IPv6) and the cluster's DNS; no
//!   private, shared, link-local (cloud metadata), loopback, multicast or reserved range, so
//!   no other pod, node, Service or metadata endpoint of the cluster's private network.
//!
//! NetworkPolicies only add what they allow, and the namespace's default-deny policy
//! (`deploy/kubernetes/`) leaves a pod no traffic at all until its own exists: the policy is
//! made before its pod, so there is no moment when a sandbox is open. It is owned by its pod
//! (an owner reference set once the pod exists), so the cluster's garbage collector deletes it
//! with the pod; the backend deletes it too when it removes the pod, and the reconciler's sweep
//! deletes one whose pod was never made (a process that died between the two requests) or is
//! gone without it (a cluster with no garbage collector): [`strays`]. Enforcing it is the
//! network plugin's part: a cluster whose plugin ignores NetworkPolicies (flannel alone)
//! enforces none of this.

use super::pod::{LABEL_DEPLOYMENT, LABEL_SANDBOX};
use super::settings::{ControlPlanePods, KubernetesSettings};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// IPv4 ranges a sandbox without the proxy never reaches: private (RFC 1918), shared
/// (CGNAT), loopback, link-local (cloud metadata at 169.254.169.254), "this network",
/// IETF protocol assignments, benchmarking, multicast and reserved.
const DENIED_V4: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
];
/// IPv6 ranges likewise: unique-local (AWS's metadata at fd00:ec2::254 among them),
/// link-local, multicast and NAT64 (which reaches the IPv4 ranges above). IPv4-mapped
/// addresses are IPv4 on the wire, under the IPv4 rule; the API server refuses them here.
const DENIED_V6: &[&str] = &[
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
];

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".to_owned()),
        end_port: None,
    }
}

fn control_plane(pods: &ControlPlanePods) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_owned(),
                pods.namespace.clone(),
            )])),
            match_expressions: None,
        }),
        pod_selector: Some(LabelSelector {
            match_labels: Some(pods.labels.clone()),
            match_expressions: None,
        }),
        ip_block: None,
    }
}

fn public(cidr: &str, except: &[&str]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_owned(),
            except: Some(except.iter().map(|c| (*c).to_owned()).collect()),
        }),
        ..Default::default()
    }
}

/// The NetworkPolicy of the pod `name` (named as the pod), with `egress_port` the port of the
/// proxy's listener when the deployment runs it.
pub fn network_policy(
    settings: &KubernetesSettings,
    deployment: &str,
    name: &str,
    egress_port: Option<u16>,
) -> NetworkPolicy {
    let ingress = NetworkPolicyIngressRule {
        from: Some(vec![control_plane(&settings.control_plane)]),
        ports: Some(vec![tcp(super::pod::DAEMON_PORT)]),
    };
    let egress = match egress_port {
        Some(port) => vec![NetworkPolicyEgressRule {
            to: Some(vec![control_plane(&settings.control_plane)]),
            ports: Some(vec![tcp(port)]),
        }],
        None => vec![
            NetworkPolicyEgressRule {
                to: Some(vec![
                    public("0.0.0.0/0", DENIED_V4),
                    public("::/0", DENIED_V6),
                ]),
                ports: None,
            },
            // The cluster's DNS (kube-dns, or CoreDNS under that label), which the
            // private ranges above would otherwise shut out.
            NetworkPolicyEgressRule {
                to: Some(vec![NetworkPolicyPeer {
                    namespace_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "kubernetes.io/metadata.name".to_owned(),
                            "kube-system".to_owned(),
                        )])),
                        match_expressions: None,
                    }),
                    pod_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "k8s-app".to_owned(),
                            "kube-dns".to_owned(),
                        )])),
                        match_expressions: None,
                    }),
                    ip_block: None,
                }]),
                ports: Some(vec![
                    NetworkPolicyPort {
                        port: Some(IntOrString::Int(53)),
                        protocol: Some("UDP".to_owned()),
                        end_port: None,
                    },
                    tcp(53),
                ]),
            },
        ],
    };
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([
                (LABEL_DEPLOYMENT.to_owned(), deployment.to_owned()),
                (LABEL_SANDBOX.to_owned(), name.to_owned()),
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    "sandbox-agents".to_owned(),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    LABEL_SANDBOX.to_owned(),
                    name.to_owned(),
                )])),
                match_expressions: None,
            }),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(vec![ingress]),
            egress: Some(egress),
        }),
    }
}

/// The owner reference that hands the policy to its pod (`uid`): deleted with it.
pub fn owned_by_pod(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// How long a policy may exist without its pod before the sweep deletes it: the policy is
/// applied just before its pod is created, by this process or another replica, and a pod
/// create (with the API server's retries) takes far less.
pub const STRAY_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// The names of `policies` whose pod is not among `pods` and that are older than
/// [`STRAY_GRACE`] at `now`: what the sweep deletes. A policy with no creation time (never the
/// API server's) is kept.
pub fn strays(
    policies: &[NetworkPolicy],
    pods: &std::collections::HashSet<String>,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<String> {
    let grace = k8s_openapi::jiff::SignedDuration::try_from(STRAY_GRACE)
        .expect("the grace fits a signed duration");
    policies
        .iter()
        .filter(|p| {
            let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created.is_some_and(|c| now.duration_since(c) > grace)
        })
        .filter_map(|p| p.metadata.name.clone())
        .filter(|name| !pods.contains(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{strays, STRAY_GRACE};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use std::collections::HashSet;

    fn policy(name: &str, created: Option<Timestamp>) -> NetworkPolicy {
        NetworkPolicy {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                creation_timestamp: created.map(Time),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_policy_is_a_stray_only_without_its_pod_and_past_the_grace() {
        let now = Timestamp::now();
        let grace = SignedDuration::try_from(STRAY_GRACE).unwrap();
        let old = now - grace - SignedDuration::from_secs(1);
        let recent = now - grace + SignedDuration::from_secs(60);
        let policies = [
            policy("sa-with-pod", Some(old)),
            policy("sa-gone", Some(old)),
            policy("sa-being-made", Some(recent)),
            policy("sa-no-time", None),
        ];
        let pods = HashSet::from(["sa-with-pod".to_owned()]);
        assert_eq!(strays(&policies, &pods, now), ["sa-gone"]);
    }
}
