//! This deployment's pods as they end, from a watch (kube-runtime's `watcher`: a list, then a
//! watch with bookmarks, listed again from scratch when the API server answers `410 Gone`,
//! reconnected with backoff on any other error), read in sandbox terms: an OOM kill, an
//! eviction, a node lost, a pod deleted by someone.
//!
//! Each pod is reported once while it exists (a finished pod's status keeps changing), and
//! once more when it is deleted if it was not reported before.

use super::status;
use crate::SandboxEnded;
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The pods of `selector` as they end.
pub fn ended(pods: Api<Pod>, selector: String) -> BoxStream<'static, SandboxEnded> {
    let reported = Arc::new(Mutex::new(HashSet::<String>::new()));
    watcher::watcher(pods, watcher::Config::default().labels(&selector))
        .default_backoff()
        .filter_map(move |event| {
            let reported = reported.clone();
            async move {
                let mut reported = reported.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                        let id = pod.metadata.name.clone()?;
                        let reason = status::ended(&pod)?;
                        reported.insert(id.clone()).then_some(SandboxEnded { id, reason })
                    }
                    Ok(Event::Delete(pod)) => {
                        let id = pod.metadata.name.clone()?;
                        let first = reported.insert(id.clone());
                        // Forgotten once gone: a pod name is never used again.
                        reported.remove(&id);
                        first.then(|| SandboxEnded {
                            id,
                            reason: status::ended(&pod)
                                .unwrap_or_else(|| "its pod was deleted".to_owned()),
                        })
                    }
                    Ok(Event::Init | Event::InitDone) => None,
                    Err(e) => {
                        tracing::warn!(error = %e, "the watch on sandbox pods failed; it reconnects");
                        None
                    }
                }
            }
        })
        .boxed()
}
