-- The skills a session's last boot staged (domain::skills::SessionSkills): the index the model
-- is told about, where each skill lives in the workspace, and whether skills load on demand.
-- Written in the transaction that marks the boot running, replaced by every boot (a bundle's
-- `latest` is resolved at each one); null for sessions whose agent has no skills source.
alter table sessions add column skills jsonb;
