-- One fair queue for both admissions: sandboxes at boot (`store::admission`, --max-sandboxes,
-- --max-sandboxes-per-project) and turns in flight (`store::run_admission`, --max-runs,
-- --max-runs-per-project). Both had the same ordering written out in their own queries; it now
-- lives here once, and each kind only says which of its rows hold room and which wait.
--
-- Both are `language sql stable` with a single query, so the planner inlines them into the
-- query that calls them: they read that query's snapshot (inside the admission's transaction,
-- under its advisory lock), and the branches of the other kind fold away (at plan time for a
-- literal kind, at the start of execution for a bound one).

-- What holds room, and what waits for it, under one kind of admission: 'sandbox' or 'run'
-- (any other kind has no entries). This is the only place the kinds differ:
--  * sandbox: a session holds a sandbox while it is `running`, or `provisioning` and
--    admitted (booting); it waits while `provisioning`, not admitted and queued.
--  * run: a run holds a turn in flight while it is `running`, admitted and not parked (a turn
--    parked on client tool results gives its slot back); it waits while `running`, not
--    admitted, not parked and queued, unless a cancel was asked for (it will not be driven).
--    Its project is its session's.
-- `queued_at` is null for the entries that hold room. Each branch keeps the predicate of a
-- partial index (sessions_queued_idx, runs_in_flight_idx, runs_queued_idx).
create or replace function sa_admission_entries(kind text)
returns table (id uuid, project_id uuid, holds boolean, queued_at timestamptz)
language sql stable as $$
    select s.id, s.project_id, true, null::timestamptz
      from sessions s
     where sa_admission_entries.kind = 'sandbox'
       and (s.status = 'running' or (s.status = 'provisioning' and s.admitted))
    union all
    select s.id, s.project_id, false, s.queued_at
      from sessions s
     where sa_admission_entries.kind = 'sandbox'
       and s.status = 'provisioning' and not s.admitted and s.queued_at is not null
    union all
    select r.id, s.project_id, true, null::timestamptz
      from runs r join sessions s on s.id = r.session_id
     where sa_admission_entries.kind = 'run'
       and r.status = 'running' and r.admitted and not r.parked
    union all
    select r.id, s.project_id, false, r.queued_at
      from runs r join sessions s on s.id = r.session_id
     where sa_admission_entries.kind = 'run'
       and r.status = 'running' and not r.admitted and not r.parked
       and not r.cancel_requested and r.queued_at is not null
$$;

-- The queue of one kind, fair between projects: every waiting entry with `held` (what its
-- project holds now), `total` (what the deployment holds now) and `place` (1 for the first
-- in line). The order is by `held`, then `queued_at`, then `id`: of two waiting entries, the
-- one whose project holds less goes first, so a project that floods the queue waits behind
-- its own entries, not others'; within a project (or between equals) the oldest goes first,
-- and the id makes the order total, so `place` is the same for every caller.
--
-- The limits are the caller's to apply (they differ per kind and per process's flags): an
-- entry is due when `held` is under the project's limit and `total` under the deployment's.
create or replace function sa_admission_queue(kind text)
returns table (id uuid, project_id uuid, held int8, total int8, place int8)
language sql stable as $$
    with entries as (
        select * from sa_admission_entries(sa_admission_queue.kind)
    ),
    holding as (
        select e.project_id, count(*) as n from entries e where e.holds group by e.project_id
    )
    select w.id, w.project_id, coalesce(h.n, 0)::int8,
           (select coalesce(sum(n), 0) from holding)::int8,
           row_number() over (order by coalesce(h.n, 0), w.queued_at, w.id)
      from entries w left join holding h on h.project_id = w.project_id
     where not w.holds
$$;
