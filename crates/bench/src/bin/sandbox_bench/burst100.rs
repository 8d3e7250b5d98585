//! `--parts burst100`: a hundred sessions created at once (issue 33), each timed from its
//! `POST /api/sessions` to its `session.status_running` frame, on a server of default
//! settings (a database pool of 32, the warm pool between 2 and 8, boots at once sized from
//! the cores and the pool) and on one with a pool of 8, beside a hundred raw creates, starts
//! and uploads through bollard at once. The pool's wait is read from `/metrics`
//! (`sandbox_agents_db_pool_wait_seconds`, the probe a serving process runs) over each
//! server's bursts.
//!
//! Each server runs on a database of its own, one after the other; every burst starts with
//! the warm pool refilled, and its sessions are deleted after it.

use crate::burst::{bursts_of, raw_bursts, stop_and_clean};
use crate::log;
use crate::report::{Part, Row};
use anyhow::Context;
use bytes::Bytes;
use sandbox_agents_bench::cluster::Cluster;
use sandbox_agents_testkit::TestApp;

/// Sessions created at once.
pub const BURST: usize = 100;

/// A server's pool wait over its bursts, from its `/metrics`: (samples, mean, max bucket).
struct PoolWait {
    samples: f64,
    mean_ms: f64,
    /// The smallest bucket bound every sample fell under.
    max_ms: f64,
}

pub async fn part(
    bursts: usize,
    cluster: &Cluster,
    docker: &bollard::Docker,
    tar: &Bytes,
) -> anyhow::Result<Part> {
    sandbox_agents_api::metrics::install();
    let mut rows = Vec::new();
    let mut waits = Vec::new();
    let mut sandbox = None;
    for (pool, title, how) in [
        (
            32u32,
            "default settings",
            "a database pool of 32, the warm pool 2 to 8, boots at once from the cores and the pool",
        ),
        (
            8,
            "`--db-max-connections 8`",
            "the same with a database pool of 8 (two boots at once)",
        ),
    ] {
        let mut row = Row::new(title, how);
        let (name, options) = cluster.create_database("bench_burst100").await?;
        let measured = async {
            let db = sandbox_agents_store::connect(options.clone(), pool).await?;
            sandbox_agents_store::migrate(&db).await?;
            let app = TestApp::builder()
                .with_pool(2)
                .with_config(|c| c.warm_pool_max = 8)
                .with_db(db.clone(), options)
                .spawn()
                .await;
            app.sessions.start_pool();
            sandbox_agents_api::metrics::spawn_pool_probe(db, app.shutdown.clone());
            let s = app.sessions.settings();
            sandbox = Some((s.default_image.clone(), s.limits.clone()));
            let before = pool_wait(&app).await?;
            let result = bursts_of(&app, bursts, BURST, &mut row).await;
            let after = pool_wait(&app).await?;
            waits.push((title, after.since(&before)));
            stop_and_clean(app).await;
            result
        }
        .await;
        cluster.drop_database(&name, log).await;
        measured?;
        rows.push(row);
    }
    let (image, limits) = sandbox.context("no server ran")?;
    let mut raw_row = Row::new(
        "raw: 100 × bollard create + start + upload at once",
        "the Docker calls of a cold boot, a hundred at once, no database, no pool",
    );
    raw_bursts(docker, (&image, &limits), tar, bursts, BURST, &mut raw_row).await?;
    rows.push(raw_row);
    let waits: Vec<String> = waits
        .iter()
        .map(|(title, w)| {
            format!(
                "{title}: {:.0} samples, mean {:.1} ms, all under {:.0} ms",
                w.samples, w.mean_ms, w.max_ms
            )
        })
        .collect();
    let notes = format!(
        "Each row is {bursts} bursts × {BURST} sessions; the numbers are per session, from its \
         request to its running frame, so max is when the whole burst ran. The database pool's \
         wait, sampled twice a second through the bursts (`sandbox_agents_db_pool_wait_seconds` \
         in `/metrics`): {}.",
        waits.join("; ")
    );
    Ok(Part {
        title: "A burst of 100 sessions at once (`--parts burst100`)",
        rows,
        notes,
    })
}

impl PoolWait {
    /// What was recorded between `earlier` and this reading.
    fn since(&self, earlier: &PoolWait) -> PoolWait {
        let samples = self.samples - earlier.samples;
        let total = self.mean_ms * self.samples - earlier.mean_ms * earlier.samples;
        PoolWait {
            samples,
            mean_ms: if samples > 0.0 { total / samples } else { 0.0 },
            max_ms: self.max_ms,
        }
    }
}

/// The pool-wait histogram as `/metrics` shows it.
async fn pool_wait(app: &TestApp) -> anyhow::Result<PoolWait> {
    let text = app
        .http
        .get(app.url("/metrics"))
        .send()
        .await?
        .text()
        .await?;
    let value = |series: &str| -> f64 {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| {
                let (s, v) = l.rsplit_once(' ')?;
                (s == series).then(|| v.parse().ok()).flatten()
            })
            .unwrap_or(0.0)
    };
    let count = value("sandbox_agents_db_pool_wait_seconds_count");
    let sum = value("sandbox_agents_db_pool_wait_seconds_sum");
    // The smallest bucket holding every sample.
    let max = text
        .lines()
        .filter_map(|l| l.strip_prefix("sandbox_agents_db_pool_wait_seconds_bucket{le=\""))
        .filter_map(|l| {
            let (le, v) = l.split_once("\"} ")?;
            Some((le.parse::<f64>().ok()?, v.parse::<f64>().ok()?))
        })
        .find(|(_, n)| *n >= count)
        .map_or(0.0, |(le, _)| le);
    Ok(PoolWait {
        samples: count,
        mean_ms: if count > 0.0 {
            sum / count * 1000.0
        } else {
            0.0
        },
        max_ms: max * 1000.0,
    })
}
