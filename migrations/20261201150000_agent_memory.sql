-- Agent memory that outlives sessions (the `memory` capability).
--
-- `agent_memories`: each agent's store, `MEMORY.md` and its short summary. `version` is the
-- compare-and-set of every write (the API's PUT and a consolidation alike): a writer names
-- the version it read, and a stale one changes nothing. An agent without a row has the empty
-- store at version 0.
create table agent_memories (
    agent_id   uuid primary key references agents (id) on delete cascade,
    project_id uuid not null references projects (id) on delete cascade,
    memory     text not null,
    summary    text not null,
    version    bigint not null check (version >= 1),
    updated_at timestamptz not null default now()
);

-- What the last boot of a session staged under `memories/`: the store's version and texts
-- then. A stop compares the sandbox's `memories/MEMORY.md` with `memory` to tell the
-- session's own edits from what it was given; the run loop puts `summary` in the system
-- prompt. `conversation_start` is how many stored messages the conversation held at that
-- boot: a stop consolidates only what came after. Replaced at every boot; gone with the
-- session.
create table session_memories (
    session_id         uuid primary key references sessions (id) on delete cascade,
    agent_id           uuid not null references agents (id) on delete cascade,
    version            bigint not null check (version >= 0),
    memory             text not null,
    summary            text not null,
    conversation_start integer not null check (conversation_start >= 0),
    staged_at          timestamptz not null default now()
);

-- The durable queue of consolidations: one per stop (or idle release) of a session with the
-- capability, holding copies of everything the model call needs (the staged baseline, the
-- session's MEMORY.md as it ended, the tail of its transcript), so a job outlives a restart
-- and the session's deletion. A worker claims a job with `for update skip locked`, holding it
-- for a lease (`leased_until`): a worker that dies leaves the job to be claimed again when
-- the lease ends. `attempts` bounds the retries of replies that do not parse and of calls
-- that fail.
create table memory_consolidations (
    id           bigint generated always as identity primary key,
    agent_id     uuid not null references agents (id) on delete cascade,
    project_id   uuid not null references projects (id) on delete cascade,
    session_id   uuid not null,
    baseline     text not null,
    ended        text,
    transcript   text not null,
    status       text not null default 'pending' check (status in ('pending', 'done', 'failed')),
    attempts     integer not null default 0 check (attempts >= 0),
    leased_until timestamptz,
    last_error   text,
    created_at   timestamptz not null default now(),
    finished_at  timestamptz
);

create index memory_consolidations_pending on memory_consolidations (created_at)
    where status = 'pending';
