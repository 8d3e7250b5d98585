-- Issue 34, section 4.
--
-- `memory_consolidations.usage`: what the job's model calls spent, every attempt summed (a
-- failed attempt's tokens were spent too), in the shape of a run's `usage` (tokens, requests,
-- `by_model`, `by_agent`). `GET /api/usage` counts it beside the runs', and the session whose
-- stop queued the job has it added to its own usage.
alter table memory_consolidations add column usage jsonb not null default '{}';

-- `session_memories.last_read`: the session's `memories/MEMORY.md` as it was last read back
-- from its sandbox (at the end of each run), null until one is. A stop reads the file again;
-- when it cannot (the sandbox is gone, or the read fails) the consolidation starts from this
-- copy rather than from nothing, so what the agent wrote during the runs that finished is not
-- lost with the sandbox.
alter table session_memories add column last_read text;

-- `tool_calls.subagent`: the `{agent, call_id}` of the nested frame that made the call (null
-- for the run's own frame), so the `agent.client_tool_result` written when the client
-- answers, or when it times out, is marked like the call's other events.
alter table tool_calls add column subagent jsonb;
