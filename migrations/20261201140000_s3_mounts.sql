-- What a boot staged of each s3_mount entry: the bucket and prefix, and per object its key
-- (relative to the prefix), size and sha256 (`objects`, a JSON array). A write-back compares
-- the sandbox's files with it, so that only changed files are uploaded and only keys that
-- were staged (and whose file is gone) are deleted; stops and snapshots leave these paths
-- out of the workspace archive. Replaced at every boot; gone with the session.
create table s3_mounts (
    session_id uuid not null references sessions (id) on delete cascade,
    path       text not null,
    bucket     text not null,
    prefix     text not null,
    read_only  boolean not null,
    objects    jsonb not null,
    staged_at  timestamptz not null default now(),
    primary key (session_id, path)
);
