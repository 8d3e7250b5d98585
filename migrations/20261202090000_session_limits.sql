-- Limits a session may set for itself (additions to the contract): its own idle TTL (null:
-- the agent's, else the server's default; 0: never), a lifetime in seconds from its creation
-- after which the sandbox is stopped with `stopped_reason = 'lifetime'` and cannot be started
-- again, and resources (`{cpus, memory_mb}`; null: the server's defaults).
alter table sessions
    add column idle_ttl_seconds bigint check (idle_ttl_seconds >= 0),
    add column max_lifetime_seconds bigint check (max_lifetime_seconds > 0),
    add column resources jsonb check (resources is null or jsonb_typeof(resources) = 'object');

alter table sessions drop constraint sessions_stopped_reason_check;
alter table sessions add constraint sessions_stopped_reason_check
    check (stopped_reason in ('requested', 'idle', 'restart', 'lifetime'));

-- The lifetime sweep looks only at sessions that have a limit.
create index sessions_lifetime on sessions (created_at) where max_lifetime_seconds is not null;
