-- Skill bundles: named skills trees that CI pushes to, per project, and their versions (the
-- uploaded archives, kept in the blob store).
--
-- Invariants:
-- * version numbers come from skill_bundles.high_water, raised in the transaction that
--   inserts the version, under the bundle row's lock: a number is never issued twice, even
--   after its version is retired, and a refused push allocates none;
-- * latest_version is the highest version not retired, or null; every transaction that adds
--   or retires a version sets it under the same lock;
-- * a retired version keeps its row (retired_at set) so a boot pinned to it can say it was
--   retired rather than that it never existed; its blob is queued as garbage when it retires;
-- * an agent names a bundle by slug in its spec (skills_source.bundle); there is no foreign
--   key into jsonb, so a delete takes the bundle row `for update` before it looks for agents
--   that name it.

create table skill_bundles (
    id             uuid primary key,
    project_id     uuid not null references projects (id) on delete cascade,
    slug           text not null,
    description    text not null default '',
    high_water     int not null default 0 check (high_water >= 0),
    latest_version int check (latest_version > 0 and latest_version <= high_water),
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    constraint skill_bundles_project_slug_key unique (project_id, slug)
);

create table skill_bundle_versions (
    bundle_id   uuid not null references skill_bundles (id) on delete cascade,
    version     int not null check (version > 0),
    -- The blob-store key of the archive as uploaded (gzip or plain tar).
    blob_key    text not null,
    size_bytes  bigint not null check (size_bytes >= 0),
    file_count  int not null check (file_count >= 0),
    -- sha256 of the uploaded bytes, lowercase hex.
    digest      text not null check (digest ~ '^[0-9a-f]{64}$'),
    -- Directories (relative to the archive's root, sorted) that hold a SKILL.md.
    skills      text[] not null default '{}',
    created_at  timestamptz not null default now(),
    retired_at  timestamptz,
    primary key (bundle_id, version)
);
