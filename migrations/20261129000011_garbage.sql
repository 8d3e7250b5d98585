-- Garbage (issue 6): blobs and images that rows no longer refer to, queued in the transaction
-- that dropped the last reference and removed by a worker afterwards, so a crash between the
-- commit and the removal leaks nothing.
--
-- Invariants:
-- * a row is queued only when nothing refers to what it names any more;
-- * a row is deleted only once the thing is gone (removing something missing counts as gone);
-- * rows are claimed with FOR UPDATE SKIP LOCKED, so processes never work on the same one.

create table garbage (
    id         bigint generated always as identity primary key,
    kind       text not null check (kind in ('blob', 'image')),
    ref        text not null,
    attempts   int not null default 0,
    last_error text,
    created_at timestamptz not null default now(),
    -- When the next attempt may run (failures back off).
    due_at     timestamptz not null default now()
);

create index garbage_due_idx on garbage (due_at);
