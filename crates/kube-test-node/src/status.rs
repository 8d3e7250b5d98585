//! A pod's status as a function of what Docker shows of its containers, what the agent could
//! not create (and why), and what the pod's status said before: the status the agent PATCHes.
//!
//! The previous status is the agent's memory: a container it reported (with a containerID)
//! that Docker no longer has was removed behind its back (a node loss, an eviction, a
//! `docker rm -f`) and is reported terminated with the reason [`GONE`]. Every time in the
//! status comes from Docker or from the previous status, so that the same observation gives
//! the same status, and an unchanged pod is not written again.

use crate::containers::Waiting;
use bollard::models::{ContainerInspectResponse, ContainerStateStatusEnum};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The reason of a container (and of its pod) whose Docker container disappeared.
pub const GONE: &str = "ContainerGone";

/// What the status is computed from.
pub struct Observed<'a> {
    pub pod: &'a Pod,
    /// The pod's Docker containers, by their name in the spec.
    pub containers: &'a HashMap<String, ContainerInspectResponse>,
    /// The containers the agent could not create, and why.
    pub waiting: &'a HashMap<String, Waiting>,
    pub pod_ip: Option<Ipv4Addr>,
    pub host_ip: Ipv4Addr,
    /// When the agent took the pod on (kept from the previous status if it has one).
    pub start_time: Time,
    /// A reason and message that fail the pod before any container runs.
    pub failure: Option<(&'static str, String)>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    Waiting,
    Running,
    Terminated { ok: bool, gone: bool },
}

/// The pod's phase in a status this module made.
pub fn phase(status: &Value) -> &str {
    status["phase"].as_str().unwrap_or("Pending")
}

/// The status to write.
pub fn desired(o: &Observed) -> Value {
    let spec = o.pod.spec.clone().unwrap_or_default();
    let previous = o.pod.status.clone().unwrap_or_default();
    let start_time = previous
        .start_time
        .clone()
        .unwrap_or_else(|| o.start_time.clone());
    let inits = spec.init_containers.clone().unwrap_or_default();
    let apps_started = spec
        .containers
        .iter()
        .any(|c| o.containers.contains_key(&c.name));

    let mut init_statuses = Vec::new();
    let mut init_states = Vec::new();
    for c in &inits {
        let before = find(&previous.init_container_statuses, &c.name);
        // An init container removed after it completed, once the app containers exist, is
        // done, not gone.
        let done_and_removed = apps_started && !o.containers.contains_key(&c.name);
        let (value, state) = if done_and_removed && before.is_none() {
            (
                json!({"name": c.name, "image": c.image, "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}),
                State::Terminated {
                    ok: true,
                    gone: false,
                },
            )
        } else {
            container_status(
                c,
                o.containers.get(&c.name),
                before,
                o.waiting.get(&c.name),
                "PodInitializing",
            )
        };
        init_statuses.push(value);
        init_states.push(state);
    }
    let init_failed = init_states
        .iter()
        .any(|s| matches!(s, State::Terminated { ok: false, .. }));
    let initialized = init_states
        .iter()
        .all(|s| matches!(s, State::Terminated { ok: true, .. }));

    let mut app_statuses = Vec::new();
    let mut app_states = Vec::new();
    for c in &spec.containers {
        let before = find(&previous.container_statuses, &c.name);
        let default = if initialized {
            "ContainerCreating"
        } else {
            "PodInitializing"
        };
        let (value, state) = container_status(
            c,
            o.containers.get(&c.name),
            before,
            o.waiting.get(&c.name),
            default,
        );
        app_statuses.push(value);
        app_states.push(state);
    }
    let all_terminated = app_states
        .iter()
        .all(|s| matches!(s, State::Terminated { .. }));
    let gone = init_states
        .iter()
        .chain(&app_states)
        .any(|s| matches!(s, State::Terminated { gone: true, .. }));
    let (phase, reason) = if let Some((reason, message)) = &o.failure {
        ("Failed", Some((*reason, message.clone())))
    } else if init_failed
        || (all_terminated
            && app_states
                .iter()
                .any(|s| matches!(s, State::Terminated { ok: false, .. })))
    {
        let reason = gone.then(|| {
            (
                GONE,
                "a container of the pod was removed from the node behind the agent's back"
                    .to_owned(),
            )
        });
        ("Failed", reason)
    } else if all_terminated && !app_states.is_empty() {
        ("Succeeded", None)
    } else if app_states.contains(&State::Waiting) || !initialized {
        ("Pending", None)
    } else {
        ("Running", None)
    };
    let ready = phase == "Running" && app_states.iter().all(|s| *s == State::Running);
    let terminal = matches!(phase, "Succeeded" | "Failed");

    // Conditions keep their transition time while their status holds.
    let condition = |type_: &str, status: bool, reason: Option<&str>| {
        let status = if status { "True" } else { "False" };
        let since = find_condition(o.pod, type_)
            .filter(|(s, _)| s == status)
            .and_then(|(_, t)| t)
            .unwrap_or_else(|| start_time.clone());
        let mut c = json!({"type": type_, "status": status, "lastTransitionTime": since});
        if let Some(reason) = reason {
            c["reason"] = json!(reason);
        }
        c
    };
    let not_ready = if terminal {
        Some("PodCompleted")
    } else if ready {
        None
    } else {
        Some("ContainersNotReady")
    };
    let conditions = vec![
        condition(
            "PodReadyToStartContainers",
            !terminal || o.containers.values().any(is_running),
            None,
        ),
        condition(
            "Initialized",
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
        ),
        condition("Ready", ready, not_ready),
        condition("ContainersReady", ready, not_ready),
        condition("PodScheduled", true, None),
    ];
    let mut status = json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": o.host_ip.to_string(),
        "hostIPs": [{"ip": o.host_ip.to_string()}],
        "startTime": start_time,
        "initContainerStatuses": init_statuses,
        "containerStatuses": app_statuses,
        "reason": null,
        "message": null,
    });
    if let Some(ip) = o
        .pod_ip
        .or_else(|| previous.pod_ip.as_deref().and_then(|i| i.parse().ok()))
    {
        status["podIP"] = json!(ip.to_string());
        status["podIPs"] = json!([{"ip": ip.to_string()}]);
    }
    if let Some((reason, message)) = reason {
        status["reason"] = json!(reason);
        status["message"] = json!(message);
    }
    status
}

fn find<'a>(statuses: &'a Option<Vec<ContainerStatus>>, name: &str) -> Option<&'a ContainerStatus> {
    statuses.as_ref()?.iter().find(|s| s.name == name)
}

fn find_condition(pod: &Pod, type_: &str) -> Option<(String, Option<Time>)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.last_transition_time.clone()))
}

fn is_running(inspect: &ContainerInspectResponse) -> bool {
    inspect
        .state
        .as_ref()
        .and_then(|s| s.running)
        .unwrap_or(false)
}

/// Docker's time, as Kubernetes writes it; None for Docker's "never" (year 1).
fn docker_time(t: Option<&str>) -> Option<Time> {
    let t: k8s_openapi::jiff::Timestamp = t?.parse().ok()?;
    (t.as_second() > 0).then_some(Time(t))
}

/// How long after a SIGKILL exit under a memory limit Docker's OOM flag is waited for.
const OOM_FLAG_WINDOW: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether `inspect` is a container that exited by SIGKILL (137) under a memory limit less
/// than [`OOM_FLAG_WINDOW`] ago without Docker's OOM flag: an OOM kill whose flag may still
/// be on its way.
fn oom_may_be_pending(inspect: &ContainerInspectResponse) -> bool {
    let Some(state) = inspect.state.as_ref() else {
        return false;
    };
    let limited = inspect
        .host_config
        .as_ref()
        .and_then(|h| h.memory)
        .is_some_and(|m| m > 0);
    let finished = state
        .finished_at
        .as_deref()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
    let recent = finished.is_some_and(|t| {
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(t);
        age.as_secs_f64() < OOM_FLAG_WINDOW.as_secs_f64()
    });
    limited && recent && state.exit_code == Some(137) && state.oom_killed != Some(true)
}

/// One container's status and state.
fn container_status(
    c: &Container,
    inspect: Option<&ContainerInspectResponse>,
    before: Option<&ContainerStatus>,
    waiting: Option<&Waiting>,
    default_waiting: &str,
) -> (Value, State) {
    let mut value = json!({"name": c.name, "image": c.image, "imageID": "", "ready": false,
                           "restartCount": 0, "started": false});
    let Some(inspect) = inspect else {
        if let Some(before) = before.filter(|b| b.container_id.is_some()) {
            // Reported once: it existed and is gone. A termination reported before stands.
            let mut kept = serde_json::to_value(before).unwrap_or_default();
            let terminated = before.state.as_ref().and_then(|s| s.terminated.as_ref());
            if let Some(t) = terminated {
                kept["ready"] = json!(false);
                return (
                    kept,
                    State::Terminated {
                        ok: t.exit_code == 0,
                        gone: t.reason.as_deref() == Some(GONE),
                    },
                );
            }
            kept["ready"] = json!(false);
            kept["started"] = json!(false);
            kept["state"] = json!({"terminated": {
                "exitCode": 137, "reason": GONE,
                "message": "the container was removed from the node behind the agent's back",
                "startedAt": before.state.as_ref().and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.clone()),
                "containerID": before.container_id,
            }});
            return (
                kept,
                State::Terminated {
                    ok: false,
                    gone: true,
                },
            );
        }
        let (reason, message) = match waiting {
            Some(w) => (w.reason.to_owned(), Some(w.message.clone())),
            None => (default_waiting.to_owned(), None),
        };
        value["state"] = json!({"waiting": {"reason": reason, "message": message}});
        return (value, State::Waiting);
    };
    let id = format!("docker://{}", inspect.id.clone().unwrap_or_default());
    value["containerID"] = json!(id);
    value["imageID"] = json!(format!(
        "docker://{}",
        inspect.image.clone().unwrap_or_default()
    ));
    let state = inspect.state.clone().unwrap_or_default();
    let started_at = docker_time(state.started_at.as_deref());
    match state.status {
        Some(ContainerStateStatusEnum::CREATED) | None => {
            value["state"] = json!({"waiting": {"reason": default_waiting}});
            (value, State::Waiting)
        }
        Some(
            ContainerStateStatusEnum::RUNNING
            | ContainerStateStatusEnum::PAUSED
            | ContainerStateStatusEnum::RESTARTING,
        ) => {
            value["state"] = json!({"running": {"startedAt": started_at}});
            value["ready"] = json!(true);
            value["started"] = json!(true);
            (value, State::Running)
        }
        Some(_) if oom_may_be_pending(inspect) => {
            // Killed moments ago under a memory limit, and Docker does not say OOM yet: its
            // OOM flag comes with containerd's OOM event, which can land after the exit. Not
            // final until it does (the `oom` event wakes the pod's worker) or the window
            // passes (the next tick reports an ordinary kill).
            value["state"] = json!({"running": {"startedAt": started_at}});
            value["started"] = json!(true);
            (value, State::Running)
        }
        Some(_) => {
            let code = state.exit_code.unwrap_or(0);
            let reason = if state.oom_killed == Some(true) {
                "OOMKilled"
            } else if code == 0 {
                "Completed"
            } else {
                "Error"
            };
            let mut terminated = json!({
                "exitCode": code, "reason": reason, "containerID": id,
                "startedAt": started_at, "finishedAt": docker_time(state.finished_at.as_deref()),
            });
            if let Some(error) = state.error.filter(|e| !e.is_empty()) {
                terminated["message"] = json!(error);
            }
            value["state"] = json!({"terminated": terminated});
            (
                value,
                State::Terminated {
                    ok: code == 0 && reason != "OOMKilled",
                    gone: false,
                },
            )
        }
    }
}
