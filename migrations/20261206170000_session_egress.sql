-- A session's egress log (issue 36): what its sandbox reached through the egress proxy, one
-- row per host and port. The proxy sums connections, bytes and refusals in memory and adds
-- them here every few seconds in one statement (`store::session_egress::add`), so a crash
-- loses at most the sums of the last interval; each refusal is also an event in the log.
create table session_egress (
    session_id uuid not null references sessions (id) on delete cascade,
    host text not null,
    port int not null,
    connections bigint not null default 0,
    bytes_sent bigint not null default 0,
    bytes_received bigint not null default 0,
    denied bigint not null default 0,
    first_at timestamptz not null,
    last_at timestamptz not null,
    primary key (session_id, host, port)
);

-- A session's page reads its newest hosts first.
create index session_egress_last_idx on session_egress (session_id, last_at desc);
