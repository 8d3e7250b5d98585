-- Admission: with --max-sandboxes or --max-sandboxes-per-project, a boot takes a sandbox only
-- when the deployment and its project have room; otherwise its session waits in
-- `provisioning`, queued. A sandbox counts while its session is `running`, or `provisioning`
-- and admitted (booting). Entering `provisioning` resets both columns.
alter table sessions
    add column admitted  boolean not null default false,
    add column queued_at timestamptz;

-- Sessions booting when this migration ran were admitted under the old rules.
update sessions set admitted = true where status = 'provisioning';

-- The queue, oldest first, of sessions that still wait.
create index sessions_queued_idx on sessions (queued_at)
    where status = 'provisioning' and not admitted and queued_at is not null;
