-- Runs: one turn of the agent loop.
--
-- Invariants:
-- * a run's terminal event is appended in the transaction that sets runs.status to its final
--   value (and the session's activity back to idle), so a reader that sees the terminal event
--   finds the run finished and the session ready for the next message;
-- * sessions.conversation is the model-visible history (OpenAI-style messages, without the
--   system message), saved in that same transaction: a follow-up, even after a restart,
--   continues the conversation.

alter table sessions
    add column conversation jsonb not null default '[]' check (jsonb_typeof(conversation) = 'array');

alter table runs
    -- The most model steps this run may take.
    add column max_turns integer not null default 25,
    -- Set by an interrupt or stop that another process (or a dead worker) must honour.
    add column cancel_requested boolean not null default false;

create index runs_running_idx on runs (session_id) where status = 'running';
