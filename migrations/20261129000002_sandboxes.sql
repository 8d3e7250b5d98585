-- Sessions on real sandboxes: what a boot needs, what a stop leaves behind, snapshots, and
-- the deployment's identity (labels on every container it creates).

-- One row: this deployment's id. Every server process on this database is the same
-- deployment, so they agree on which containers are theirs.
create table deployment (
    id          text primary key,
    singleton   boolean not null default true unique check (singleton),
    created_at  timestamptz not null default now()
);
insert into deployment (id) values (replace(gen_random_uuid()::text, '-', ''));

alter table sessions
    -- The image the sandbox boots from (the agent's, the default, or a snapshot's).
    add column image text,
    -- Secret bindings added by the session (the agent's come from the agent).
    add column secret_bindings jsonb not null default '[]',
    -- Where the workspace archive made by the last stop lives in the blob store.
    add column workspace_archive text,
    -- A snapshot to boot from (a fork), consumed by the first boot.
    add column boot_snapshot_id uuid,
    -- Last time a caller used the sandbox (message, exec, files): the idle reaper's clock.
    add column last_used_at timestamptz not null default now(),
    -- Host ports the running sandbox's exposed ports are published on: {"8080": 49153}.
    add column port_map jsonb not null default '{}';

create index sessions_running_idx on sessions (status) where status in ('provisioning', 'running');

create table snapshots (
    id          uuid primary key,
    project_id  uuid not null references projects (id) on delete cascade,
    -- The session it was taken from. No foreign key: a snapshot outlives its session, so a
    -- fork can still boot from it after the origin is deleted.
    session_id  uuid not null,
    label       text not null default '',
    -- Blob-store key of the workspace archive, and its size.
    archive     text not null,
    size_bytes  bigint not null default 0,
    -- The container filesystem captured as an image (docker), so installed packages survive.
    image       text,
    created_at  timestamptz not null default now()
);

create index snapshots_session_idx on snapshots (session_id, created_at);
create index snapshots_project_idx on snapshots (project_id);
