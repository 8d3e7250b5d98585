-- Admission of runs: with --max-runs or --max-runs-per-project, a turn drives its loop only
-- when the deployment and its session's project have room; otherwise it waits, queued, before
-- its first step. A run is in flight while it is `running`, admitted and not parked: a turn
-- parked on client tool results holds no slot, and asks again when it is answered.
alter table runs
    add column admitted  boolean not null default false,
    add column queued_at timestamptz;

-- Turns in flight when this migration ran were admitted under the old rules.
update runs set admitted = true where status = 'running' and not parked;

-- What the count reads: the runs in flight.
create index runs_in_flight_idx on runs (session_id)
    where status = 'running' and admitted and not parked;

-- The queue, oldest first, of runs that still wait.
create index runs_queued_idx on runs (queued_at)
    where status = 'running' and not admitted and not parked and queued_at is not null;
