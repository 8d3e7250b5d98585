//! `--parts kubernetes` (issue 37): the Kubernetes backend beside the raw API server, on the
//! test cluster (a real kube-apiserver and etcd; the test node agent runs pods as Docker
//! containers). The cluster is `SANDBOX_AGENTS_TEST_KUBECONFIG` (scripts/bench-sandbox starts
//! one of the bench's own), else the test kit's (`target/kube-test-cluster`); the bench works
//! in a namespace of its own, as a service account holding only deploy/kubernetes/'s Role,
//! which it removes at the end.
//!
//! 1. API requests: a `GET` of a pod and a `create` of the session's pod with `dryRun=All`,
//!    with kube's client as the backend's identity: the floor under everything below.
//! 2. Cold boot: `KubernetesBackend::create` until its daemon answered, beside the same pod
//!    spec (`pod::pod`) created with kube's client and watched until its phase is `Running`;
//!    the raw path is timed step by step, and then opens the daemon, outside its baseline.
//! 3. Warm claim: handing a pooled pod to a session (`assign`: a `GET` and an optimistic
//!    merge `PATCH` of its labels) and its first command (`exec true`), on the replica that
//!    pooled it (its daemon connection open) and on another one (connects first), beside one
//!    raw `PATCH` of the same labels. The same pooled pod is handed on every iteration: each
//!    claim does the same requests a fresh pod's would.
//!
//! Pods are removed between iterations, outside the timed region, and the bench waits until
//! the node removed their containers, so no teardown competes with the next boot.

use super::kube_raw;
use super::report::{stats, Part, Row};
use super::{interleaved, log, Args};
use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use sandbox_agents_sandbox::kubernetes::{pod, token, DaemonRoute};
use sandbox_agents_sandbox::{
    sandboxd, ExecRequest, KubernetesBackend, KubernetesSettings, SandboxBackend, SandboxSpec,
};
use sandbox_agents_testkit::kube::{sandboxd_image, TestNamespace};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// The deployment the bench's pods belong to.
const DEPLOYMENT: &str = "bench";
/// Cold boots per variant at most: each is a pod start and a teardown on the node.
const COLD_ITERATIONS: usize = 20;

fn exec_true() -> ExecRequest {
    ExecRequest {
        argv: vec!["true".into()],
        workdir: None,
        env: Vec::new(),
        timeout: Duration::from_secs(60),
        max_output: 1 << 20,
        stdin: None,
    }
}

fn session_spec(template: &SandboxSpec) -> SandboxSpec {
    SandboxSpec {
        session: uuid::Uuid::new_v4().to_string(),
        ..template.clone()
    }
}

/// The environment of the part: the namespace, the backend and kube's client as the same
/// service account.
struct Cluster {
    settings: KubernetesSettings,
    backend: KubernetesBackend,
    pods: Api<Pod>,
    key: [u8; 32],
}

async fn client_of(path: &std::path::Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

pub async fn parts(
    args: &Args,
    template: &SandboxSpec,
    docker: &bollard::Docker,
) -> anyhow::Result<Vec<Part>> {
    log("kubernetes: a namespace on the test cluster");
    let ns = TestNamespace::new().await;
    let result = async {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        let mut settings = KubernetesSettings::new(&ns.name, &sandboxd_image(), key);
        settings.kubeconfig = Some(ns.kubeconfig.clone());
        let backend = KubernetesBackend::connect(&settings, DEPLOYMENT)
            .await
            .context("connecting the Kubernetes backend to the test cluster")?;
        let pods = Api::namespaced(client_of(&ns.kubeconfig).await?, &ns.name);
        let cluster = Cluster {
            settings,
            backend,
            pods,
            key,
        };
        let pooled = cluster.backend.pooled_name(DEPLOYMENT);
        cluster
            .backend
            .create_pooled(&pooled, &session_spec(template))
            .await
            .context("pooling a pod")?;
        let mut out = Vec::new();
        log(format!(
            "kubernetes: API requests, {} + {} iterations × 2 variants",
            args.warmup, args.iterations
        ));
        let (part, floor) = api_requests(args, &cluster, &pooled, template).await?;
        out.push(part);
        let cold = Args {
            iterations: args.iterations.min(COLD_ITERATIONS),
            ..args.clone()
        };
        log(format!(
            "kubernetes: cold boots, {} + {} iterations × 2 variants",
            cold.warmup, cold.iterations
        ));
        out.push(cold_boot(&cold, &cluster, template, docker, floor).await?);
        log(format!(
            "kubernetes: warm claims, {} + {} iterations × 7 variants",
            args.warmup, args.iterations
        ));
        out.push(warm_claim(args, &cluster, &pooled).await?);
        let _ = cluster.backend.remove(&pooled).await;
        Ok(out)
    }
    .await;
    ns.remove().await;
    result
}

/// The raw API server's latency; returns the part and the `GET`'s p50 (ms).
async fn api_requests(
    args: &Args,
    cluster: &Cluster,
    pooled: &str,
    template: &SandboxSpec,
) -> anyhow::Result<(Part, f64)> {
    let mut rows = vec![
        Row::new(
            "kube: `create` of a session's pod, `dryRun=All`",
            "validation, admission and RBAC of the backend's whole pod spec; nothing stored",
        ),
        Row::new(
            "kube: `GET` of a pod",
            "one authenticated, authorized read from the watch cache",
        ),
    ];
    let spec = session_spec(template);
    let name = pod::pod_name(&spec.session);
    let hash = sandboxd::tcp::token_hash(&token(&cluster.key, &cluster.settings.namespace, &name));
    let image = spec.image.clone();
    let dry = pod::pod(
        &cluster.settings,
        DEPLOYMENT,
        &name,
        (&spec, pod::Owner::Session),
        &image,
        &hash,
        None,
    );
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    interleaved(args, &mut rows, |v| {
        let (dry, params) = (&dry, &params);
        async move {
            let t0 = Instant::now();
            match v {
                0 => {
                    cluster.pods.create(params, dry).await?;
                }
                _ => {
                    cluster.pods.get(pooled).await?;
                }
            }
            Ok(t0.elapsed())
        }
    })
    .await?;
    let floor = stats(&rows[1].samples).p50;
    Ok((
        Part {
            title: "Kubernetes: the API server's own request latency",
            rows,
            notes: String::new(),
        },
        floor,
    ))
}

async fn cold_boot(
    args: &Args,
    cluster: &Cluster,
    template: &SandboxSpec,
    docker: &bollard::Docker,
    floor: f64,
) -> anyhow::Result<Part> {
    let mut rows = vec![
        Row::new(
            "KubernetesBackend::create → daemon answered",
            "list the session's old pods, create, watch until the sandbox container runs, connect to the daemon (token, HTTP/2, hello)",
        ),
        Row::new(
            "kube: create + watch until `Running`, then the daemon's hello",
            "the raw path below, and then the daemon opened as the backend opens it",
        ),
        Row::new(
            "kube: create + watch until phase `Running` (no daemon)",
            "the same pod spec (pod::pod), `POST` then a watch from the version it returned",
        ),
    ];
    let steps = RefCell::new(Vec::new());
    interleaved(args, &mut rows, |v| {
        let steps = &steps;
        async move {
            let spec = session_spec(template);
            match v {
                0 => {
                    let t0 = Instant::now();
                    let sandbox = cluster.backend.create(&spec).await?;
                    let d = t0.elapsed();
                    let uid = kube_raw::uid(&cluster.pods, &sandbox.id).await?;
                    cluster.backend.remove(&sandbox.id).await?;
                    if let Some(uid) = uid {
                        kube_raw::containers_gone(docker, &uid).await?;
                    }
                    Ok(d)
                }
                1 => {
                    // Its samples are the raw row's plus the daemon step: filled below.
                    Ok(Duration::ZERO)
                }
                _ => {
                    let nonce = &uuid::Uuid::new_v4().simple().to_string()[..8];
                    let name = format!("{}-{nonce}", pod::pod_name(&spec.session));
                    let secret = token(&cluster.key, &cluster.settings.namespace, &name);
                    let pod = pod::pod(
                        &cluster.settings,
                        DEPLOYMENT,
                        &name,
                        (&spec, pod::Owner::Session),
                        &spec.image,
                        &sandboxd::tcp::token_hash(&secret),
                        None,
                    );
                    let boot = kube_raw::boot(&cluster.pods, &pod, &secret).await;
                    let uid = match &boot {
                        Ok(b) => Some(b.uid.clone()),
                        Err(_) => kube_raw::uid(&cluster.pods, &name).await?,
                    };
                    kube_raw::delete(&cluster.pods, docker, &name, uid.as_deref().unwrap_or(""))
                        .await?;
                    let boot = boot?;
                    let _ = boot.ip;
                    steps.borrow_mut().push(boot.steps);
                    Ok(boot.steps[..3].iter().sum())
                }
            }
        }
    })
    .await?;
    // The raw path with the daemon: the same boots' four steps.
    let steps = &steps.into_inner()[args.warmup..];
    rows[1].samples = steps.iter().map(|s| s.iter().sum()).collect();
    let mut notes = String::from(
        "Where a raw cold boot goes (the step-by-step row):\n\n| Step | p50 ms | mean ms |\n|---|---:|---:|\n",
    );
    for (i, name) in kube_raw::STEPS.iter().enumerate() {
        let st = stats(&steps.iter().map(|s| s[i]).collect::<Vec<_>>());
        notes += &format!("| {name} | {:.1} | {:.1} |\n", st.p50, st.mean);
    }
    let ours = stats(&rows[0].samples).p50;
    let raw = stats(&rows[2].samples).p50;
    notes += &format!(
        "\nOver the API server's own request latency (a `GET`, p50 {floor:.1} ms): the backend's \
         cold boot is {:.0}× it, the raw create-to-`Running` {:.0}×.\n",
        ours / floor,
        raw / floor
    );
    Ok(Part {
        title: "Kubernetes: cold boot (create to running)",
        rows,
        notes,
    })
}

async fn warm_claim(args: &Args, cluster: &Cluster, pooled: &str) -> anyhow::Result<Part> {
    let mut rows = vec![
        Row::new(
            "claim on the replica that pooled it: `assign` + `exec true`",
            "GET + optimistic merge PATCH of the labels, then one command over the open daemon connection",
        ),
        Row::new(
            "claim on another replica: `assign` + `exec true`",
            "the same, by a backend that never reached the pod: the exec first reads its address (GET) and connects (TCP, token, HTTP/2, hello)",
        ),
        Row::new("`assign` alone", "GET + optimistic merge PATCH"),
        Row::new(
            "`exec true` alone, connection open",
            "one HTTP/2 stream to the daemon",
        ),
        Row::new(
            "kube: one merge `PATCH` of the labels",
            "what `assign` writes, without reading the version first",
        ),
        Row::new(
            "claim on another replica through a port-forward: `assign` + `exec true`",
            "as on another replica, with `--kubernetes-daemon-route port-forward`: the connect is a WebSocket through the API server and the node instead of TCP to the pod",
        ),
        Row::new(
            "`exec true` alone through a port-forward, connection open",
            "one HTTP/2 stream to the daemon, inside the port-forward's WebSocket",
        ),
    ];
    let req = exec_true();
    // The other replicas: a backend of their own per iteration (made outside the timed
    // region), on each route.
    let mut forwarded = cluster.settings.clone();
    forwarded.route = DaemonRoute::PortForward;
    let (others, others_forwarded) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
    for _ in 0..args.warmup + args.iterations {
        let other = KubernetesBackend::connect(&cluster.settings, DEPLOYMENT)
            .await
            .context("connecting another replica's backend")?;
        others.borrow_mut().push(other);
        let other = KubernetesBackend::connect(&forwarded, DEPLOYMENT)
            .await
            .context("connecting another replica's backend, through port-forwards")?;
        others_forwarded.borrow_mut().push(other);
    }
    // One replica on the port-forward route whose connection to the pod stays open.
    let forwarding = KubernetesBackend::connect(&forwarded, DEPLOYMENT)
        .await
        .context("connecting a backend through port-forwards")?;
    interleaved(args, &mut rows, |v| {
        let (req, others, others_forwarded) = (&req, &others, &others_forwarded);
        let forwarding = &forwarding;
        async move {
            let session = uuid::Uuid::new_v4().to_string();
            let backend = &cluster.backend;
            let who = &session;
            let claim = |backend: KubernetesBackend| async move {
                backend.assign(pooled, who).await?;
                let out = backend.exec(pooled, req).await?;
                anyhow::ensure!(out.exit_code == 0, "exec true: {out:?}");
                Ok::<_, anyhow::Error>(())
            };
            let t0 = Instant::now();
            match v {
                0 => claim(backend.clone()).await?,
                1 | 5 => {
                    let replicas = if v == 1 { others } else { others_forwarded };
                    let other = replicas
                        .borrow_mut()
                        .pop()
                        .context("a backend per iteration")?;
                    let t0 = Instant::now();
                    claim(other).await?;
                    return Ok(t0.elapsed());
                }
                2 => backend.assign(pooled, &session).await?,
                3 | 6 => {
                    let on = if v == 3 { backend } else { forwarding };
                    let out = on.exec(pooled, req).await?;
                    anyhow::ensure!(out.exit_code == 0, "exec true: {out:?}");
                }
                _ => {
                    let patch = serde_json::json!({"metadata": {
                        "labels": {pod::LABEL_SESSION: session},
                    }});
                    cluster
                        .pods
                        .patch(pooled, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
            }
            Ok(t0.elapsed())
        }
    })
    .await?;
    let notes = format!(
        "The sessions layer (crates/sessions/src/pool.rs) runs `assign` beside the boot, not \
         before it: a claim's critical path in the control plane is the claim row, \
         `known_running` (no request when the daemon connection is open, else one `GET`) and \
         the first command; `assign` alone is p50 {:.1} ms.\n",
        stats(&rows[2].samples).p50
    );
    Ok(Part {
        title: "Kubernetes: warm claim (a pooled pod handed to a session)",
        rows,
        notes,
    })
}
