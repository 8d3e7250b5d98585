import { Badge, Button, Group, Switch, Table, Text, TextInput, Anchor, Skeleton } from '@mantine/core';
import { IconPlus, IconSearch } from '@tabler/icons-react';
import { useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router-dom';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { RelTime } from '../../lib/time';

export default function AgentsPage() {
  const [params, setParams] = useSearchParams();
  const q = params.get('q') ?? '';
  const archived = params.get('archived') === '1';
  const set = (k: string, v: string | null) => {
    const next = new URLSearchParams(params);
    if (v) next.set(k, v);
    else next.delete(k);
    setParams(next, { replace: true });
  };
  const agents = useQuery({
    queryKey: keys.agents.list({ archived }),
    queryFn: () => unwrap(api.GET('/api/agents', { params: { query: { include_archived: archived } } })),
  });
  const needle = q.toLowerCase();
  const rows = (agents.data ?? []).filter(
    (a) => !needle || a.slug.includes(needle) || a.name.toLowerCase().includes(needle) || a.description.toLowerCase().includes(needle),
  );

  return (
    <>
      <PageHeader
        title="Agents"
        description="Reusable definitions: instructions, model, tools and the files a sandbox starts from."
        actions={
          <Button component={Link} to="/agents/new" leftSection={<IconPlus size={16} />}>
            New agent
          </Button>
        }
      />
      <Group mb="md">
        <TextInput
          placeholder="Search by slug, name or description"
          leftSection={<IconSearch size={16} />}
          value={q}
          onChange={(e) => set('q', e.currentTarget.value || null)}
          w={340}
          aria-label="Search agents"
        />
        <Switch label="Show archived" checked={archived} onChange={(e) => set('archived', e.currentTarget.checked ? '1' : null)} />
      </Group>
      <ErrorAlert error={agents.error} />
      {agents.isPending ? (
        <Skeleton h={120} />
      ) : rows.length === 0 ? (
        <EmptyState
          title={q ? 'No agent matches' : 'No agents yet'}
          action={
            !q && (
              <Button component={Link} to="/agents/new" variant="light">
                Create your first agent
              </Button>
            )
          }
        >
          {q ? 'Try another search, or show archived agents too.' : 'An agent says what its sessions run: the model, the instructions and the tools. Create one, then start a session with it.'}
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table highlightOnHover verticalSpacing="sm">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Agent</Table.Th>
                <Table.Th>Model</Table.Th>
                <Table.Th>Version</Table.Th>
                <Table.Th>Updated</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map((a) => (
                <Table.Tr key={a.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/agents/${a.slug}`} fw={600}>
                      {a.name}
                    </Anchor>{' '}
                    <Text span c="dimmed" size="sm" ff="monospace">
                      {a.slug}
                    </Text>
                    {a.archived_at && (
                      <Badge ml="xs" color="gray" variant="light">
                        archived
                      </Badge>
                    )}
                    {a.description && (
                      <Text size="sm" c="dimmed" lineClamp={1}>
                        {a.description}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Text size="sm" ff="monospace">
                      {a.model}
                    </Text>
                  </Table.Td>
                  <Table.Td>{a.version}</Table.Td>
                  <Table.Td>
                    <RelTime value={a.updated_at} size="sm" />
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </>
  );
}
