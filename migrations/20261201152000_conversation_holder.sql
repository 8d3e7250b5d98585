-- Who holds a session's conversation after handoffs (`agent.handoff`): the slug of the agent
-- the next prompt goes to, null for the session's own agent; and the agents that handed over
-- on the way there, oldest first, each of which the holder can hand back to in turn. Written
-- in the transaction that appends the `agent.handoff` event, so a restart finds the holder
-- the log announced.
alter table sessions
    add column holder text,
    add column handoff_stack jsonb not null default '[]'
        check (jsonb_typeof(handoff_stack) = 'array');
