-- A session's budget (issue 38): limits on what its turns spend, checked before every model
-- call. Copied from the agent's default at create; PATCH replaces it. Null: no budget (and
-- every row from before budgets).
alter table sessions add column budget jsonb;
