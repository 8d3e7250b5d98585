-- Every change to the projects table is announced on `sa_projects`, in the changing
-- transaction (so only once it commits, and never lost to a crash between the change and the
-- announcement). Server processes cache which project a request names (by id or slug, or the
-- only one) and drop that cache when they hear of a change (store::project_ids).
create function sa_projects_changed() returns trigger language plpgsql as $$
begin
    perform pg_notify('sa_projects', '');
    return null;
end
$$;

create trigger projects_changed
    after insert or update or delete or truncate on projects
    for each statement execute function sa_projects_changed();
