// The agent's MCP servers tab: each server's fields beside what the control plane finds when it
// connects now (GET /api/agents/{ref}/mcp-servers, slow: it reaches every server, so it is read
// when the tab opens and when a person asks, not on focus). The list is saved whole with PATCH
// under the agent's version lock: a stale save (409) keeps the edits and reads the agent again,
// so the next save replaces the servers knowingly.
import { ActionIcon, Alert, Button, Card, Group, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { IconPlus, IconRefresh, IconTrash } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, ApiError, fieldErrors, unwrap, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../components/common';
import { McpServerEditor } from './McpServerEditor';
import { McpServerStatusView } from './McpServerStatusView';
import { emptyServerRow, errorsAt, errorsElsewhere, mcpServerErrors, serverBody, serverRowOf, statusOf, type McpServerRow } from './mcpServers';

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export function AgentMcpTab({ agent, onSaved, onStale }: { agent: Agent; onSaved: (a: Agent) => void; onStale: () => void }) {
  const qc = useQueryClient();
  const slug = agent.slug;
  const saved = (agent.mcp_servers ?? []).map(serverRowOf);
  // null: the rows are the agent's as saved (and follow it when it changes).
  const [draft, setDraft] = useState<McpServerRow[] | null>(null);
  const [tried, setTried] = useState(false);
  const rows = draft ?? saved;

  const status = useQuery({
    queryKey: keys.agents.mcpServers(slug),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}/mcp-servers', { params: { path: { ref: slug } } })),
    enabled: saved.length > 0,
    refetchOnWindowFocus: false,
    staleTime: 60_000,
  });
  const secrets = useQuery({ queryKey: keys.secrets(), queryFn: () => unwrap(api.GET('/api/secrets')) });

  const save = useMutation({
    mutationFn: (sent: McpServerRow[]) =>
      unwrap(api.PATCH('/api/agents/{ref}', { params: { path: { ref: slug } }, body: { version: agent.version, mcp_servers: sent.map(serverBody) } })),
    onSuccess: (a) => {
      onSaved(a);
      setDraft(null);
      setTried(false);
      qc.invalidateQueries({ queryKey: keys.agents.versions(a.slug) });
      qc.invalidateQueries({ queryKey: keys.agents.mcpServers(a.slug) });
      notifications.show({ color: 'teal', message: `Saved the MCP servers (version ${a.version})` });
    },
    onError: (e) => {
      if (e instanceof ApiError && e.status === 409) onStale();
    },
  });

  const clientErrors = tried ? mcpServerErrors(rows) : {};
  // The server's word on the fields, while the rows are as they were sent.
  const serverErrors = save.variables && same(save.variables, rows) ? fieldErrors(save.error) : {};
  const errors = { ...serverErrors, ...clientErrors };
  const error = (key: string) => errorsAt(errors, key);
  const elsewhere = errorsElsewhere(errors, rows.length);
  const stale = save.error instanceof ApiError && save.error.status === 409;
  const dirty = draft !== null && !same(draft, saved);

  const edit = (next: McpServerRow[]) => setDraft(next);
  const submit = () => {
    setTried(true);
    if (Object.keys(mcpServerErrors(rows)).length === 0) save.mutate(rows);
  };
  const discard = () => {
    setDraft(null);
    setTried(false);
    save.reset();
  };

  return (
    <Stack>
      <Card withBorder>
        <Group justify="space-between" align="flex-start" wrap="wrap" gap="sm">
          <Stack gap={2} style={{ flex: '1 1 360px' }}>
            <Title order={4}>MCP servers</Title>
            <Text size="sm" c="dimmed">
              Their tools are offered to the model as mcp__&lt;server&gt;__&lt;tool&gt;, and set on the Permissions tab like any other (mcp__&lt;server&gt; for all of a server’s). A remote server is called from the control plane. A server run in the sandbox (a command) is started in each session’s sandbox when a turn starts, in /workspace with the session’s environment variables and its own, and spoken to over stdio: its tools are listed per session, so here it shows as declared.
            </Text>
          </Stack>
          <Button variant="default" leftSection={<IconRefresh size={16} />} onClick={() => status.refetch()} loading={status.isFetching} disabled={saved.length === 0} data-testid="mcp-check-again">
            Check again
          </Button>
        </Group>
      </Card>
      {stale && (
        <Alert color="orange" title="Someone saved the agent meanwhile" data-testid="mcp-stale">
          <Text size="sm">Your edits are kept and the agent was read again: save to replace its MCP servers with these, or discard your changes to see its servers as they are now.</Text>
        </Alert>
      )}
      {!stale && <ErrorAlert error={Object.keys(serverErrors).length ? null : save.error} title="Not saved" />}
      <ErrorAlert error={status.error} title="Could not check the servers" />
      {elsewhere.length > 0 && (
        <Alert color="red" p="xs" data-testid="mcp-errors">
          {elsewhere.map(([k, msg]) => (
            <Text size="sm" key={k}>
              {k}: {msg}
            </Text>
          ))}
        </Alert>
      )}
      {rows.length === 0 && (
        <EmptyState title="No MCP servers">Add one to offer its tools to this agent’s model.</EmptyState>
      )}
      {rows.map((row, i) => {
        const before = saved.find((s) => s.name === row.name.trim());
        const unsaved = !before ? 'new' : same(before, row) ? null : 'changed';
        const found = before ? statusOf(status.data, before.name) : undefined;
        return (
          <Card withBorder key={i} data-testid="mcp-server" data-name={row.name}>
            <Group justify="space-between" mb="xs">
              <Text fw={600} ff="monospace">
                {row.name.trim() || `Server ${i + 1}`}
              </Text>
              <ActionIcon variant="subtle" color="red" aria-label={`Remove server ${row.name || i + 1}`} onClick={() => edit(rows.filter((_, j) => j !== i))}>
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
            <SimpleGrid cols={{ base: 1, md: 2 }} spacing="lg">
              <McpServerEditor
                row={row}
                index={i}
                onChange={(r) => edit(rows.map((x, j) => (j === i ? r : x)))}
                error={error}
                secretNames={(secrets.data ?? []).map((s) => s.name)}
                listedTools={(found?.tools ?? []).map((t) => t.name)}
              />
              <McpServerStatusView status={found} loading={status.isFetching} unsaved={unsaved} kind={row.kind} />
            </SimpleGrid>
          </Card>
        );
      })}
      <Group>
        <Button variant="light" leftSection={<IconPlus size={16} />} onClick={() => edit([...rows, emptyServerRow()])} disabled={rows.length >= 16}>
          Add a server
        </Button>
        <Button onClick={submit} loading={save.isPending} disabled={!dirty} data-testid="mcp-save">
          Save MCP servers
        </Button>
        {dirty && (
          <Button variant="subtle" onClick={discard}>
            Discard changes
          </Button>
        )}
      </Group>
    </Stack>
  );
}
