-- The `python` capability's journal: every cell a session's kernel ran, in the order they
-- started, with its nbformat outputs. A row is written before the cell runs (status
-- 'running') and completed when it ends, so a cell whose run was interrupted still shows.
-- `epoch` names the kernel that ran it: a cell in another epoch than the one before it ran in
-- a fresh kernel. Goes with its session.
create table notebook_cells (
    session_id      uuid not null references sessions (id) on delete cascade,
    idx             bigint generated always as identity,
    id              text not null,
    run_id          uuid,
    code            text not null,
    outputs         jsonb not null default '[]' check (jsonb_typeof(outputs) = 'array'),
    execution_count bigint,
    status          text not null default 'running'
                    check (status in ('running', 'ok', 'error', 'timeout', 'died', 'interrupted')),
    epoch           text,
    started_at      timestamptz not null default now(),
    finished_at     timestamptz,
    primary key (session_id, idx),
    unique (session_id, id)
);
