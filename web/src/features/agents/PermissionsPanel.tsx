// The agent form's Permissions tab: the editor, over the keys the agent in the form has and,
// for an agent with MCP servers, the tools those servers list now (read only while the tab is
// open: listing connects to every remote server).
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { permissionTargets, type AgentTools, type PermissionRows } from '../../lib/permissions';
import { withListedMcpTools } from './model';
import { PermissionsEditor } from './PermissionsEditor';

export function PermissionsPanel({
  slug,
  tools,
  rows,
  onChange,
  errors,
}: {
  /** The saved agent's slug; null for one not created yet. */
  slug: string | null;
  tools: AgentTools;
  rows: PermissionRows;
  onChange: (rows: PermissionRows) => void;
  errors: Record<string, string>;
}) {
  const listed = useQuery({
    queryKey: keys.agents.mcpServers(slug ?? ''),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}/mcp-servers', { params: { path: { ref: slug! } } })),
    enabled: !!slug && (tools.mcp?.length ?? 0) > 0,
    refetchOnWindowFocus: false,
    staleTime: 60_000,
  });
  return <PermissionsEditor rows={rows} targets={permissionTargets(withListedMcpTools(tools, listed.data))} onChange={onChange} errors={errors} />;
}
