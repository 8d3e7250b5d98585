-- The warm pool follows demand: every boot that could have taken a pooled sandbox leaves a
-- row here (hit or miss), and the pool's target is the most such boots in any minute of the
-- last ten, between --warm-pool-size and --warm-pool-max. The sweep prunes older rows.
create table pool_demand (
    id bigint generated always as identity primary key,
    at timestamptz not null default now()
);
create index pool_demand_at_idx on pool_demand (at);
