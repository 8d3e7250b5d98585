//! Budgets and limits: what a model step pays for the session's budget and the project's
//! monthly spend limit. Every model call adds its cost to the project's month in PostgreSQL
//! and reads the month back (`store::project_spend::add`, one statement), then the turn checks
//! its session's budget and the month in memory before the next call (`agent::budget`,
//! `agent::spend`). That is measured here directly, against the same database the server
//! uses; the baseline is one raw single-row insert through the same pool. (The turn-level
//! reads, once per turn, are in the runs part's figures.)

use super::{interleaved, log, Args};
use crate::report::{Part, Row};
use sandbox_agents_domain::budget::{Budget, BudgetUse};
use sandbox_agents_store::{project_spend, projects};
use sandbox_agents_testkit::TestApp;
use std::hint::black_box;
use std::time::Instant;

const RAW_TABLE: &str = "create table if not exists bench_raw_spend \
     (id bigserial primary key, project_id uuid not null, cost_usd float8 not null, at timestamptz not null default now())";
const RAW_INSERT: &str = "insert into bench_raw_spend (project_id, cost_usd) values ($1, $2)";

pub async fn part(args: &Args, app: &TestApp) -> anyhow::Result<Part> {
    let project = projects::DEFAULT_PROJECT;
    sqlx::query(RAW_TABLE).execute(&app.db).await?;
    // Limits far above what the benchmark spends, so every check runs and none is reached.
    let budget = Budget {
        max_cost_usd: Some(1_000_000.0),
        max_total_tokens: Some(1_000_000_000_000),
        max_turns: Some(1_000_000),
        max_sandbox_seconds: Some(31_536_000.0),
    };
    sqlx::query("update projects set limits = '{\"monthly_cost_usd\": 1000000}' where id = $1")
        .bind(project.0)
        .execute(&app.db)
        .await?;
    log(format!(
        "budgets and limits: {} + {} iterations × 2 variants",
        args.warmup, args.iterations
    ));
    let mut rows = vec![
        Row::new(
            "ours: a model step's budget and limit checks",
            "the call's cost added to the project's month and read back (one statement), then the session's budget and the month checked",
        ),
        Row::new(
            "raw: one Postgres insert",
            "a single-row insert through the same pool",
        ),
    ];
    let mut used = BudgetUse::default();
    interleaved(args, &mut rows, |v| {
        used.turns += 1;
        used.cost_usd += 0.0001;
        used.total_tokens += 110;
        let used = used;
        async move {
            let t0 = Instant::now();
            match v {
                0 => {
                    let s = project_spend::add(&app.db, project, 0.0001, 1, 0).await?;
                    black_box(s.limits.month_reached(s.spend.cost_usd));
                    black_box(budget.reached(&used));
                }
                _ => {
                    sqlx::query(RAW_INSERT)
                        .bind(project.0)
                        .bind(0.0001_f64)
                        .execute(&app.db)
                        .await?;
                }
            }
            Ok(t0.elapsed())
        }
    })
    .await?;
    sqlx::query("update projects set limits = '{}' where id = $1")
        .bind(project.0)
        .execute(&app.db)
        .await?;
    sqlx::query("drop table bench_raw_spend")
        .execute(&app.db)
        .await?;
    let p50 = |r: &Row| crate::report::stats(&r.samples).p50;
    let extra = p50(&rows[0]) - p50(&rows[1]);
    Ok(Part {
        title: "A model step's budget and limit checks",
        notes: format!(
            "What a model step pays for the session's budget and the project's monthly limit (p50): **{:.3} ms**, {extra:+.3} ms against a raw insert (the aim: under 0.5 ms).\n",
            p50(&rows[0])
        ),
        rows,
    })
}
