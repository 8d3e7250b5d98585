//! Usage of a project over a window, summed in the database from three sources: each run's
//! `usage` (tokens, requests, `active_seconds`, split `by_model` and `by_agent`, as the
//! agent loop writes it), each memory consolidation's `usage` (the same shape, without
//! active seconds: its model calls after a session's stop) and each session's boot marks in
//! the event log (the sandbox's up time, as `domain::session::sandbox_seconds` reads it for
//! one session).
//!
//! Invariants:
//! * A run counts in the window (and on the UTC day) in which it **started**; a run in flight
//!   counts what it has recorded (nothing until it finishes or parks).
//! * A memory consolidation counts in the window in which it was **queued** (its session's
//!   stop), once an attempt has recorded what it spent; its tokens and requests are in the
//!   totals (a bill that left them out would be wrong), by its agent and the model it called,
//!   and it is not a run (`runs` counts turns); `memory_tokens` and `memory_requests` say how
//!   much of a group was consolidation's. It counts even when its session was deleted since:
//!   the calls were made.
//! * Grouped by model or agent, a run's tokens go to each key of its `by_model` / `by_agent`
//!   split; its `active_seconds` go to the key's own `active_seconds` when the split has
//!   one, else to the key when it is the only one (every run so far has one model and one
//!   agent).
//! * Sandbox time is every interval from a `session.status_running` to the next boot mark
//!   (or now), clipped to the window, and, by day, cut at UTC midnights. By agent it belongs
//!   to the session's agent, by model to the session's model (its override, else the
//!   agent's, else `default_model`).

use crate::error::Result;
use sandbox_agents_domain::usage::{UsageGroup, UsageQuery, UsageTotals};
use sandbox_agents_domain::ProjectId;
use sqlx::PgExecutor;

/// The groups of `project`'s usage within `q`'s window: days in order, agents and models by
/// total tokens (most first, then by name).
#[tracing::instrument(skip_all, fields(project.id = %project.0, group_by = q.group_by.as_str()))]
pub async fn report(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    q: &UsageQuery,
    default_model: &str,
    agent: Option<uuid::Uuid>,
) -> Result<Vec<UsageGroup>> {
    let rows = sqlx::query!(
        r#"
with scope as (
    select s.id, a.slug, coalesce(s.model, a.spec->>'model', $5::text) as model
    from sessions s join agents a on a.id = s.agent_id
    where s.project_id = $1 and s.created_at < $3 and ($6::uuid is null or s.agent_id = $6)
),
turns as (
    select r.usage, r.created_at, 1 as runs
    from runs r join scope sc on sc.id = r.session_id
    where r.created_at >= $2 and r.created_at < $3
    union all
    select c.usage, c.created_at, 0
    from memory_consolidations c
    where c.project_id = $1 and c.created_at >= $2 and c.created_at < $3 and c.usage <> '{}'
      and ($6::uuid is null or c.agent_id = $6)
),
turn_groups as (
    select to_char(t.created_at at time zone 'UTC', 'YYYY-MM-DD') as key, t.usage as u,
           (t.usage->>'active_seconds')::float8 as active, t.runs
    from turns t
    where $4::text = 'day'
    union all
    select e.key, e.value,
           coalesce((e.value->>'active_seconds')::float8,
                    case when (select count(*) from jsonb_object_keys(sp.split)) = 1
                         then (t.usage->>'active_seconds')::float8 end),
           t.runs
    from turns t
    cross join lateral (
        select case when jsonb_typeof(t.usage->(case $4 when 'model' then 'by_model' else 'by_agent' end)) = 'object'
                    then t.usage->(case $4 when 'model' then 'by_model' else 'by_agent' end)
                    else '{}'::jsonb end as split
    ) sp
    cross join lateral jsonb_each(sp.split) e
    where $4 <> 'day'
),
marks as (
    select e.type, e.session_id, e.created_at,
           lead(e.created_at) over (partition by e.session_id order by e.seq) as next_at
    from events e join scope sc on sc.id = e.session_id
    where e.type in ('session.status_running', 'session.status_stopped')
       or (e.type = 'session.status_error' and e.run_id is null)
),
up as (
    select m.session_id, greatest(m.created_at, $2) as since,
           least(coalesce(m.next_at, now()), $3, now()) as until
    from marks m
    where m.type = 'session.status_running'
),
up_groups as (
    select case $4 when 'day' then to_char(d.since at time zone 'UTC', 'YYYY-MM-DD')
                   when 'agent' then sc.slug
                   else sc.model end as key,
           extract(epoch from d.until - d.since)::float8 as secs
    from up u
    join scope sc on sc.id = u.session_id
    cross join lateral (
        select greatest(midnight, u.since) as since,
               least(midnight + interval '24 hours', u.until) as until
        from generate_series(date_trunc('day', u.since, 'UTC'), u.until, interval '24 hours') midnight
        where $4 = 'day'
        union all
        select u.since, u.until
        where $4 <> 'day'
    ) d
    where u.until > u.since and d.until > d.since
),
parts as (
    select key, (u->>'input_tokens')::numeric as input, (u->>'output_tokens')::numeric as output,
           (u->>'total_tokens')::numeric as total, (u->>'requests')::numeric as requests,
           runs, coalesce(active, 0) as active, 0::float8 as sandbox,
           case when runs = 0 then (u->>'total_tokens')::numeric else 0 end as memory_tokens,
           case when runs = 0 then (u->>'requests')::numeric else 0 end as memory_requests,
           coalesce((u->>'cost_usd')::float8, 0) as cost,
           coalesce((u->>'unpriced_requests')::numeric,
                    case when u ? 'cost_usd' then 0 else (u->>'requests')::numeric end) as unpriced
    from turn_groups
    union all
    select key, 0, 0, 0, 0, 0, 0, secs, 0, 0, 0, 0
    from up_groups
)
select key as "key!",
       coalesce(sum(input), 0)::bigint as "input_tokens!",
       coalesce(sum(output), 0)::bigint as "output_tokens!",
       coalesce(sum(total), 0)::bigint as "total_tokens!",
       coalesce(sum(requests), 0)::bigint as "requests!",
       sum(runs)::bigint as "runs!",
       sum(active)::float8 as "active_seconds!",
       sum(sandbox)::float8 as "sandbox_seconds!",
       coalesce(sum(memory_tokens), 0)::bigint as "memory_tokens!",
       coalesce(sum(memory_requests), 0)::bigint as "memory_requests!",
       coalesce(sum(cost), 0)::float8 as "cost_usd!",
       coalesce(sum(unpriced), 0)::bigint as "unpriced_requests!"
from parts
where key is not null
group by key
order by case when $4 = 'day' then key end, 4 desc, key
"#,
        project.0,
        q.from,
        q.to,
        q.group_by.as_str(),
        default_model,
        agent,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| UsageGroup {
            key: r.key,
            usage: UsageTotals {
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                total_tokens: r.total_tokens,
                requests: r.requests,
                runs: r.runs,
                active_seconds: r.active_seconds,
                sandbox_seconds: r.sandbox_seconds,
                memory_tokens: r.memory_tokens,
                memory_requests: r.memory_requests,
                cost_usd: r.cost_usd,
                unpriced_requests: r.unpriced_requests,
            },
        })
        .collect())
}
