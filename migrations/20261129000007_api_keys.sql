-- API keys (issue 6): credentials for services, sent as `Authorization: Bearer ak_...`.
--
-- Invariants:
-- * only a SHA-256 hash of a key is stored, never the key; `prefix` (its first characters) is
--   kept to recognise it in lists;
-- * a key bound to a project (`project_id`) reaches that project only; an unbound key, made by
--   an operator, reaches every project, like the shared token;
-- * a revoked or expired key is refused; revoked keys stay listed until deleted.

create table api_keys (
    id           uuid primary key,
    project_id   uuid references projects (id) on delete cascade,
    name         text not null,
    description  text not null default '',
    prefix       text not null,
    hash         bytea not null unique,
    -- The subject of the principal that made it (a person's id, a key's id, `token`, `open`).
    created_by   text,
    created_at   timestamptz not null default now(),
    -- Coalesced: written at most once a minute per key and process, never per request.
    last_used_at timestamptz,
    expires_at   timestamptz,
    revoked_at   timestamptz
);

create index api_keys_project_idx on api_keys (project_id, created_at);
