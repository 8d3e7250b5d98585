-- Schedules (issue 38): an agent that works without anyone sending a message. A schedule
-- fires its message on a cron expression in a time zone, into a new session per fire or into
-- one session it continues.
--
-- Invariants:
-- * a due time fires at most once: `schedule_fires` is unique on (schedule_id, due_at), and
--   the transaction that inserts a fire also starts what it starts (the session and its
--   first prompt, or the run) and moves `next_fire_at` past it, under the schedule row's
--   lock taken `for update skip locked`, so of many server processes exactly one fires it;
-- * `next_fire_at` is the next due time not yet fired or skipped; null while paused (a
--   resume computes it from the time of the resume, so a pause skips what fell inside it);
-- * a fire that finds its session busy waits (`busy = 'wait'`: `next_fire_at` stays, retried
--   until the following due time, when it is recorded `skipped`) or is recorded `skipped`
--   at once (`busy = 'skip'`).
create table schedules (
    id            uuid primary key,
    project_id    uuid not null references projects (id) on delete cascade,
    agent_id      uuid not null references agents (id) on delete cascade,
    name          text not null default '',
    cron          text not null,
    timezone      text not null,
    message       text not null,
    -- The session every fire continues; null: a new session per fire.
    session_id    uuid references sessions (id) on delete cascade,
    -- The budget of each new session (null: the agent's).
    budget        jsonb,
    paused        boolean not null default false,
    -- After downtime: `skip` every missed due time, or `run_once` for all of them together.
    missed        text not null default 'skip' check (missed in ('skip', 'run_once')),
    busy          text not null default 'skip' check (busy in ('wait', 'skip')),
    next_fire_at  timestamptz,
    created_by    jsonb,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now()
);
create index schedules_due_idx on schedules (next_fire_at) where not paused;
create index schedules_agent_idx on schedules (project_id, agent_id);

create table schedule_fires (
    id          bigint generated always as identity primary key,
    schedule_id uuid not null references schedules (id) on delete cascade,
    due_at      timestamptz not null,
    fired_at    timestamptz not null default now(),
    session_id  uuid references sessions (id) on delete set null,
    run_id      uuid references runs (id) on delete set null,
    -- `started`: its session or run was started; `skipped`: missed, or its session was busy;
    -- `failed`: it could not start (the detail says why).
    status      text not null check (status in ('started', 'skipped', 'failed')),
    detail      text,
    unique (schedule_id, due_at)
);
create index schedule_fires_recent_idx on schedule_fires (schedule_id, due_at desc);
