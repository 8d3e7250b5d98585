//! What the cluster reports about a sandbox's pod, read in sandbox terms: running at an
//! address, still starting, or failed with the reason a person needs (an image that cannot
//! be pulled, a node that cannot take it, an OOM kill, an eviction).

use super::pod::CONTAINER;
use crate::SandboxError;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use std::net::IpAddr;

/// Where a pod is in its start.
#[derive(Debug)]
pub enum Progress {
    /// Its sandbox container runs, at this address.
    Running(IpAddr),
    /// Not yet; what it waits on, for a timeout's message.
    Starting(String),
    /// It will not run.
    Failed(SandboxError),
}

/// Reasons a container waits with that no waiting cures (the kubelet's own words).
const IMAGE_REASONS: &[&str] = &[
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
];
const CONFIG_REASONS: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
];

fn statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let status = pod.status.as_ref();
    let init = status.and_then(|s| s.init_container_statuses.as_deref());
    let main = status.and_then(|s| s.container_statuses.as_deref());
    init.into_iter().chain(main).flatten()
}

/// The sandbox container's status, if reported.
fn sandbox_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == CONTAINER)
}

/// Whether the pod's sandbox container runs (and the pod is not being deleted).
pub fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && sandbox_status(pod)
            .and_then(|c| c.state.as_ref())
            .is_some_and(|s| s.running.is_some())
}

/// The pod's address, if it has one.
pub fn address(pod: &Pod) -> Option<IpAddr> {
    pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()
}

/// One line on why a terminated container ended (`OOMKilled`, exit 137, ...).
fn termination(c: &ContainerStatus) -> Option<String> {
    let t = c.state.as_ref()?.terminated.as_ref()?;
    let mut line = format!(
        "container {} ended: {} (exit {})",
        c.name,
        t.reason.as_deref().unwrap_or("terminated"),
        t.exit_code
    );
    if let Some(m) = t.message.as_deref().filter(|m| !m.is_empty()) {
        line.push_str(&format!(": {m}"));
    }
    Some(line)
}

/// Where the pod is in its start.
pub fn progress(pod: &Pod) -> Progress {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    if pod.metadata.deletion_timestamp.is_some() {
        return Progress::Failed(SandboxError::NotFound(name.to_owned()));
    }
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    for c in statuses(pod) {
        let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = waiting.reason.as_deref().unwrap_or_default();
        let message = waiting.message.as_deref().unwrap_or_default();
        if IMAGE_REASONS.contains(&reason) {
            return Progress::Failed(SandboxError::ImageMissing(format!(
                "{} ({reason}: {message})",
                c.image
            )));
        }
        if CONFIG_REASONS.contains(&reason) {
            return Progress::Failed(SandboxError::Backend(format!(
                "the pod {name} cannot start its container {}: {reason}: {message}",
                c.name
            )));
        }
    }
    if matches!(phase, "Failed" | "Succeeded") {
        let why: Vec<String> = statuses(pod).filter_map(termination).collect();
        let reason = status
            .and_then(|s| s.reason.clone().or(s.message.clone()))
            .unwrap_or_default();
        return Progress::Failed(SandboxError::Backend(format!(
            "the pod {name} ended ({phase}{}){}",
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            },
            if why.is_empty() {
                String::new()
            } else {
                format!("; {}", why.join("; "))
            }
        )));
    }
    if is_running(pod) {
        if let Some(ip) = address(pod) {
            return Progress::Running(ip);
        }
    }
    Progress::Starting(describe(pod))
}

/// The pod's state in a sentence: its phase, the conditions that are not true and why, and
/// what its containers wait on.
pub fn describe(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let mut parts = vec![format!(
        "phase {}",
        status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending")
    )];
    for c in status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
    {
        if c.status != "True" {
            parts.push(format!(
                "{} {}{}",
                c.type_,
                c.reason.as_deref().unwrap_or("not yet"),
                c.message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ));
        }
    }
    for c in statuses(pod) {
        if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            parts.push(format!(
                "container {} waiting: {}",
                c.name,
                w.reason.as_deref().unwrap_or("?")
            ));
        }
    }
    if status.and_then(|s| s.conditions.as_ref()).is_none() && statuses(pod).next().is_none() {
        parts.push(
            "no node has taken it (is a node Ready, and does one match the node selector?)"
                .to_owned(),
        );
    }
    parts.join(", ")
}

/// Why a pod that was running ended, if it did: its eviction or disruption, else how its
/// sandbox container terminated, else its phase. `None` while it runs or starts.
pub fn ended(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    if status.reason.as_deref() == Some("Evicted") {
        return Some(format!(
            "the pod was evicted: {}",
            status.message.as_deref().unwrap_or("no reason given")
        ));
    }
    let disruption = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True");
    if let Some(c) = disruption {
        return Some(format!(
            "the pod was disrupted: {}{}",
            c.reason.as_deref().unwrap_or("no reason given"),
            c.message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    if let Some(line) = sandbox_status(pod).and_then(termination) {
        return Some(line);
    }
    match status.phase.as_deref() {
        Some(phase @ ("Failed" | "Succeeded")) => Some(format!(
            "the pod ended ({phase}){}",
            status
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
        _ => None,
    }
}
