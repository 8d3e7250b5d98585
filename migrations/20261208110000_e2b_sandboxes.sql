-- E2B sandboxes (issue 40): the sessions made through the E2B-compatible API (/e2b), with the
-- template each was asked for. A session's row is its sandbox's state; this row only says the
-- session is an E2B sandbox, so the E2B API lists these and nothing else.
--
-- Invariants:
-- * one row per session, gone with it (cascade);
-- * project_id is the session's (copied so a list pages one project's rows by an index);
-- * ended_at is set once, by a kill: from then on the sandbox is gone for the E2B API (its
--   lifetime, which ends it too, counts in whole seconds).
create table e2b_sandboxes (
    session_id uuid primary key references sessions (id) on delete cascade,
    project_id uuid not null references projects (id) on delete cascade,
    template   text not null check (length(template) between 1 and 200),
    created_at timestamptz not null default now(),
    ended_at   timestamptz
);

create index e2b_sandboxes_by_project on e2b_sandboxes (project_id, created_at, session_id);
