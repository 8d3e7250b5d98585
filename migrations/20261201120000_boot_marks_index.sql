-- The boot marks of a session's log (the status events that open and close its sandbox's up
-- time), without reading the rest of the log: `events::boot_marks` reads them for one
-- session on every GET of it, and `usage::report` for every session of a project.
create index events_boot_marks_idx on events (session_id, seq)
    where type in ('session.status_running', 'session.status_stopped', 'session.status_error');
