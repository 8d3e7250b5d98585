//! A pod's own resolver (`dnsPolicy: None`): the `resolv.conf` of its `dnsConfig`, written by
//! the agent under its temporary directory when the pod's volumes are made, bind-mounted
//! read-only at `/etc/resolv.conf` in each of its containers ([`crate::containers`]), and
//! removed with the pod, as the kubelet does with its own.

use k8s_openapi::api::core::v1::Pod;

/// Whether the pod names its own resolver (`dnsPolicy: None`, with its `dnsConfig`).
pub fn custom_dns(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.dns_policy.as_deref() == Some("None"))
}

/// The directory of what the agent writes for the pod `uid` on the host.
fn pod_dir(uid: &str) -> std::path::PathBuf {
    std::env::temp_dir().join("kube-test-node").join(uid)
}

/// Where the agent writes the resolver configuration of the pod `uid` (`dnsPolicy: None`).
pub fn resolv_conf(uid: &str) -> std::path::PathBuf {
    pod_dir(uid).join("resolv.conf")
}

/// The `resolv.conf` of the pod's `dnsConfig`, as the kubelet writes it.
fn resolv_conf_text(pod: &Pod) -> String {
    let config = pod
        .spec
        .as_ref()
        .and_then(|s| s.dns_config.clone())
        .unwrap_or_default();
    let mut text = String::new();
    for server in config.nameservers.iter().flatten() {
        text.push_str(&format!("nameserver {server}\n"));
    }
    if let Some(searches) = config.searches.filter(|s| !s.is_empty()) {
        text.push_str(&format!("search {}\n", searches.join(" ")));
    }
    let options: Vec<String> = config
        .options
        .iter()
        .flatten()
        .filter_map(|o| {
            let name = o.name.clone()?;
            Some(match &o.value {
                Some(v) => format!("{name}:{v}"),
                None => name,
            })
        })
        .collect();
    if !options.is_empty() {
        text.push_str(&format!("options {}\n", options.join(" ")));
    }
    text
}

/// Writes the pod's `resolv.conf` when it names its own resolver.
pub fn write(pod: &Pod) -> std::io::Result<()> {
    if !custom_dns(pod) {
        return Ok(());
    }
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    std::fs::create_dir_all(pod_dir(uid))?;
    std::fs::write(resolv_conf(uid), resolv_conf_text(pod))
}

/// Removes what [`write`] wrote for the pod `uid`.
pub fn remove(uid: &str) -> std::io::Result<()> {
    // Never the parent of every pod's directory.
    if uid.is_empty() {
        return Ok(());
    }
    match std::fs::remove_dir_all(pod_dir(uid)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodDNSConfigOption, PodSpec};

    #[test]
    fn a_pods_dns_config_is_written_as_the_kubelet_writes_it() {
        let pod = Pod {
            spec: Some(PodSpec {
                dns_policy: Some("None".into()),
                dns_config: Some(PodDNSConfig {
                    nameservers: Some(vec!["127.0.0.1".into()]),
                    searches: Some(vec!["a.svc".into(), "svc".into()]),
                    options: Some(vec![
                        PodDNSConfigOption {
                            name: Some("ndots".into()),
                            value: Some("1".into()),
                        },
                        PodDNSConfigOption {
                            name: Some("edns0".into()),
                            value: None,
                        },
                    ]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(custom_dns(&pod));
        assert_eq!(
            resolv_conf_text(&pod),
            "nameserver 127.0.0.1\nsearch a.svc svc\noptions ndots:1 edns0\n"
        );
        assert!(!custom_dns(&Pod::default()));
        // No uid: nothing is removed, never the directory of every pod.
        remove("").unwrap();
    }
}
