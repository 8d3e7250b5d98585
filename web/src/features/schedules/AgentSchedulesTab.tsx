// An agent's schedules (its page's Schedules tab): the list, and a new one.
import { Button, Card, Group, Text, Title } from '@mantine/core';
import { IconPlus } from '@tabler/icons-react';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../components/common';
import { ScheduleFormModal } from './ScheduleFormModal';
import { ScheduleTable } from './ScheduleTable';

export function AgentSchedulesTab({ agent }: { agent: Agent }) {
  const [creating, setCreating] = useState(false);
  const schedules = useQuery({
    queryKey: keys.schedules.ofAgent(agent.slug),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}/schedules', { params: { path: { ref: agent.slug } } })),
    // The next due time moves on as fires land.
    refetchInterval: 10_000,
  });
  const rows = (schedules.data ?? []).map((schedule) => ({ schedule, agent }));
  return (
    <Card withBorder>
      <Group justify="space-between" mb="xs">
        <div>
          <Title order={4}>Schedules</Title>
          <Text size="sm" c="dimmed">
            A message sent to this agent on a cron expression, in a new session each time or in one it continues.
          </Text>
        </div>
        <Button leftSection={<IconPlus size={16} />} onClick={() => setCreating(true)} disabled={!!agent.archived_at} title={agent.archived_at ? 'An archived agent takes no new schedules' : undefined}>
          New schedule
        </Button>
      </Group>
      <ErrorAlert error={schedules.error} />
      {schedules.data && rows.length === 0 ? (
        <EmptyState title="No schedules">Send this agent a message every weekday at nine, every hour, or on any cron expression.</EmptyState>
      ) : (
        schedules.data && <ScheduleTable rows={rows} />
      )}
      <ScheduleFormModal opened={creating} onClose={() => setCreating(false)} agent={agent} />
    </Card>
  );
}
