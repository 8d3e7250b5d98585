-- People (issue 6): local accounts that sign in to the web UI with a password, their
-- single-use recovery codes, their browser sessions, and their project memberships.
--
-- Invariants:
-- * passwords are stored as argon2id PHC strings; an account made without a password has
--   none until its recovery code is used;
-- * recovery codes and browser session tokens are stored as SHA-256 hashes only; a recovery
--   code works once, before it expires;
-- * a person reaches a project only through a membership (`admin` or `member`).

create table people (
    id            uuid primary key,
    email         text not null,
    name          text not null default '',
    password_hash text,
    verified      boolean not null default false,
    state         text not null default 'active' check (state in ('active', 'inactive')),
    -- May manage people and keys deployment-wide, like the shared token.
    operator      boolean not null default false,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now()
);

create unique index people_email_idx on people (lower(email));

create table recovery_codes (
    id         uuid primary key,
    person_id  uuid not null references people (id) on delete cascade,
    code_hash  bytea not null unique,
    expires_at timestamptz not null,
    used_at    timestamptz,
    created_at timestamptz not null default now()
);

create table person_sessions (
    id         uuid primary key,
    person_id  uuid not null references people (id) on delete cascade,
    token_hash bytea not null unique,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null
);

create index person_sessions_person_idx on person_sessions (person_id);

create table memberships (
    id         uuid primary key,
    project_id uuid not null references projects (id) on delete cascade,
    person_id  uuid not null references people (id) on delete cascade,
    role       text not null check (role in ('admin', 'member')),
    created_at timestamptz not null default now(),
    unique (project_id, person_id)
);

create index memberships_person_idx on memberships (person_id);
