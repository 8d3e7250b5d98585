-- Approvals (issue 38): a call an agent's permissions say to `ask` about waits for a person's
-- decision as a row of its own here, parked like a deferrable client call (`parks`), from
-- the commit of its `agent.tool_use {awaiting_approval: true}`.
--
-- Invariants (with the `tool_calls` migration's):
-- * `approval` says what kind of call waits (`sandbox`, `subagent` or `client`); null for an
--   ordinary client tool call, which never waited for a person;
-- * a decision is written once (`decision` from null), in the transaction that appends its
--   `agent.tool_confirmation`. A sandbox or subagent call leaves `pending` then (`answered`;
--   when allowed, the run runs it as it continues). An allowed client call stays pending as
--   a deferrable client call, its `agent.client_tool_call` appended then (its `seq`); denied,
--   it is answered with the denial.
alter table tool_calls
    add column approval text check (approval in ('sandbox', 'subagent', 'client')),
    add column decision text check (decision in ('allow', 'deny')),
    add column decision_message text,
    add column decided_by jsonb,
    add column decided_at timestamptz,
    add constraint tool_calls_decision_needs_approval check (decision is null or approval is not null);
