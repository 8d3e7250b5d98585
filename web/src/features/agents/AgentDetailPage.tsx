import { Badge, Button, Card, Group, SimpleGrid, Stack, Tabs, Text, Title, Anchor, Table } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { IconPlayerPlay } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router-dom';
import { api, ApiError, unwrap, unwrapPage, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { CodeBlock, ConfirmButton, EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { useAppContext } from '../../context';
import { PageFallback } from '../../components/PageFallback';
import { budgetSummary, limitsOf } from '../../lib/budget';
import { policySummary } from '../../lib/network';
import { RelTime } from '../../lib/time';
import { AgentHistoryTab } from './AgentHistoryTab';
import { AgentMemoryTab } from './AgentMemoryTab';
import { AgentMcpTab } from './AgentMcpTab';
import { agentBody, agentSnippets, formFromAgent, toolsOfAgent } from './model';
import { permissionsSummary, permissionTargets, type Permissions } from '../../lib/permissions';
import { describeBinding } from '../../lib/secretBindings';
import { historyPath, parseVersion } from '../../lib/agentVersions';

import { StartSessionModal, StatusBadge } from '../sessions';
import { AgentUsage } from '../usage';
import { AgentSchedulesTab } from '../schedules';

/** The page's tabs, named by `?tab=` (none: the overview); History also takes `&version=N`. */
const TABS = ['overview', 'mcp', 'schedules', 'memory', 'history'] as const;
type Tab = (typeof TABS)[number];

function Field({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div>
      <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
        {label}
      </Text>
      <Text size="sm" component="div" style={{ wordBreak: 'break-word' }}>
        {children}
      </Text>
    </div>
  );
}

export default function AgentDetailPage() {
  const { ref } = useParams();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const { project } = useAppContext();
  const [starting, setStarting] = useState(false);
  const [params, setParams] = useSearchParams();
  const tab: Tab = TABS.find((t) => t === params.get('tab')) ?? 'overview';
  const setTab = (t: string | null) => {
    const next = new URLSearchParams(params);
    if (t && t !== 'overview') next.set('tab', t);
    else next.delete('tab');
    next.delete('version');
    setParams(next, { replace: true });
  };
  const agent = useQuery({ queryKey: keys.agents.detail(ref!), queryFn: () => unwrap(api.GET('/api/agents/{ref}', { params: { path: { ref: ref! } } })) });
  const sessions = useQuery({
    queryKey: keys.sessions.ofAgent(ref!, 10),
    queryFn: () => unwrapPage(api.GET('/api/sessions', { params: { query: { agent_id: ref!, limit: 10, offset: 0 } } })),
  });
  const action = useMutation({
    mutationFn: async (kind: 'archive' | 'unarchive' | 'delete') => {
      const path = { params: { path: { ref: agent.data!.slug } } };
      if (kind === 'archive') return unwrap(api.POST('/api/agents/{ref}/archive', path));
      if (kind === 'unarchive') return unwrap(api.POST('/api/agents/{ref}/unarchive', path));
      await unwrap(api.DELETE('/api/agents/{ref}', path));
      return null;
    },
    onSuccess: (a, kind) => {
      qc.invalidateQueries({ queryKey: keys.agents.all() });
      if (kind === 'delete') {
        notifications.show({ message: 'Agent deleted' });
        navigate('/agents');
      } else if (a) qc.setQueryData(keys.agents.detail(ref!), a);
    },
  });

  // A restore or a save of the MCP servers answers with the agent at its new version; a refused
  // one (409) means it moved on.
  const onRestored = (a: Agent) => {
    qc.setQueryData(keys.agents.detail(ref!), a);
    qc.invalidateQueries({ queryKey: keys.agents.all() });
  };
  const onStale = () => qc.invalidateQueries({ queryKey: keys.agents.detail(ref!) });

  if (agent.isPending) return <PageFallback />;
  if (agent.error) return <ErrorAlert error={agent.error} />;
  const a = agent.data;
  // The form's body leaves the MCP servers out (their tab edits them); the snippets make the whole agent.
  const snippets = agentSnippets({ ...agentBody(formFromAgent(a)), mcp_servers: a.mcp_servers }, window.location.origin, project?.slug ?? null);
  const focus = parseVersion(params.get('version'), a.version);
  const permissions = permissionsSummary(a.permissions as Permissions, permissionTargets(toolsOfAgent(a)));
  const deleteRefused = action.error instanceof ApiError && action.error.status === 409 && action.variables === 'delete';

  return (
    <>
      <PageHeader
        title={
          <Group gap="xs">
            {a.name}
            {a.archived_at && <Badge color="gray">archived</Badge>}
          </Group>
        }
        description={
          <>
            <Text span ff="monospace">{a.slug}</Text> ·{' '}
            <Anchor component={Link} to={historyPath(a.slug)} size="sm" data-testid="agent-version-link">
              version {a.version}
            </Anchor>{' '}
            · updated <RelTime value={a.updated_at} />
          </>
        }
        actions={
          <>
            <Button leftSection={<IconPlayerPlay size={16} />} onClick={() => setStarting(true)} disabled={!!a.archived_at} title={a.archived_at ? 'An archived agent starts no sessions' : undefined}>
              Start a session
            </Button>
            <Button variant="default" component={Link} to={`/agents/${a.slug}/edit`}>
              Edit
            </Button>
            {a.archived_at ? (
              <Button variant="default" onClick={() => action.mutate('unarchive')} loading={action.isPending && action.variables === 'unarchive'}>
                Unarchive
              </Button>
            ) : (
              <ConfirmButton variant="default" color="orange" message="Archived agents drop out of the list and start no sessions; existing sessions go on." onConfirm={() => action.mutate('archive')} confirmLabel="Archive">
                Archive
              </ConfirmButton>
            )}
            <ConfirmButton variant="light" color="red" message="Delete this agent for good? Refused while any session references it." onConfirm={() => action.mutate('delete')} confirmLabel="Delete">
              Delete
            </ConfirmButton>
          </>
        }
      />
      {deleteRefused ? (
        <ErrorAlert error={new ApiError(409, `${(action.error as ApiError).detail} Sessions still reference this agent, so it cannot be deleted; archive it instead to keep it from starting new sessions.`, null)} title="Not deleted" />
      ) : (
        <ErrorAlert error={action.error} />
      )}
      <StartSessionModal agent={a} opened={starting} onClose={() => setStarting(false)} />
      <Tabs value={tab} onChange={setTab} keepMounted={false}>
        <Tabs.List mb="md">
          <Tabs.Tab value="overview">Overview</Tabs.Tab>
          <Tabs.Tab value="mcp">MCP servers</Tabs.Tab>
          <Tabs.Tab value="schedules">Schedules</Tabs.Tab>
          <Tabs.Tab value="memory">Memory</Tabs.Tab>
          <Tabs.Tab value="history">History</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="mcp">
          <AgentMcpTab agent={a} onSaved={onRestored} onStale={onStale} />
        </Tabs.Panel>
        <Tabs.Panel value="schedules">
          <AgentSchedulesTab agent={a} />
        </Tabs.Panel>
        <Tabs.Panel value="memory">
          <AgentMemoryTab agent={a} />
        </Tabs.Panel>
        <Tabs.Panel value="history">
          <AgentHistoryTab key={focus ?? 'latest'} agent={a} focus={focus} onRestored={onRestored} onStale={onStale} />
        </Tabs.Panel>
        <Tabs.Panel value="overview">
          <Stack>
            <Card withBorder>
              <SimpleGrid cols={{ base: 1, sm: 3 }}>
                <Field label="Model">{a.model}</Field>
                <Field label="Transport">{a.transport}</Field>
                <Field label="Reasoning effort">{a.reasoning_effort ?? 'provider default'}</Field>
                <Field label="Image">{a.image ?? 'server default'}</Field>
                <Field label="Capabilities">{a.capabilities ? a.capabilities.join(', ') : 'default (shell, filesystem, compaction)'}</Field>
                <Field label="Idle TTL">{a.idle_ttl_seconds == null ? 'server default' : a.idle_ttl_seconds === 0 ? 'never released' : `${a.idle_ttl_seconds}s`}</Field>
                <Field label="Exposed ports">{a.exposed_ports.length ? a.exposed_ports.join(', ') : 'none'}</Field>
                <Field label="Client tools">{a.client_tools.length ? a.client_tools.map((t) => t.name + (t.deferrable ? ' (deferrable)' : '')).join(', ') : 'none'}</Field>
                <Field label="Secret bindings">
                  {a.secret_bindings.length
                    ? a.secret_bindings.map((b, i) => (
                        <div key={i} data-testid="secret-binding-shown">
                          {describeBinding(b)}
                        </div>
                      ))
                    : 'none'}
                </Field>
                <Field label="MCP servers">
                  <span data-testid="agent-mcp-servers">{a.mcp_servers?.length ? a.mcp_servers.map((m) => `${m.name} (${m.command ? 'in the sandbox' : 'remote'}${m.required ? ', required' : ''})`).join(', ') : 'none'}</span>
                </Field>
                <Field label="Subagents">{a.subagents.length ? a.subagents.map((s) => `${s.agent} (${s.mode ?? 'tool'})`).join(', ') : 'none'}</Field>
                <Field label="Subagent step limit">{a.subagents.length ? `${a.subagent_max_steps} model calls per subagent task` : `${a.subagent_max_steps} (no subagents)`}</Field>
                <Field label="Workspace entries">{Object.keys(a.manifest?.entries ?? {}).join(', ') || 'none'}</Field>
                <Field label="Environment">{a.environment_id ?? 'server default'}</Field>
                <Field label="Runtime class">
                  <span data-testid="agent-runtime-class">{a.runtime_class ?? 'default (its environment’s, else the server’s)'}</span>
                </Field>
                <Field label="Network">
                  <span data-testid="agent-network">{policySummary(formFromAgent(a).network)}</span>
                </Field>
                <Field label="Permissions">
                  <span data-testid="agent-permissions" title="The tools whose calls wait for a person's approval, or are never offered; every other call runs">
                    {permissions.length
                      ? permissions.map((line) => (
                          <div key={line} data-testid="agent-permission">
                            {line}
                          </div>
                        ))
                      : 'every tool allowed'}
                  </span>
                </Field>
                <Field label="Session budget">
                  <span data-testid="agent-budget" title="Copied to each session created without a budget of its own">
                    {limitsOf(a.budget).length ? `${budgetSummary(a.budget)} per session` : 'none'}
                  </span>
                </Field>
              </SimpleGrid>
              {a.description && (
                <Text mt="md" size="sm">
                  {a.description}
                </Text>
              )}
            </Card>
            <AgentUsage agent={a} />
            <Card withBorder>
              <Title order={4} mb="xs">
                Instructions
              </Title>
              {a.instructions ? <CodeBlock code={a.instructions} maxHeight={260} /> : <Text c="dimmed" size="sm">None.</Text>}
            </Card>
            <Card withBorder>
              <Title order={4} mb="xs">
                Use from code
              </Title>
              <Tabs defaultValue="python">
                <Tabs.List>
                  <Tabs.Tab value="python">Python</Tabs.Tab>
                  <Tabs.Tab value="curl">curl</Tabs.Tab>
                </Tabs.List>
                <Tabs.Panel value="python" pt="xs">
                  <CodeBlock code={snippets.python} />
                </Tabs.Panel>
                <Tabs.Panel value="curl" pt="xs">
                  <CodeBlock code={snippets.curl} />
                </Tabs.Panel>
              </Tabs>
            </Card>
            <Card withBorder>
              <Group justify="space-between" mb="xs">
                <Title order={4}>Recent sessions</Title>
                <Anchor component={Link} to={`/sessions?agent=${a.slug}`} size="sm">
                  All sessions of this agent
                </Anchor>
              </Group>
              <ErrorAlert error={sessions.error} />
              {sessions.data && sessions.data.items.length === 0 ? (
                <EmptyState title="No sessions yet">Start one to talk to this agent in its own sandbox.</EmptyState>
              ) : (
                <Table>
                  <Table.Tbody>
                    {(sessions.data?.items ?? []).map((s) => (
                      <Table.Tr key={s.id}>
                        <Table.Td>
                          <Anchor component={Link} to={`/sessions/${s.id}`}>
                            {s.title || s.id.slice(0, 8)}
                          </Anchor>
                        </Table.Td>
                        <Table.Td>
                          <StatusBadge session={s} />
                        </Table.Td>
                        <Table.Td>
                          <RelTime value={s.created_at} size="sm" />
                        </Table.Td>
                      </Table.Tr>
                    ))}
                  </Table.Tbody>
                </Table>
              )}
            </Card>
          </Stack>
        </Tabs.Panel>
      </Tabs>
    </>
  );
}
