-- Secrets (issue 6): values a project's sandboxes get as environment variables.
--
-- Invariants:
-- * a value is stored only sealed (AES-256-GCM under the deployment's master key, the secret's
--   id as associated data); no query returns it to the API layer except the boot that resolves
--   it into a sandbox's environment;
-- * a name is unique in its project; bindings (agents' and sessions' `secret_bindings`) refer to
--   secrets by name, and a secret that is bound is not deleted;
-- * `sessions.sandbox_secrets` holds the resolved variables of the sandbox that is up, sealed
--   with the session's id as associated data, and is cleared whenever the sandbox goes.

create table secrets (
    id           uuid primary key,
    project_id   uuid not null references projects (id) on delete cascade,
    name         text not null,
    description  text not null default '',
    value_sealed bytea not null,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    last_used_at timestamptz,
    unique (project_id, name)
);

alter table sessions add column sandbox_secrets bytea;
