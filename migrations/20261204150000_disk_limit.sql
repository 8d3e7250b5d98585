-- A sandbox stopped for writing more than the server's disk limit (`--sandbox-disk-mb`) says
-- so: `stopped_reason = 'disk'`.
alter table sessions drop constraint sessions_stopped_reason_check;
alter table sessions add constraint sessions_stopped_reason_check
    check (stopped_reason in ('requested', 'idle', 'restart', 'lifetime', 'disk'));
