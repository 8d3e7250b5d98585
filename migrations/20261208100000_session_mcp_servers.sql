-- A session may narrow its agent's MCP servers to some of them, by name (issue 39). Null:
-- all of the agent's. Names the agent (at "latest") no longer has are simply not used.
alter table sessions add column mcp_servers text[];
