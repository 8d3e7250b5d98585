-- Environments (issue 13): named sandbox configurations of a project that sessions start in,
-- and the Docker images their packages are baked into.
--
-- Invariants:
-- * an image build is keyed by the digest of what it is built from (the base image and the
--   packages, see `domain::environment::build_digest`): environments with the same
--   configuration share one build row and one image, and an unchanged configuration never
--   builds again;
-- * a build row is `building` until one process finishes it; the process that builds it holds
--   the build's advisory lock for as long as it works on it, so a `building` row whose lock
--   nobody holds lost its builder (a restart, a crash) and is taken over by the next process
--   that looks (at start, and with every sweep) — never left `building`;
-- * environments.build_digest names the build of the current configuration (null: nothing to
--   build); environment_sessions.build_digest the build a session was created with (an update
--   applies to sessions created afterwards). A build row no environment and no session names
--   is deleted and its image and log queued as garbage;
-- * a session that ran in an environment keeps its environment_sessions row for as long as
--   the session exists, which is what makes the environment's delete a 409;
-- * an agent names its default environment by id in its spec (environment_id); there is no
--   foreign key into jsonb, so a delete takes the environment row `for update` before it looks
--   for agents that name it.

create table environment_builds (
    digest      text primary key check (digest ~ '^[0-9a-f]{64}$'),
    -- The image reference the build tags (and sessions boot once it is ready).
    image       text not null,
    -- What the build starts from, and what it installs (a domain `Packages`).
    base_image  text not null,
    packages    jsonb not null,
    status      text not null default 'building'
                check (status in ('building', 'ready', 'failed')),
    -- Why the build failed, naming the package manager; null unless failed.
    error       text check ((status = 'failed') = (error is not null)),
    -- The blob-store key of the last attempt's log.
    log_key     text,
    attempts    int not null default 0,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now()
);

create index environment_builds_building_idx on environment_builds (status)
    where status = 'building';

create table environments (
    id           uuid primary key,
    project_id   uuid not null references projects (id) on delete cascade,
    name         text not null,
    description  text not null default '',
    -- A domain `EnvironmentConfig`, replaced as a whole by every update.
    config       jsonb not null,
    -- string → string, replaced as a whole by an update that sends it.
    metadata     jsonb not null default '{}',
    build_digest text references environment_builds (digest),
    archived_at  timestamptz,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    constraint environments_project_name_key unique (project_id, name)
);

create index environments_build_idx on environments (build_digest);

create table environment_sessions (
    session_id     uuid primary key references sessions (id) on delete cascade,
    environment_id uuid not null references environments (id),
    build_digest   text references environment_builds (digest)
);

create index environment_sessions_environment_idx on environment_sessions (environment_id);
create index environment_sessions_build_idx on environment_sessions (build_digest);
