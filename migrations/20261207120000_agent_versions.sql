-- Agent versions (issue 38): every accepted definition of an agent, immutable. A row is
-- written by the same statement that writes the definition (`store::agents::insert` and
-- `update`), so `agents.version` always has its row here. `changed`: the top-level fields
-- that differ from the version before (empty for version 1). `restored_from`: the version
-- whose fields this one copied, when it was a restore.
create table agent_versions (
    agent_id      uuid        not null references agents (id) on delete cascade,
    version       bigint      not null check (version >= 1),
    spec          jsonb       not null,
    changed       text[]      not null default '{}',
    changed_by    jsonb,
    restored_from bigint,
    created_at    timestamptz not null default now(),
    primary key (agent_id, version)
);

-- What came before versions: each agent's current definition is its only version on record
-- (the earlier ones were never kept), dated by its last edit.
insert into agent_versions (agent_id, version, spec, created_at)
select id, version, spec, updated_at from agents;

-- A session runs one version of its agent: `agent_version` null follows every edit
-- ("latest", and every session from before versions, which always did). `agent_pins` holds
-- the version of every agent its subagents reach, as they were when the session pinned
-- ({"<agent id>": version}, the session's own agent included); null for "latest".
alter table sessions add column agent_version bigint;
alter table sessions add column agent_pins jsonb;
alter table sessions add constraint sessions_agent_version_fkey
    foreign key (agent_id, agent_version) references agent_versions (agent_id, version);
