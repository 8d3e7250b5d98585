// Every schedule of the project: its agents listed, then each agent's schedules, in one table.
import { Button, Card, Group, TextInput } from '@mantine/core';
import { IconPlus, IconSearch } from '@tabler/icons-react';
import { useQueries, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { PageFallback } from '../../components/PageFallback';
import { ScheduleFormModal } from './ScheduleFormModal';
import { ScheduleTable, type ScheduleRow } from './ScheduleTable';

export default function SchedulesPage() {
  const [creating, setCreating] = useState(false);
  const [q, setQ] = useState('');
  const agents = useQuery({
    queryKey: keys.agents.list({ archived: true }),
    queryFn: () => unwrap(api.GET('/api/agents', { params: { query: { include_archived: true } } })),
  });
  const lists = useQueries({
    queries: (agents.data ?? []).map((a) => ({
      queryKey: keys.schedules.ofAgent(a.slug),
      queryFn: () => unwrap(api.GET('/api/agents/{ref}/schedules', { params: { path: { ref: a.slug } } })),
      refetchInterval: 10_000,
    })),
  });
  const loading = agents.isPending || lists.some((l) => l.isPending);
  const error = agents.error ?? lists.find((l) => l.error)?.error;
  const rows: ScheduleRow[] = (agents.data ?? []).flatMap((agent, i) => (lists[i]?.data ?? []).map((schedule) => ({ schedule, agent })));
  const needle = q.trim().toLowerCase();
  const shown = rows.filter(
    ({ schedule: s, agent: a }) => !needle || [s.name, s.cron, s.timezone, s.message, a.slug, a.name].some((x) => x.toLowerCase().includes(needle)),
  );

  return (
    <>
      <PageHeader
        title="Schedules"
        description="Messages sent to agents on cron expressions, each read in its own time zone."
        actions={
          <Button leftSection={<IconPlus size={16} />} onClick={() => setCreating(true)} disabled={!agents.data?.some((a) => !a.archived_at)}>
            New schedule
          </Button>
        }
      />
      <ErrorAlert error={error} />
      {loading && !error ? (
        <PageFallback />
      ) : rows.length === 0 ? (
        <EmptyState title="No schedules yet">Open an agent’s Schedules tab, or press New schedule, to send it a message on a cron expression.</EmptyState>
      ) : (
        <Card withBorder>
          <Group mb="sm">
            <TextInput aria-label="Filter schedules" placeholder="Filter by name, agent, cron, zone or message" leftSection={<IconSearch size={16} />} value={q} onChange={(e) => setQ(e.currentTarget.value)} w={{ base: '100%', sm: 360 }} />
          </Group>
          {shown.length === 0 ? <EmptyState title="No schedule matches" /> : <ScheduleTable rows={shown} showAgent />}
        </Card>
      )}
      <ScheduleFormModal opened={creating} onClose={() => setCreating(false)} agents={agents.data ?? []} />
    </>
  );
}
