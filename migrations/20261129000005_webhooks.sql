-- Webhooks: subscriptions, a transactional outbox of deliveries, and the attempt log.
--
-- Invariants the application relies on:
-- * a delivery row is inserted by the same statement that appends the event it announces
--   (store::events::append), for every active subscription that matches, so an event and
--   its deliveries commit together or not at all;
-- * only stored events have deliveries: ephemeral ones (text deltas, stream_gap) never reach
--   the events table;
-- * a dispatcher owns a delivery only while lease_until is in the future, and records an
--   attempt only if lease_token is still the one it claimed with; a crashed dispatcher's
--   lease expires and another one sends again (at least once);
-- * secret_sealed is the signing secret sealed under the deployment's master key
--   (AES-256-GCM, the webhook id as associated data); the plaintext is never stored.

create table webhooks (
    id                   uuid primary key,
    project_id           uuid not null references projects (id) on delete cascade,
    name                 text not null,
    url                  text not null,
    -- Empty means every type.
    event_types          text[] not null default '{}',
    -- Only events of this agent's sessions when set. No foreign key: a subscription outlives
    -- nothing it cannot match, and deleting agents must not depend on webhooks.
    agent_id             uuid,
    active               boolean not null default true,
    secret_sealed        bytea not null,
    -- Failed attempts since the last success; at the configured limit the subscription is
    -- deactivated and deactivated_reason says why.
    consecutive_failures integer not null default 0,
    deactivated_reason   text,
    created_at           timestamptz not null default now(),
    updated_at           timestamptz not null default now()
);

create index webhooks_project_idx on webhooks (project_id, created_at);
-- The outbox insert looks up a project's active subscriptions on every append.
create index webhooks_active_idx on webhooks (project_id) where active;

create table webhook_deliveries (
    id              uuid primary key default gen_random_uuid(),
    webhook_id      uuid not null references webhooks (id) on delete cascade,
    -- A delivery is about one stored event; it goes when the event goes (with its session).
    event_seq       bigint not null references events (seq) on delete cascade,
    session_id      uuid not null,
    event_type      text not null,
    status          text not null default 'pending'
                    check (status in ('pending', 'delivered', 'failed')),
    -- Attempts made so far, and how many of them a redeliver request had already used up
    -- (the retry budget counts from there).
    attempt         integer not null default 0,
    retry_from      integer not null default 0,
    status_code     integer,
    error           text,
    next_attempt_at timestamptz default now(),
    lease_until     timestamptz,
    lease_token     uuid,
    delivered_at    timestamptz,
    created_at      timestamptz not null default now(),
    constraint webhook_deliveries_once unique (webhook_id, event_seq)
);

-- The dispatcher's claim: due pending deliveries, oldest due first.
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at)
    where status = 'pending';
-- The deliveries listing: one subscription's rows, newest first.
create index webhook_deliveries_list_idx on webhook_deliveries (webhook_id, created_at desc, event_seq desc);
create index webhook_deliveries_event_idx on webhook_deliveries (event_seq);

-- One row per attempt: what "why has my endpoint not received anything" is answered from.
create table webhook_attempts (
    delivery_id     uuid not null references webhook_deliveries (id) on delete cascade,
    attempt         integer not null,
    started_at      timestamptz not null,
    duration_ms     integer not null,
    status_code     integer,
    error           text,
    next_attempt_at timestamptz,
    primary key (delivery_id, attempt)
);
