//! Rate limits hold across processes: each process counts the server processes alive on the
//! database (their liveness locks) and takes that many cells of a credential's bucket per
//! request (`Auth::check_rate`), so N processes together stay within the configured budget.
//! The arithmetic is unit-tested beside `Auth`; this checks the count each process keeps,
//! through its metrics, as processes come and die.

use sandbox_agents_testkit::process::ServerProcess;
use sandbox_agents_testkit::{database_url, eventually, fresh_named_database};
use std::time::Duration;

async fn processes_seen(base: &str) -> Option<u32> {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("sandbox_agents_server_processes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u32)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_process_counts_the_processes_it_shares_the_rate_limits_with() {
    let (db, _options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    let a = ServerProcess::start(&url, &[]).await;
    let b = ServerProcess::start(&url, &[]).await;
    let wait = Duration::from_secs(30);
    for p in [&a, &b] {
        eventually("each process to count two", wait, async || {
            (processes_seen(&p.base).await == Some(2)).then_some(())
        })
        .await;
    }
    assert_eq!(
        sandbox_agents_store::liveness::count_alive(&db)
            .await
            .unwrap(),
        2
    );
    // A dies without a word: its liveness lock goes with its connection.
    a.kill9().await;
    eventually("the survivor to count one", wait, async || {
        (processes_seen(&b.base).await == Some(1)).then_some(())
    })
    .await;
    b.terminate().await;
}
