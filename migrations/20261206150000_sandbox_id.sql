-- The sandbox a session runs in, and a warm-pool sandbox once it runs, are named by the id
-- their backend gives them: `sandbox_id`, in the sandbox seam's own terms (a Docker container
-- id today, a pod's name on Kubernetes next), no longer `container_id`.
--
-- RENAME COLUMN keeps every row and every value. Indexes, constraints and the partial index
-- sandbox_pool_ready_idx follow the column (Postgres refers to columns by number, not name),
-- and no function or view names the column, so nothing else is recreated. The public API
-- keeps its `container_id` field (openapi/openapi.json); only the storage name changes.

alter table sessions rename column container_id to sandbox_id;
alter table sandbox_pool rename column container_id to sandbox_id;
