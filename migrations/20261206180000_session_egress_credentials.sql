-- The credentials the egress proxy applies for a session's sandbox (issue 36): a JSON list
-- sealed under the master key with the session's id in its associated data, written at boot
-- beside `sandbox_secrets` and cleared with it, so it exists exactly while a sandbox is up.
alter table sessions add column egress_credentials bytea;
