//! Docker's events about this node's containers (started, exited, OOM-killed, removed), as the
//! uids of the pods they belong to: what wakes a pod's worker at once when a container
//! changes. Events can be missed (while the stream is re-opened after Docker restarts), so
//! the workers also look at Docker every [`crate::pods::TICK`].

use crate::{labels, Context};
use bollard::query_parameters::EventsOptions;
use futures::StreamExt as _;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Sends the pod uid of each event on `uids` until `shutdown` (or until nobody listens).
pub async fn forward(
    ctx: Context,
    uids: mpsc::UnboundedSender<String>,
    shutdown: CancellationToken,
) {
    let mut filters = ctx.owner.filters(None);
    filters.insert("type".to_owned(), vec!["container".to_owned()]);
    filters.insert(
        "event".to_owned(),
        ["start", "die", "oom", "destroy"]
            .map(str::to_owned)
            .to_vec(),
    );
    loop {
        let options = EventsOptions {
            filters: Some(filters.clone()),
            ..Default::default()
        };
        let mut events = std::pin::pin!(ctx.docker.events(Some(options)));
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(event)) => {
                    let uid = event
                        .actor
                        .and_then(|a| a.attributes)
                        .and_then(|mut a| a.remove(labels::UID));
                    if let Some(uid) = uid {
                        if uids.send(uid).is_err() {
                            return;
                        }
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "Docker's event stream failed; it is opened again");
                    break;
                }
                None => break,
            }
        }
        // Not a busy loop when Docker is down.
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
