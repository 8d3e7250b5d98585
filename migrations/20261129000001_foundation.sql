-- Foundation: projects, agents, sessions, runs and the event log.
--
-- Invariants the application relies on:
-- * every project-scoped row carries project_id, and every store query filters on it;
-- * events.seq comes from one sequence, and appends to a session lock the session row first,
--   so within a session seq order equals commit order (a reader that saw seq N never later
--   finds a committed event of that session below N);
-- * a row change and the event announcing it commit in one transaction.

create table projects (
    id          uuid primary key,
    slug        text not null unique,
    name        text not null,
    description text not null default '',
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now()
);

-- The project every deployment starts with (API.md §9.3), so open mode and the
-- single-project rule work at once. Its id is fixed so that it is the same everywhere.
insert into projects (id, slug, name, description)
values ('00000000-0000-7000-8000-000000000001', 'default', 'Default', 'Created at first start.');

create table agents (
    id          uuid primary key,
    project_id  uuid not null references projects (id) on delete cascade,
    slug        text not null,
    -- The definition (domain::agent::AgentSpec) as one document: it is always read and written
    -- whole, and its nested parts (manifest, tools, ...) have no meaning to SQL.
    spec        jsonb not null,
    version     bigint not null default 1 check (version >= 1),
    archived_at timestamptz,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    constraint agents_project_slug_key unique (project_id, slug)
);

create table sessions (
    id             uuid primary key,
    project_id     uuid not null references projects (id) on delete cascade,
    -- restrict: an agent cannot be hard-deleted while a session references it (409).
    agent_id       uuid not null references agents (id) on delete restrict,
    title          text not null default '',
    status         text not null default 'provisioning'
                   check (status in ('provisioning', 'running', 'stopped', 'error')),
    activity       text not null default 'idle' check (activity in ('idle', 'busy')),
    error          text,
    stopped_reason text check (stopped_reason in ('requested', 'idle', 'restart')),
    backend        text not null default '',
    container_id   text,
    exposed_ports  integer[] not null default '{}',
    workdir        text not null default '',
    model          text,
    instructions   text,
    manifest       jsonb,
    usage          jsonb not null default '{}',
    metadata       jsonb not null default '{}',
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    last_event_at  timestamptz
);

create index sessions_project_created_idx on sessions (project_id, created_at desc, id desc);
create index sessions_agent_idx on sessions (agent_id);

create table runs (
    id           uuid primary key,
    session_id   uuid not null references sessions (id) on delete cascade,
    prompt       text not null default '',
    status       text not null default 'running'
                 check (status in ('running', 'completed', 'failed', 'cancelled')),
    stop_reason  text,
    final_output text,
    error        text,
    turns        integer not null default 0,
    usage        jsonb not null default '{}',
    created_at   timestamptz not null default now(),
    finished_at  timestamptz
);

create index runs_session_idx on runs (session_id, created_at);

create table events (
    seq        bigint generated always as identity primary key,
    session_id uuid not null references sessions (id) on delete cascade,
    run_id     uuid,
    type       text not null,
    payload    jsonb not null default '{}' check (jsonb_typeof(payload) = 'object'),
    created_at timestamptz not null default now()
);

-- Readers page a session's log by cursor: where session_id = $1 and seq > $2 order by seq.
create index events_session_seq_idx on events (session_id, seq);
