-- Client tools (API.md §6), runs parked on deferrable calls, the first turn of a session
-- created with a prompt, and which server process drives a run.
--
-- Invariants:
-- * a call is pending from the commit that appends its `agent.client_tool_call` event (the
--   same transaction inserts the row), so an answer may arrive before the worker does
--   anything else;
-- * a call leaves `pending` exactly once: `answered` (by the transaction that appends its
--   `agent.client_tool_result`), `timed_out` (likewise, by the worker) or `cancelled` (by the
--   transaction that finishes its run). Only pending calls can be answered: anything else 404s;
-- * a parked run is `running` with `parked = true` and no worker; its turn so far is in
--   `progress`, so any process can continue it once every parked call is answered;
-- * lock order, for every transaction here: run row, then tool_calls rows, then session row.

alter table runs
    -- The client tools this turn offers: the agent's and the turn's, the turn's winning.
    add column client_tools jsonb not null default '[]' check (jsonb_typeof(client_tools) = 'array'),
    -- The turn so far, saved when it parks: {messages, usage, active_seconds}.
    add column progress jsonb,
    add column parked boolean not null default false,
    -- The server process driving the run: the key of the advisory lock that process holds
    -- while it lives (see the runtime's `liveness`). Null while parked.
    add column worker integer;

create table tool_calls (
    id          bigint generated always as identity primary key,
    run_id      uuid not null references runs (id) on delete cascade,
    session_id  uuid not null references sessions (id) on delete cascade,
    -- The model's id for the call; what the client answers with.
    call_id     text not null,
    tool        text not null,
    -- The JSON-encoded arguments, as the model gave them.
    arguments   text not null,
    -- A deferrable call: the run parks on it instead of waiting (`deferrable` is a keyword).
    parks       boolean not null,
    -- The seq of the call's `agent.client_tool_call` event.
    seq         bigint not null,
    -- When an ordinary call stops waiting; null for deferrable calls.
    deadline    timestamptz,
    status      text not null default 'pending'
                check (status in ('pending', 'answered', 'timed_out', 'cancelled')),
    output      text,
    is_error    boolean not null default false,
    created_at  timestamptz not null default now(),
    answered_at timestamptz
);

-- One pending call per call id in a session: the key an answer is looked up by.
create unique index tool_calls_pending_idx on tool_calls (session_id, call_id) where status = 'pending';
create index tool_calls_run_idx on tool_calls (run_id, id);

alter table sessions
    -- `create(prompt=...)`: the first turn, started by the boot that brings the sandbox up.
    add column first_prompt text;
