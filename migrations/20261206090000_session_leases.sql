-- Lifecycle leases: which server process works on a session's sandbox right now (a boot, a
-- stop, a start, a delete, a snapshot or a restore). A lease belongs to the process whose
-- liveness key it carries (see `store::liveness`) and lasts while that process holds its
-- liveness lock, so no database connection is held while the work goes on (the advisory lock
-- on a pooled connection it replaces starved the pool under a burst of boots: issue 33). A
-- lease of a dead process is taken over; the token tells one holding of another.
create table session_leases (
    session_id uuid primary key references sessions (id) on delete cascade,
    worker     integer not null,
    token      uuid not null,
    taken_at   timestamptz not null default now()
);

-- The process that took a `provisioning` session's boot on (queued in it, or booting): the
-- sweep boots again the sessions left provisioning whose process is gone, or that no process
-- took on (a boot that could not record its outcome).
alter table sessions add column boot_worker integer;

-- What that sweep reads.
create index sessions_provisioning_idx on sessions (created_at) where status = 'provisioning';
