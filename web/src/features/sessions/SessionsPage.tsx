import { Anchor, Button, Card, Group, Pagination, Select, Skeleton, Stack, Table, Text } from '@mantine/core';
import { useMediaQuery } from '@mantine/hooks';
import { IconBox } from '@tabler/icons-react';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useSearchParams } from 'react-router-dom';
import { api, unwrap, unwrapPage, type Session } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { RelTime } from '../../lib/time';
import { StartSessionModal } from './StartSessionModal';
import { StatusBadge } from './StatusBadge';

const PAGE = 25;
const STATUSES = ['provisioning', 'running', 'stopped', 'error'];

/** The environment a session was created in, linked to its page; nothing for the default image. */
function EnvironmentLink({ session: s }: { session: Session }) {
  if (!s.environment_id) return null;
  return (
    <Anchor
      component={Link}
      to={`/environments/${encodeURIComponent(s.environment_id)}`}
      size="xs"
      c="dimmed"
      data-testid="session-row-environment"
      style={{ display: 'inline-flex', alignItems: 'center', gap: 4 }}
    >
      <IconBox size={12} /> {s.environment_name ?? 'environment'}
    </Anchor>
  );
}

export default function SessionsPage() {
  const [params, setParams] = useSearchParams();
  const [starting, setStarting] = useState(false);
  const agent = params.get('agent');
  const environment = params.get('environment');
  const status = params.get('status');
  const page = Math.max(1, Number(params.get('page') ?? 1) || 1);
  const set = (k: string, v: string | null) => {
    const next = new URLSearchParams(params);
    if (v) next.set(k, v);
    else next.delete(k);
    if (k !== 'page') next.delete('page');
    setParams(next, { replace: k !== 'page' });
  };
  const agents = useQuery({ queryKey: keys.agents.list({ archived: true }), queryFn: () => unwrap(api.GET('/api/agents', { params: { query: { include_archived: true } } })) });
  const environments = useQuery({
    queryKey: keys.environments.list({ archived: true }),
    queryFn: () => unwrap(api.GET('/api/environments', { params: { query: { include_archived: true } } })),
  });
  const sessions = useQuery({
    queryKey: keys.sessions.list({ agent, environment, status, page }),
    queryFn: () =>
      unwrapPage(
        api.GET('/api/sessions', {
          params: {
            query: {
              ...(agent ? { agent_id: agent } : {}),
              ...(environment ? { environment_id: environment } : {}),
              ...(status ? { status: status as 'running' } : {}),
              limit: PAGE,
              offset: (page - 1) * PAGE,
            },
          },
        }),
      ),
    placeholderData: keepPreviousData,
    // Live status: poll while something is on the move.
    refetchInterval: (q) => (q.state.data?.items.some((s) => s.status === 'provisioning' || s.activity === 'busy') ? 2000 : 10000),
  });
  const agentById = new Map((agents.data ?? []).map((a) => [a.id, a]));
  const total = sessions.data?.total ?? sessions.data?.items.length ?? 0;
  // Below Mantine's `sm` breakpoint a table of six columns cannot fit: each session is a card
  // instead (title, status, agent, last event), so nothing needs scrolling sideways.
  const narrow = useMediaQuery('(max-width: 48em)') ?? false;
  const pages = Math.max(1, Math.ceil(total / PAGE));

  return (
    <>
      <PageHeader
        title="Sessions"
        description="Each session is one conversation and the sandbox it owns."
        actions={
          <Button onClick={() => setStarting(true)}>Start a session</Button>
        }
      />
      {starting && <StartSessionModal opened defaultAgent={agent ?? undefined} onClose={() => setStarting(false)} />}
      <Group mb="md">
        <Select
          placeholder="Any agent"
          aria-label="Filter by agent"
          clearable
          searchable
          data={(agents.data ?? []).map((a) => ({ value: a.slug, label: `${a.name} (${a.slug})` }))}
          value={agent}
          onChange={(v) => set('agent', v)}
          w={260}
        />
        <Select
          placeholder="Any environment"
          aria-label="Filter by environment"
          clearable
          searchable
          data={[...new Set([...(environments.data ?? []).map((e) => e.name), ...(environment ? [environment] : [])])]}
          value={environment}
          onChange={(v) => set('environment', v)}
          w={220}
        />
        <Select placeholder="Any status" aria-label="Filter by status" clearable data={STATUSES} value={status} onChange={(v) => set('status', v)} w={180} />
        {sessions.data && (
          <Text size="sm" c="dimmed" data-testid="sessions-total">
            {total} session{total === 1 ? '' : 's'}
          </Text>
        )}
      </Group>
      <ErrorAlert error={sessions.error} />
      {sessions.isPending ? (
        <Skeleton h={160} />
      ) : sessions.data && sessions.data.items.length === 0 ? (
        <EmptyState
          title={agent || environment || status ? 'No session matches these filters' : 'No sessions yet'}
          action={
            !(agent || environment || status) && (
              <Button component={Link} to="/agents" variant="light">
                Pick an agent to start one
              </Button>
            )
          }
        >
          {agent || environment || status ? 'Clear a filter to see more.' : 'Open an agent and press “Start a session”, or create one from code.'}
        </EmptyState>
      ) : (
        <>
          {narrow ? (
            <Stack gap="xs" data-testid="session-cards">
              {(sessions.data?.items ?? []).map((s) => {
                const a = agentById.get(s.agent_id);
                return (
                  <Card withBorder key={s.id} padding="sm" data-testid="session-card">
                    <Group justify="space-between" wrap="nowrap" align="flex-start">
                      <Anchor component={Link} to={`/sessions/${s.id}`} fw={600} lineClamp={1}>
                        {s.title || 'Untitled'}
                      </Anchor>
                      <StatusBadge session={s} />
                    </Group>
                    {s.error && (
                      <Text size="xs" c="red" lineClamp={2}>
                        {s.error}
                      </Text>
                    )}
                    <Group gap="xs" mt={4} wrap="nowrap">
                      <Text size="xs" c="dimmed" lineClamp={1}>
                        {a ? a.slug : s.agent_id.slice(0, 8)} · last event
                      </Text>
                      <RelTime value={s.last_event_at} size="xs" />
                    </Group>
                    <EnvironmentLink session={s} />
                  </Card>
                );
              })}
            </Stack>
          ) : (
          <Table.ScrollContainer minWidth={720}>
            <Table highlightOnHover verticalSpacing="sm">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Session</Table.Th>
                  <Table.Th>Agent</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Tokens</Table.Th>
                  <Table.Th>Last event</Table.Th>
                  <Table.Th>Created</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {(sessions.data?.items ?? []).map((s) => {
                  const a = agentById.get(s.agent_id);
                  const usage = (s.usage ?? {}) as Record<string, unknown>;
                  return (
                    <Table.Tr key={s.id}>
                      <Table.Td>
                        <Anchor component={Link} to={`/sessions/${s.id}`} fw={600}>
                          {s.title || 'Untitled'}
                        </Anchor>
                        <Text size="xs" c="dimmed" ff="monospace">
                          {s.id}
                        </Text>
                      </Table.Td>
                      <Table.Td>
                        {a ? (
                          <Anchor component={Link} to={`/agents/${a.slug}`} size="sm">
                            {a.slug}
                          </Anchor>
                        ) : (
                          <Text size="sm" ff="monospace">
                            {s.agent_id.slice(0, 8)}
                          </Text>
                        )}
                        <div>
                          <EnvironmentLink session={s} />
                        </div>
                      </Table.Td>
                      <Table.Td>
                        <StatusBadge session={s} />
                        {s.error && (
                          <Text size="xs" c="red" lineClamp={1}>
                            {s.error}
                          </Text>
                        )}
                      </Table.Td>
                      <Table.Td>
                        <Text size="sm">{typeof usage.total_tokens === 'number' ? usage.total_tokens.toLocaleString() : '—'}</Text>
                      </Table.Td>
                      <Table.Td>
                        <RelTime value={s.last_event_at} size="sm" />
                      </Table.Td>
                      <Table.Td>
                        <RelTime value={s.created_at} size="sm" />
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          )}
          {pages > 1 && <Pagination mt="md" total={pages} value={page} onChange={(p) => set('page', String(p))} />}
        </>
      )}
    </>
  );
}
