//! `--parts burst`: twenty sessions created at once, each timed from its `POST /api/sessions`
//! to its `session.status_running` frame, on a server whose warm pool is fixed at the default
//! size beside one whose pool follows demand (`--warm-pool-size 2 --warm-pool-max 24`), and
//! twenty raw create + start + upload through bollard at once.
//!
//! "Once the pool has seen it coming": every server first takes one untimed burst, its
//! sessions are deleted and its pool refilled (to 2, or to what the burst taught it), then
//! the timed bursts follow, each after the pool is full again. Each server runs on a database
//! of its own, one after the other, so neither's pool or refill competes with the other's.

use crate::ours::{create_agent, create_until_running, delete_session, pool_full};
use crate::report::{Part, Row};
use crate::{log, manifest, raw};
use anyhow::Context;
use bytes::Bytes;
use sandbox_agents_bench::cluster::Cluster;
use sandbox_agents_testkit::TestApp;
use serde_json::json;

/// Sessions created at once.
pub const BURST: usize = 20;
const FIXED: usize = 2;
const ADAPTIVE_MAX: usize = 24;

pub async fn part(
    bursts: usize,
    cluster: &Cluster,
    docker: &bollard::Docker,
    tar: &Bytes,
) -> anyhow::Result<Part> {
    let mut fixed = Row::new(
        "fixed warm pool of 2 (the default before)",
        "`--warm-pool-size 2 --warm-pool-max 0`: two boots take pooled sandboxes, eighteen create their own",
    );
    let mut adaptive = Row::new(
        "warm pool following demand (2 to 24)",
        "`--warm-pool-size 2 --warm-pool-max 24`, after one burst taught it: the pool holds 20",
    );
    let mut raw_row = Row::new(
        "raw: 20 × bollard create + start + upload at once",
        "the Docker calls of a cold boot, twenty at once, no database, no pool",
    );
    let mut sandbox = None;
    for (row, max) in [(&mut fixed, 0), (&mut adaptive, ADAPTIVE_MAX)] {
        let (name, options) = cluster.create_database("bench_burst").await?;
        let measured = async {
            let db = sandbox_agents_store::connect(options.clone(), 40).await?;
            sandbox_agents_store::migrate(&db).await?;
            let app = sandbox_agents_testkit::TestApp::builder()
                .with_pool(FIXED)
                .with_config(|c| c.warm_pool_max = max)
                .with_db(db, options)
                .spawn()
                .await;
            app.sessions.start_pool();
            let s = app.sessions.settings();
            sandbox = Some((s.default_image.clone(), s.limits.clone()));
            let result = bursts_of(&app, bursts, BURST, row).await;
            stop_and_clean(app).await;
            result
        }
        .await;
        cluster.drop_database(&name, log).await;
        measured?;
    }
    // A cold boot's sandbox: the servers' image and limits.
    let (image, limits) = sandbox.context("no server ran")?;
    raw_bursts(docker, (&image, &limits), tar, bursts, BURST, &mut raw_row).await?;
    let p50 = |r: &Row| crate::report::stats(&r.samples).p50;
    let notes = format!(
        "Each row is {bursts} bursts × {BURST} sessions; the numbers are per session, from its \
         request to its running frame. Everything in a burst starts at the same instant, so \
         p99 and max are when the whole burst ran. The pool following demand served the burst \
         with p50 {:.0} ms against {:.0} ms for the fixed pool.",
        p50(&adaptive),
        p50(&fixed)
    );
    Ok(Part {
        title: "A burst of 20 sessions at once (`--parts burst`)",
        rows: vec![adaptive, fixed, raw_row],
        notes,
    })
}

/// Removes every sandbox of `app`'s deployment (the warm pool's too), then stops it.
pub(crate) async fn stop_and_clean(app: TestApp) {
    let left = app.sessions.backend().list().await.unwrap_or_default();
    for c in left {
        let _ = app.sessions.backend().remove(&c.id).await;
    }
    app.stop().await;
}

/// `bursts` timed bursts of `n` raw cold boots (create + start + upload) at once, after an
/// untimed one; each sandbox is removed after its burst.
pub(crate) async fn raw_bursts(
    docker: &bollard::Docker,
    (image, limits): (&str, &sandbox_agents_sandbox::Limits),
    tar: &Bytes,
    bursts: usize,
    n: usize,
    row: &mut Row,
) -> anyhow::Result<()> {
    for b in 0..bursts + 1 {
        let started = std::time::Instant::now();
        let all = futures::future::join_all((0..n).map(|_| async {
            let id = raw::create_start_upload(docker, image, limits, tar).await?;
            Ok::<_, anyhow::Error>((id, started.elapsed()))
        }))
        .await;
        for r in all {
            let (id, took) = r?;
            if b > 0 {
                row.samples.push(took);
            }
            raw::remove(docker, &id).await?;
        }
    }
    Ok(())
}

/// One untimed burst of `n` sessions, then `bursts` timed ones, each once the pool is
/// refilled; each burst's sessions are deleted after it, all at once.
pub(crate) async fn bursts_of(
    app: &TestApp,
    bursts: usize,
    n: usize,
    row: &mut Row,
) -> anyhow::Result<()> {
    let agent = create_agent(
        app,
        json!({"slug": "burst", "name": "burst", "manifest": manifest()}),
    )
    .await?;
    for b in 0..bursts + 1 {
        let target = app.sessions.pool_target().await?;
        pool_full(app, target)
            .await
            .context("waiting for the pool")?;
        log(format!("burst {b} of {n}: the pool holds {target}"));
        let all =
            futures::future::join_all((0..n).map(|_| create_until_running(app, &agent))).await;
        let mut ids = Vec::new();
        for r in all {
            let (id, took, _) = r?;
            if b > 0 {
                row.samples.push(took);
            }
            ids.push(id);
        }
        futures::future::join_all(ids.iter().map(|id| delete_session(app, id)))
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<()>>>()?;
    }
    Ok(())
}
