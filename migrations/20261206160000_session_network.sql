-- A session's network policies (issue 36): the agent's and the environment's, copied when the
-- session is created, and its own, which PATCH changes:
-- {"inherited": [{"from": "agent"|"environment", "policy": {...}}], "own": {...} | null}.
-- Null on the rows from before (no policies: open), so nothing is rewritten.
alter table sessions add column network jsonb;

-- The egress proxy looks a connection's session up by its sandbox on every connection.
-- A session holds a sandbox id only while it runs, so the index holds running ones only.
create index sessions_sandbox_id_idx on sessions (sandbox_id) where sandbox_id is not null;
