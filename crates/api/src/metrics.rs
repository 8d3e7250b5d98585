//! `GET /metrics`: the process's metrics in Prometheus' text format.
//!
//! The services record counters and histograms through the `metrics` facade wherever the
//! thing happens (`sandbox_agents_*`, see the README's table); this module installs the
//! process's recorder, times every HTTP request by its route, and at each scrape adds what
//! only the database knows (sessions by status, runs in flight, the warm pool, the webhook
//! queue) and the connection pool's use. Labels are low-cardinality by construction: routes
//! are templates, tools are ours, model names are capped (`sandbox_agents_model`), and no id
//! is ever a label.
//!
//! On the API listener the route needs an operator's credential (Prometheus sends it as a
//! bearer token); `--metrics-bind` serves it on a listener of its own without one, for a
//! private interface only a scraper reaches.

use crate::auth::{require_operator, Principal};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Buckets of every `*_seconds` histogram: a millisecond to ten minutes (exec and tool calls
/// run up to 600 s; an HTTP request or an event append takes milliseconds).
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's recorder (once; later calls return the same handle). Call it before
/// the services start, so nothing they count is lost. A process that already has another
/// recorder (an embedding program's) keeps it, and `/metrics` shows what this one records.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics shows only what this one records");
        }
        describe();
        handle
    })
}

/// The help text of the metrics recorded elsewhere, shown as `# HELP` lines.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_histogram!(
        "sandbox_agents_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP requests by method, route template and status (streams: until they end)"
    );
    describe_histogram!("sandbox_agents_session_boot_duration_seconds", Unit::Seconds, "Sandbox boots that reached running, by path: pool (a warm-pool sandbox), cold (a new container), environment (an environment's image)");
    describe_counter!(
        "sandbox_agents_session_boot_failures_total",
        "Boots that ended in error, by path"
    );
    describe_counter!(
        "sandbox_agents_warm_pool_claims_total",
        "Boots that asked the warm pool for a sandbox, by outcome (hit, miss, dead)"
    );
    describe_counter!(
        "sandbox_agents_runs_started_total",
        "Runs started (turns of the agent loop)"
    );
    describe_counter!(
        "sandbox_agents_runs_finished_total",
        "Runs finished, by status and stop reason"
    );
    describe_histogram!(
        "sandbox_agents_run_duration_seconds",
        Unit::Seconds,
        "Runs from start to finish, by status"
    );
    describe_histogram!(
        "sandbox_agents_model_request_duration_seconds",
        Unit::Seconds,
        "Model calls (streamed chat completions, retries included), by model and outcome"
    );
    describe_counter!(
        "sandbox_agents_model_tokens_total",
        "Tokens of answered model calls, by model and type (input, output)"
    );
    describe_histogram!(
        "sandbox_agents_tool_call_duration_seconds",
        Unit::Seconds,
        "Sandbox tool calls of runs, by tool and outcome (answered, cancelled)"
    );
    describe_histogram!("sandbox_agents_exec_duration_seconds", Unit::Seconds, "Commands run in sandboxes (the exec endpoint and tools), by outcome (exited, timed_out, failed)");
    describe_counter!(
        "sandbox_agents_events_appended_total",
        "Events appended to the log"
    );
    describe_gauge!(
        "sandbox_agents_sse_streams_open",
        "Event streams (SSE) this process is sending"
    );
    describe_counter!(
        "sandbox_agents_sse_events_sent_total",
        "Events sent on SSE streams"
    );
    describe_counter!(
        "sandbox_agents_webhook_attempts_total",
        "Webhook delivery attempts, by outcome (delivered, retrying, failed)"
    );
    describe_histogram!(
        "sandbox_agents_webhook_attempt_duration_seconds",
        Unit::Seconds,
        "Webhook delivery attempts, request to response, by outcome"
    );
    describe_counter!(
        "sandbox_agents_event_listener_reconnects_total",
        "Times the LISTEN connection of the live event feed was re-established"
    );
    describe_gauge!(
        "sandbox_agents_server_processes",
        "Server processes alive on the deployment's database, as this one last counted them (they share the rate limits)"
    );
    describe_gauge!(
        "sandbox_agents_sessions",
        "Sessions of the deployment by status (the same in every process)"
    );
    describe_gauge!(
        "sandbox_agents_runs_in_flight",
        "Runs of the deployment running now (the same in every process)"
    );
    describe_gauge!(
        "sandbox_agents_runs_queued",
        "Runs of the deployment waiting for a slot under --max-runs / --max-runs-per-project (the same in every process)"
    );
    describe_gauge!(
        "sandbox_agents_warm_pool_sandboxes",
        "Warm-pool sandboxes of the deployment, by state (ready, starting)"
    );
    describe_gauge!(
        "sandbox_agents_webhook_queue_depth",
        "Webhook deliveries waiting to be delivered (the same in every process)"
    );
    describe_gauge!(
        "sandbox_agents_webhook_queue_oldest_seconds",
        "Age of the oldest waiting webhook delivery"
    );
    describe_gauge!(
        "sandbox_agents_db_pool_connections",
        "This process's database connections, by state (idle, in_use)"
    );
    describe_gauge!(
        "sandbox_agents_db_pool_max_connections",
        "The most database connections this process opens"
    );
    describe_histogram!(
        "sandbox_agents_db_pool_wait_seconds",
        Unit::Seconds,
        "How long a connection took to come from this process's database pool, sampled twice a second (what a request would wait then)"
    );
    describe_counter!(
        "sandbox_agents_db_pool_timeouts_total",
        "Times no database connection was free within the pool's acquire timeout, for a request (answered 503, the server is busy), a worker or the wait probe"
    );
    describe_gauge!(
        "sandbox_agents_session_boots_waiting",
        "Session boots this process took on that wait for a turn (--max-concurrent-boots)"
    );
    describe_counter!(
        "sandbox_agents_session_boots_redriven_total",
        "Sessions left provisioning that no live process booted, booted again by the sweep"
    );
}

/// How often the pool-wait probe samples the database pool.
const POOL_PROBE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Samples how long a connection takes to come from the database pool, twice a second until
/// `shutdown` (`sandbox_agents_db_pool_wait_seconds`): what a request would wait for one at
/// that moment. sqlx has no hook around a caller's wait; a sample taken from the same pool,
/// in the same queue, measures the same thing without wrapping every query.
pub fn spawn_pool_probe(
    db: sandbox_agents_store::Db,
    shutdown: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(POOL_PROBE_EVERY) => {}
                _ = shutdown.cancelled() => break,
            }
            let waited = match sandbox_agents_store::database::acquire_wait(&db).await {
                Ok(w) => w,
                // Timed out: it waited all of it (and counted the timeout).
                Err(sqlx::Error::PoolTimedOut) => {
                    metrics::counter!("sandbox_agents_db_pool_timeouts_total").increment(1);
                    db.options().get_acquire_timeout()
                }
                Err(_) => continue,
            };
            metrics::histogram!("sandbox_agents_db_pool_wait_seconds").record(waited);
        }
    });
}

/// Times a request by its route's template (`/api/sessions/{session_id}`): never the path
/// itself, which holds ids. What no route takes (the web UI's files) is `ui`.
pub async fn layer(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "ui".to_owned(), |m| m.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(req).await;
    metrics::histogram!(
        "sandbox_agents_http_request_duration_seconds",
        "method" => method,
        "route" => route,
        "status" => response.status().as_str().to_owned()
    )
    .record(started.elapsed());
    response
}

/// `GET /metrics` on the API listener: operators only.
pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(scrape_as_operator))
}

/// The router of `--metrics-bind`: `/metrics` without a credential.
pub fn listener_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(state)
}

async fn scrape_as_operator(
    principal: Principal,
    st: State<AppState>,
) -> Result<Response, ApiError> {
    require_operator(&principal, &st.settings.auth)?;
    Ok(scrape(st).await)
}

async fn scrape(State(st): State<AppState>) -> Response {
    let handle = install();
    // A database that does not answer leaves the deployment's gauges at their last values;
    // the process's own metrics are still worth a scrape.
    match sandbox_agents_store::metrics::snapshot(&st.db).await {
        Ok(s) => {
            // Every status, so one whose last session left shows 0 rather than its old count.
            for status in sandbox_agents_domain::session::SessionStatus::ALL {
                let n = s
                    .sessions
                    .iter()
                    .find(|(st, _)| st == status)
                    .map_or(0, |(_, n)| *n);
                metrics::gauge!("sandbox_agents_sessions", "status" => status.as_str())
                    .set(n as f64);
            }
            metrics::gauge!("sandbox_agents_runs_in_flight").set(s.runs_in_flight as f64);
            metrics::gauge!("sandbox_agents_runs_queued").set(s.runs_queued as f64);
            metrics::gauge!("sandbox_agents_warm_pool_sandboxes", "state" => "ready")
                .set(s.pool_ready as f64);
            metrics::gauge!("sandbox_agents_warm_pool_sandboxes", "state" => "starting")
                .set(s.pool_starting as f64);
            metrics::gauge!("sandbox_agents_webhook_queue_depth").set(s.webhook_pending as f64);
            metrics::gauge!("sandbox_agents_webhook_queue_oldest_seconds")
                .set(s.webhook_oldest_pending_seconds);
        }
        Err(e) => tracing::warn!(error = %e, "a metrics scrape could not read the database"),
    }
    let size = st.db.size();
    let idle = st.db.num_idle() as u32;
    metrics::gauge!("sandbox_agents_db_pool_connections", "state" => "idle").set(f64::from(idle));
    metrics::gauge!("sandbox_agents_db_pool_connections", "state" => "in_use")
        .set(f64::from(size.saturating_sub(idle)));
    metrics::gauge!("sandbox_agents_db_pool_max_connections")
        .set(f64::from(st.db.options().get_max_connections()));
    metrics::gauge!("sandbox_agents_session_boots_waiting").set(st.sessions.boots_waiting() as f64);
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        handle.render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    /// The dashboard in `deploy/grafana` queries only metrics this process describes (the
    /// services record them; `describe` lists them all), so a rename cannot leave it blank.
    #[test]
    fn the_dashboard_queries_metrics_that_exist() {
        let dashboard = include_str!("../../../deploy/grafana/sandbox-agents.json");
        let described = include_str!("metrics.rs");
        let mut names: Vec<&str> = dashboard
            .match_indices("sandbox_agents_")
            .map(|(at, _)| {
                let rest = &dashboard[at..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .unwrap_or(rest.len());
                let n = &rest[..end];
                n.strip_suffix("_bucket")
                    .or_else(|| n.strip_suffix("_count"))
                    .unwrap_or(n)
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        assert!(names.len() >= 20, "{names:?}");
        for n in names {
            assert!(
                described.contains(&format!("\"{n}\"")),
                "the dashboard queries {n}, which nothing describes"
            );
        }
    }
}
