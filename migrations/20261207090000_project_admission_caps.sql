-- A project's own limits on sandboxes and turns in flight (`projects.limits.max_sandboxes`,
-- `.max_runs`, set by operators) take the place of --max-sandboxes-per-project and
-- --max-runs-per-project for that project. Every waiting entry of the fair queue now carries
-- its project's own limit (`cap`, null when the project has none, so the process's flag
-- applies), so that a process deciding which entry is due applies each project's own limit,
-- whatever limits its flags set. The order is unchanged.
--
-- A project's own limit for one kind of admission: `limits.max_sandboxes` for 'sandbox',
-- `limits.max_runs` for 'run'; null when it sets none.
create or replace function sa_project_cap(project uuid, kind text)
returns int8
language sql stable as $$
    select (p.limits ->> case sa_project_cap.kind when 'sandbox' then 'max_sandboxes'
                                                   when 'run' then 'max_runs' end)::int8
      from projects p
     where p.id = sa_project_cap.project
$$;

-- The return type changes, so the function is dropped and created again (nothing depends on
-- it in the database; queries call it by name).
drop function if exists sa_admission_queue(text);

create function sa_admission_queue(kind text)
returns table (id uuid, project_id uuid, held int8, total int8, place int8, cap int8)
language sql stable as $$
    with entries as (
        select * from sa_admission_entries(sa_admission_queue.kind)
    ),
    holding as (
        select e.project_id, count(*) as n from entries e where e.holds group by e.project_id
    )
    select w.id, w.project_id, coalesce(h.n, 0)::int8,
           (select coalesce(sum(n), 0) from holding)::int8,
           row_number() over (order by coalesce(h.n, 0), w.queued_at, w.id),
           sa_project_cap(w.project_id, sa_admission_queue.kind)
      from entries w left join holding h on h.project_id = w.project_id
     where not w.holds
$$;
