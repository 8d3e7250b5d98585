//! The pods bound to this node: a watch on them (`spec.nodeName=<node>`, relisted on `410
//! Gone` by kube-runtime's watcher) hands each pod to a worker of its own, which runs it as
//! the kubelet's pod workers do, one step at a time, each step a function of the pod and of
//! what Docker shows:
//!
//! - the next init container is started once the one before it exited 0; after the last,
//!   the app containers are started (the first one on the pod IP, the others in its network
//!   namespace: see [`crate::network`]);
//! - the status is computed ([`crate::status`]) and PATCHed when it changed;
//! - a pod with a `deletionTimestamp` has its containers stopped within its grace period and
//!   removed with its volumes, then is deleted with `gracePeriodSeconds: 0` and a uid
//!   precondition, as the kubelet's final delete ([`crate::teardown`]);
//! - a pod gone from the API has its containers and volumes removed.
//!
//! A worker steps on every change of its pod, on every Docker event about its containers
//! ([`crate::events`]: an exit, an OOM kill or a removal is reported at once), and every
//! [`TICK`], for what the events missed. On start, containers of
//! this node whose pod the first listing lacks are removed; containers of listed pods are
//! adopted as they are (a running one is reported Running again).

use crate::containers::{self, Placement, Waiting};
use crate::{status, teardown, volumes, Context};
use bollard::models::ContainerInspectResponse;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

/// How often a worker looks at its containers when nothing else wakes it.
pub const TICK: Duration = Duration::from_secs(5);

struct Worker {
    pod: watch::Sender<Option<Pod>>,
    /// Wakes the worker when Docker says one of its containers changed.
    nudge: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// Watches this node's pods until `shutdown`, keeping one worker per pod.
pub async fn run(ctx: Context, shutdown: CancellationToken) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let config =
        watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.settings.node_name));
    let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut listed: HashSet<String> = HashSet::new();
    let mut swept = false;
    let (uids, mut changed) = tokio::sync::mpsc::unbounded_channel();
    let events = tokio::spawn(crate::events::forward(ctx.clone(), uids, shutdown.clone()));
    loop {
        let event = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(uid) = changed.recv() => {
                if let Some(w) = workers.get(&uid) {
                    w.nudge.notify_one();
                }
                continue;
            }
            next = stream.next() => match next {
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "the watch of this node's pods failed; it retries");
                    continue;
                }
                None => break,
            },
        };
        match event {
            watcher::Event::Init => listed.clear(),
            watcher::Event::InitApply(pod) => {
                listed.insert(uid(&pod));
                dispatch(&ctx, &shutdown, &mut workers, pod);
            }
            watcher::Event::InitDone => {
                // Pods deleted while the watch was down.
                let gone: Vec<String> = workers
                    .keys()
                    .filter(|u| !listed.contains(*u))
                    .cloned()
                    .collect();
                for uid in gone {
                    if let Some(w) = workers.remove(&uid) {
                        let _ = w.pod.send(None);
                    }
                }
                if !swept {
                    swept = true;
                    if let Err(e) = teardown::sweep(&ctx, &listed).await {
                        tracing::warn!(
                            error = format!("{e:#}"),
                            "could not remove the containers of pods that are gone"
                        );
                    }
                }
            }
            watcher::Event::Apply(pod) => dispatch(&ctx, &shutdown, &mut workers, pod),
            watcher::Event::Delete(pod) => {
                if let Some(w) = workers.remove(&uid(&pod)) {
                    let _ = w.pod.send(None);
                }
            }
        }
    }
    shutdown.cancel();
    let _ = events.await;
    for (_, w) in workers {
        let _ = w.task.await;
    }
    Ok(())
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// Hands the pod to its worker, starting one if it has none (or its worker finished).
fn dispatch(
    ctx: &Context,
    shutdown: &CancellationToken,
    workers: &mut HashMap<String, Worker>,
    pod: Pod,
) {
    let uid = uid(&pod);
    if let Some(w) = workers.get(&uid).filter(|w| !w.task.is_finished()) {
        let _ = w.pod.send(Some(pod));
        return;
    }
    let (tx, rx) = watch::channel(Some(pod));
    let nudge = Arc::new(Notify::new());
    let task = tokio::spawn(work(
        ctx.clone(),
        uid.clone(),
        rx,
        nudge.clone(),
        shutdown.clone(),
    ));
    workers.insert(
        uid,
        Worker {
            pod: tx,
            nudge,
            task,
        },
    );
}

/// What a worker remembers between steps.
struct Memory {
    /// The last status written (or found in place): an equal one is not written again.
    written: Option<serde_json::Value>,
    /// The pod's status as the API server answered that write. The agent is the only writer
    /// of a bound pod's status, so this is never older than the watched pod's, and can be
    /// newer: a step must not take a container it reported a moment ago, which the watch
    /// has not delivered yet, for one never started (and start it again).
    status: Option<k8s_openapi::api::core::v1::PodStatus>,
    /// The pod IP chosen for the first app container.
    pod_ip: Option<Ipv4Addr>,
    start_time: Time,
    volumes_ready: bool,
}

async fn work(
    ctx: Context,
    uid: String,
    mut pod: watch::Receiver<Option<Pod>>,
    nudge: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let mut memory = Memory {
        written: None,
        status: None,
        pod_ip: None,
        start_time: Time(k8s_openapi::jiff::Timestamp::now()),
        volumes_ready: false,
    };
    loop {
        let current = pod.borrow_and_update().clone();
        let result = match &current {
            None => {
                tracing::info!(pod.uid = %uid, "the pod is gone from the API: removing its containers");
                match teardown::remove(&ctx, &uid, None).await {
                    Ok(()) => return,
                    Err(e) => Err(e),
                }
            }
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                match teardown::terminate(&ctx, p).await {
                    Ok(()) => return,
                    Err(e) => Err(e),
                }
            }
            Some(p) => step(&ctx, p, &mut memory).await,
        };
        if let Err(e) = result {
            tracing::warn!(pod.uid = %uid, error = format!("{e:#}"), "a step of the pod failed; it is tried again");
        }
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            changed = pod.changed() => if changed.is_err() && pod.borrow().is_some() { return },
            _ = nudge.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}

/// One step of a pod that runs: start what is due, then report.
async fn step(ctx: &Context, watched: &Pod, memory: &mut Memory) -> anyhow::Result<()> {
    let mut pod = watched.clone();
    if let Some(status) = &memory.status {
        pod.status = Some(status.clone());
    }
    let pod = &pod;
    let uid = uid(pod);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        // Terminal for good, as on a kubelet: the containers stay until the pod is deleted.
        return Ok(());
    }
    let failure = volumes::unsupported(pod).map(|m| (volumes::UNSUPPORTED, m));
    let mut containers = containers::observe(ctx, &uid).await?;
    let mut waiting = HashMap::new();
    if failure.is_none() {
        if !memory.volumes_ready {
            volumes::ensure(ctx, pod).await?;
            memory.volumes_ready = true;
        }
        if advance(ctx, pod, &containers, memory, &mut waiting).await {
            containers = containers::observe(ctx, &uid).await?;
        }
    }
    let spec = pod.spec.clone().unwrap_or_default();
    let pod_ip = spec
        .containers
        .first()
        .and_then(|c| containers.get(&c.name))
        .and_then(|i| containers::ip_of(ctx, i));
    let desired = status::desired(&status::Observed {
        pod,
        containers: &containers,
        waiting: &waiting,
        pod_ip,
        host_ip: ctx.network.gateway,
        start_time: memory.start_time.clone(),
        failure,
    });
    if memory.written.as_ref() == Some(&desired) {
        return Ok(());
    }
    let api: Api<Pod> = Api::namespaced(
        ctx.client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    );
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    tracing::info!(pod = %name, phase = status::phase(&desired), "reporting the pod's status");
    let patched = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"status": desired})),
        )
        .await?;
    memory.written = Some(desired);
    memory.status = patched.status;
    Ok(())
}

/// Whether the container was reported once (it has a containerID in the status).
fn reported(pod: &Pod, name: &str, init: bool) -> bool {
    let status = pod.status.as_ref();
    let list = if init {
        status.and_then(|s| s.init_container_statuses.as_ref())
    } else {
        status.and_then(|s| s.container_statuses.as_ref())
    };
    list.into_iter()
        .flatten()
        .any(|s| s.name == name && s.container_id.is_some())
}

fn exited_ok(inspect: &ContainerInspectResponse) -> Option<bool> {
    let state = inspect.state.as_ref()?;
    match state.status? {
        bollard::models::ContainerStateStatusEnum::EXITED
        | bollard::models::ContainerStateStatusEnum::DEAD => {
            Some(state.exit_code == Some(0) && state.oom_killed != Some(true))
        }
        _ => None,
    }
}

/// Starts the containers that are due; whether it started any. A container that cannot be
/// made is recorded in `waiting`.
async fn advance(
    ctx: &Context,
    pod: &Pod,
    containers: &HashMap<String, ContainerInspectResponse>,
    memory: &mut Memory,
    waiting: &mut HashMap<String, Waiting>,
) -> bool {
    let spec = pod.spec.clone().unwrap_or_default();
    let apps_exist = spec
        .containers
        .iter()
        .any(|c| containers.contains_key(&c.name));
    if !apps_exist {
        for c in spec.init_containers.iter().flatten() {
            match containers.get(&c.name) {
                Some(i) if exited_ok(i) == Some(true) => continue,
                // Running, or failed (the status says so).
                Some(_) => return false,
                None if reported(pod, &c.name, true) => return false,
                None => {
                    return match containers::start(ctx, pod, c, &Placement::Own, memory.pod_ip)
                        .await
                    {
                        Ok(_) => true,
                        Err(w) => {
                            waiting.insert(c.name.clone(), w);
                            false
                        }
                    };
                }
            }
        }
    }
    let Some(first) = spec.containers.first() else {
        return false;
    };
    let mut started = false;
    let first_id = match containers.get(&first.name) {
        Some(i) => i.id.clone().unwrap_or_default(),
        None if reported(pod, &first.name, false) => return false,
        None => {
            let ip = match memory.pod_ip {
                Some(ip) => ip,
                None => match ctx.network.pick_ip(&ctx.docker).await {
                    Ok(ip) => *memory.pod_ip.insert(ip),
                    Err(e) => {
                        tracing::warn!(error = format!("{e:#}"), "no pod IP");
                        return false;
                    }
                },
            };
            match containers::start(ctx, pod, first, &Placement::PodIp(ip), Some(ip)).await {
                Ok(id) => {
                    started = true;
                    id
                }
                Err(w) => {
                    if w.reason == "PodIPTaken" {
                        // Another agent took it meanwhile: the next step picks another.
                        memory.pod_ip = None;
                    }
                    waiting.insert(first.name.clone(), w);
                    return false;
                }
            }
        }
    };
    for c in spec.containers.iter().skip(1) {
        if containers.contains_key(&c.name) || reported(pod, &c.name, false) {
            continue;
        }
        match containers::start(
            ctx,
            pod,
            c,
            &Placement::Join(first_id.clone()),
            memory.pod_ip,
        )
        .await
        {
            Ok(_) => started = true,
            Err(w) => {
                waiting.insert(c.name.clone(), w);
            }
        }
    }
    started
}
