-- The warm pool, and the environment commands run with now that it is passed per exec.

alter table sessions
    -- The manifest's `environment` as of the last boot: every command in the sandbox runs
    -- with it (containers are created without it, so pooled and dedicated ones are alike).
    add column sandbox_env jsonb not null default '{}';

-- Pre-started containers waiting for a session, one row per container. A row is written
-- before its container is created (container_id null until it runs), and deleted in the
-- transaction that hands the container to a session (which records it as its container_id),
-- so at every moment a pool container is owned by a row here or by a session: the orphan
-- sweep removes any that is owned by neither.
create table sandbox_pool (
    -- The container's name, sa-pool-<uuid>.
    name          text primary key,
    image         text not null,
    container_id  text,
    created_at    timestamptz not null default now()
);

create index sandbox_pool_ready_idx on sandbox_pool (image, created_at) where container_id is not null;
