-- A project's limits (issue 38), set by operators: {"monthly_cost_usd": ...}. '{}': none.
alter table projects add column limits jsonb not null default '{}';

-- What each project's model calls cost, by calendar month (UTC), added to after every call
-- by whichever server process made it, so that the monthly limit holds across processes.
-- warned_at: when the 80 % warning of that month went out (once a month).
create table project_spend (
    project_id        uuid not null references projects (id) on delete cascade,
    month             date not null,
    cost_usd          double precision not null default 0 check (cost_usd >= 0),
    requests          bigint not null default 0 check (requests >= 0),
    unpriced_requests bigint not null default 0 check (unpriced_requests >= 0),
    warned_at         timestamptz,
    primary key (project_id, month)
);
