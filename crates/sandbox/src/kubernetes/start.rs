//! The Kubernetes backend as [`KubernetesSettings`] describe it, checked against the cluster
//! before the server serves: a configuration that cannot work stops the server with a
//! sentence that says what is wrong and where it looked, instead of failing every boot.
//!
//! What is checked, in order: a configuration is found (the kubeconfig named, in-cluster, or
//! `KUBECONFIG`/`~/.kube/config`); the API server answers; this identity may do everything
//! the backend does to pods in the namespace (`SelfSubjectAccessReview`, which needs no
//! permission of its own); and the cluster admits the pod the backend makes, created with
//! `dryRun` (the namespace exists, the runtime class exists, admission such as Pod Security
//! accepts it), so nothing is created by the check.

use super::settings::{DaemonRoute, KubernetesSettings};
use super::KubernetesBackend;
use crate::{SandboxError, SandboxSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// What the `port-forward` daemon route needs beside [`POD_VERBS`]: the WebSocket upgrade
/// is a `get`, which recent API servers also authorize as `create`
/// (`AuthorizePodWebsocketUpgradeCreatePermission`).
const PORT_FORWARD_VERBS: &[(&str, &str)] =
    &[("pods/portforward", "get"), ("pods/portforward", "create")];

/// What the backend does to pods and their NetworkPolicies, each of which the server's
/// identity must be allowed.
const POD_VERBS: &[(&str, &str)] = &[
    ("pods", "create"),
    ("pods", "get"),
    ("pods", "list"),
    ("pods", "watch"),
    ("pods", "patch"),
    ("pods", "delete"),
    ("networkpolicies", "create"),
    ("networkpolicies", "list"),
    ("networkpolicies", "patch"),
    ("networkpolicies", "delete"),
];

fn config_error(message: String) -> SandboxError {
    SandboxError::Backend(message)
}

/// The client configuration, a sentence on where it came from, and whether it is the
/// in-cluster one.
async fn load(settings: &KubernetesSettings) -> Result<(Config, String, bool), SandboxError> {
    if let Some(path) = &settings.kubeconfig {
        let where_ = format!("the kubeconfig {}", path.display());
        let kubeconfig = Kubeconfig::read_from(path)
            .map_err(|e| config_error(format!("cannot read {where_}: {e}")))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| config_error(format!("{where_} cannot be used: {e}")))?;
        return Ok((config, where_, false));
    }
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let where_ = if in_cluster {
        "the in-cluster configuration (this pod's service account)".to_owned()
    } else {
        match std::env::var("KUBECONFIG") {
            Ok(path) if !path.is_empty() => format!("the kubeconfig {path} (KUBECONFIG)"),
            _ => "the kubeconfig ~/.kube/config (KUBECONFIG is unset)".to_owned(),
        }
    };
    let config = Config::infer().await.map_err(|e| {
        config_error(format!(
            "no Kubernetes cluster is configured for --backend kubernetes: not running in a \
             cluster (KUBERNETES_SERVICE_HOST is unset) and {where_} cannot be used ({e}); \
             set --kubernetes-kubeconfig or KUBECONFIG"
        ))
    })?;
    Ok((config, where_, in_cluster))
}

/// A client for the port-forwards that carry daemon connections: the default client's
/// connections leave Nagle's algorithm on, which against the API server's delayed ACK held
/// each small write of a request that followed another (an HTTP/2 frame after the headers)
/// for up to 40 ms; these set `TCP_NODELAY`. Nor do they carry the default client's read
/// timeout, which would end a daemon connection idle for five minutes: an idle one lasts until
/// the node ends it (a kubelet's `--streaming-connection-idle-timeout`, 4 h by default), and the
/// daemon link opens another at the next call, as after any drop.
fn streaming_client(config: &Config) -> kube::Result<Client> {
    use kube::client::ConfigExt;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http)?;
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .map_err(tower::BoxError::from)
        .service(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https),
        );
    Ok(Client::new(service, config.default_namespace.clone()))
}

/// The route to daemons: `Auto` is the pod network for a server in the cluster, which
/// reaches pods, and the API server's port-forward for one outside, which need not.
fn resolve_route(route: DaemonRoute, in_cluster: bool) -> DaemonRoute {
    match route {
        DaemonRoute::Auto if in_cluster => DaemonRoute::PodNetwork,
        DaemonRoute::Auto => DaemonRoute::PortForward,
        chosen => chosen,
    }
}

/// Connects, checks, and makes the backend of `deployment`.
pub(crate) async fn connect(
    settings: &KubernetesSettings,
    deployment: &str,
) -> Result<KubernetesBackend, SandboxError> {
    let (config, where_, in_cluster) = load(settings).await?;
    let mut settings = settings.clone();
    settings.route = resolve_route(settings.route, in_cluster);
    let url = config.cluster_url.to_string();
    let streams = match settings.route {
        DaemonRoute::PortForward => Some(streaming_client(&config).map_err(|e| {
            config_error(format!("{where_} cannot be used for port-forwards: {e}"))
        })?),
        _ => None,
    };
    let client = Client::try_from(config)
        .map_err(|e| config_error(format!("{where_} cannot be used: {e}")))?;
    let version = client.apiserver_version().await.map_err(|e| {
        config_error(format!(
            "the Kubernetes API server at {url} (from {where_}) does not answer: {e}"
        ))
    })?;
    tracing::info!(%url, version = %version.git_version, "connected to the Kubernetes API server");
    let ns = &settings.namespace;
    let mut refused = Vec::new();
    let port_forward = match settings.route {
        DaemonRoute::PortForward => PORT_FORWARD_VERBS,
        _ => &[],
    };
    for (resource, verb) in POD_VERBS.iter().chain(port_forward) {
        if !allowed(&client, ns, resource, verb).await.map_err(|e| {
            config_error(format!(
                "the Kubernetes API server at {url} refused to say what this server may do ({e})"
            ))
        })? {
            refused.push(format!("{verb} {resource}"));
        }
    }
    if !refused.is_empty() {
        return Err(config_error(format!(
            "the identity from {where_} may not {} in the namespace {ns} of {url}: bind it to \
             the Role in deploy/kubernetes/ (docs/kubernetes.md)",
            refused.join(", ")
        )));
    }
    tracing::info!(
        route = settings.route.as_str(),
        "sandbox daemons are reached by this route"
    );
    let backend = KubernetesBackend::new(client, streams, settings, deployment);
    backend.admits_its_pods(&url).await?;
    Ok(backend)
}

async fn allowed(client: &Client, ns: &str, resource: &str, verb: &str) -> kube::Result<bool> {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: (resource == "networkpolicies").then(|| "networking.k8s.io".to_owned()),
                namespace: Some(ns.to_owned()),
                verb: Some(verb.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

impl KubernetesBackend {
    /// Creates, with `dryRun`, the pod a session would get and its NetworkPolicy: the
    /// cluster's validation and admission judge them, and nothing is made.
    async fn admits_its_pods(&self, url: &str) -> Result<(), SandboxError> {
        let spec = SandboxSpec {
            session: "00000000-0000-0000-0000-000000000000".to_owned(),
            image: self
                .settings
                .image
                .clone()
                .unwrap_or_else(|| "sandbox".to_owned()),
            env: Default::default(),
            exposed_ports: vec![],
            limits: Default::default(),
            runtime_class: None,
        };
        let name = super::pod::pod_name(&spec.session);
        let egress = self.egress_of(&name).await?;
        let pod = self.pod_of(&spec, super::pod::Owner::Session, &name, egress.as_ref());
        let policy = super::network::network_policy(
            &self.settings,
            &self.deployment,
            &name,
            egress.as_ref().map(|e| e.proxy.port()),
        );
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let ns = &self.settings.namespace;
        let admitted = async {
            Api::<NetworkPolicy>::namespaced(self.client.clone(), ns)
                .create(&params, &policy)
                .await?;
            Api::<Pod>::namespaced(self.client.clone(), ns)
                .create(&params, &pod)
                .await
        };
        match admitted.await {
            Ok(_) => self.admits_runtime_classes(url, &pod, &params).await,
            Err(e) if super::error::is_not_found(&e) => Err(config_error(format!(
                "the namespace {ns} (--kubernetes-namespace) does not exist in the cluster at \
                 {url}: create it (kubectl create namespace {ns})"
            ))),
            Err(e) => Err(config_error(format!(
                "the cluster at {url} refuses the pods sandboxes run in, or their NetworkPolicies, in the namespace \
                 {ns}: {e}"
            ))),
        }
    }
}

impl KubernetesBackend {
    /// The same pod, with `dryRun`, under each runtime class agents and environments may
    /// name: the API server's RuntimeClass admission refuses one the cluster does not have,
    /// which would otherwise fail the boots of every session that names it.
    async fn admits_runtime_classes(
        &self,
        url: &str,
        pod: &Pod,
        params: &PostParams,
    ) -> Result<(), SandboxError> {
        let pods = Api::<Pod>::namespaced(self.client.clone(), &self.settings.namespace);
        for class in &self.settings.runtime_classes {
            let mut under = pod.clone();
            if let Some(spec) = under.spec.as_mut() {
                spec.runtime_class_name = Some(class.clone());
            }
            if let Err(e) = pods.create(params, &under).await {
                return Err(config_error(format!(
                    "the cluster at {url} refuses sandbox pods under the runtime class {class}                      (--kubernetes-runtime-classes; is there a RuntimeClass of that name?): {e}"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{resolve_route, DaemonRoute};

    #[test]
    fn auto_is_the_pod_network_in_the_cluster_and_a_port_forward_outside() {
        assert_eq!(
            resolve_route(DaemonRoute::Auto, true),
            DaemonRoute::PodNetwork
        );
        assert_eq!(
            resolve_route(DaemonRoute::Auto, false),
            DaemonRoute::PortForward
        );
        for chosen in [DaemonRoute::PodNetwork, DaemonRoute::PortForward] {
            assert_eq!(resolve_route(chosen, true), chosen);
            assert_eq!(resolve_route(chosen, false), chosen);
        }
    }
}
