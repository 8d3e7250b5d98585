// Schedules as a table, an agent's or the project's (with the agent column): each one's
// expression and zone, its next fire in the viewer's zone and in its own, the session it
// starts or continues, and its actions (pause or resume, edit, history, delete).
import { ActionIcon, Anchor, Badge, Button, Group, Popover, Stack, Table, Text, Tooltip } from '@mantine/core';
import { IconHistory, IconPencil, IconTrash } from '@tabler/icons-react';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router-dom';
import { api, unwrap, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ErrorAlert } from '../../components/common';
import { nextFire, viewerZone, type Schedule } from '../../lib/schedules';
import { ScheduleFiresModal } from './ScheduleFires';
import { ScheduleFormModal } from './ScheduleFormModal';

export type ScheduleRow = { schedule: Schedule; agent: Agent };

export function ScheduleTable({ rows, showAgent = false }: { rows: ScheduleRow[]; showAgent?: boolean }) {
  const qc = useQueryClient();
  const [editing, setEditing] = useState<ScheduleRow | null>(null);
  const [history, setHistory] = useState<ScheduleRow | null>(null);
  const zone = viewerZone();

  const act = useMutation({
    mutationFn: async ({ row, kind }: { row: ScheduleRow; kind: 'pause' | 'resume' | 'delete' }) => {
      const path = { params: { path: { ref: row.agent.slug, schedule_id: row.schedule.id } } };
      if (kind === 'delete') {
        await unwrap(api.DELETE('/api/agents/{ref}/schedules/{schedule_id}', path));
        return;
      }
      await unwrap(api.PATCH('/api/agents/{ref}/schedules/{schedule_id}', { ...path, body: { paused: kind === 'pause' } }));
    },
    onSuccess: (_, { kind }) => {
      qc.invalidateQueries({ queryKey: keys.schedules.all() });
      notifications.show({ message: kind === 'delete' ? 'Schedule deleted' : kind === 'pause' ? 'Schedule paused' : 'Schedule resumed' });
    },
  });
  const busy = (row: ScheduleRow, kind: string) => act.isPending && act.variables?.row.schedule.id === row.schedule.id && act.variables.kind === kind;

  return (
    <>
      <ErrorAlert error={act.error} />
      <Table.ScrollContainer minWidth={860}>
        <Table verticalSpacing="sm" data-testid="schedule-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>{showAgent ? 'Name and agent' : 'Name'}</Table.Th>
              <Table.Th>Cron</Table.Th>
              <Table.Th>
                Next fire{' '}
                <Text span size="xs" c="dimmed" fw={400}>
                  (yours, then its zone’s)
                </Text>
              </Table.Th>
              <Table.Th>Session</Table.Th>
              <Table.Th />
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((row) => {
              const { schedule: s, agent: a } = row;
              const next = nextFire(s, zone);
              return (
                <Table.Tr key={s.id} data-testid="schedule-row" data-schedule-id={s.id}>
                  <Table.Td maw={240}>
                    <Text size="sm" fw={500} lineClamp={1} title={`Message: ${s.message}`} data-testid="schedule-name">
                      {s.name || <Text span c="dimmed" size="sm">Unnamed</Text>}
                    </Text>
                    {showAgent ? (
                      <Group gap={4} wrap="nowrap">
                        <Anchor component={Link} to={`/agents/${a.slug}?tab=schedules`} size="xs" lineClamp={1} data-testid="schedule-agent">
                          {a.name}
                        </Anchor>
                        {a.archived_at && (
                          <Badge color="gray" size="xs">
                            archived
                          </Badge>
                        )}
                      </Group>
                    ) : (
                      <Text size="xs" c="dimmed" lineClamp={1} title={s.message}>
                        {s.message}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>
                    <Text size="sm" ff="monospace" data-testid="schedule-cron">
                      {s.cron}
                    </Text>
                    <Text size="xs" c="dimmed" data-testid="schedule-timezone">
                      {s.timezone}
                    </Text>
                  </Table.Td>
                  <Table.Td data-testid="schedule-next">
                    {next.kind === 'paused' ? (
                      <Badge color="yellow" variant="light" data-testid="schedule-paused">
                        paused
                      </Badge>
                    ) : next.kind === 'none' ? (
                      <Text size="sm" c="dimmed">
                        none
                      </Text>
                    ) : (
                      <Stack gap={0}>
                        <Tooltip label={`In your time zone (${zone})`} openDelay={300}>
                          <Text size="sm" component="time" dateTime={next.at} style={{ whiteSpace: 'nowrap' }} data-testid="next-fire-viewer">
                            {next.viewer}
                          </Text>
                        </Tooltip>
                        {next.local && (
                          <Text size="xs" c="dimmed" style={{ whiteSpace: 'nowrap' }} data-testid="next-fire-local">
                            {next.local} in {s.timezone}
                          </Text>
                        )}
                      </Stack>
                    )}
                  </Table.Td>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>
                    {s.session === 'new' ? (
                      <Text size="sm" data-testid="schedule-session">
                        new session
                      </Text>
                    ) : (
                      <Anchor component={Link} to={`/sessions/${s.session}`} size="sm" ff="monospace" data-testid="schedule-session">
                        {s.session.slice(0, 8)}
                      </Anchor>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Group gap={6} justify="flex-end" wrap="nowrap">
                      <Button size="xs" variant="default" onClick={() => act.mutate({ row, kind: s.paused ? 'resume' : 'pause' })} loading={busy(row, 'pause') || busy(row, 'resume')}>
                        {s.paused ? 'Resume' : 'Pause'}
                      </Button>
                      <Tooltip label="History: its fires" openDelay={300}>
                        <ActionIcon variant="default" size={30} onClick={() => setHistory(row)} aria-label="History">
                          <IconHistory size={16} />
                        </ActionIcon>
                      </Tooltip>
                      <Tooltip label="Edit" openDelay={300}>
                        <ActionIcon variant="default" size={30} onClick={() => setEditing(row)} aria-label="Edit">
                          <IconPencil size={16} />
                        </ActionIcon>
                      </Tooltip>
                      <ConfirmIcon label="Delete" loading={busy(row, 'delete')} message="Delete this schedule for good? Its history goes with it; the sessions it started stay." onConfirm={() => act.mutate({ row, kind: 'delete' })} />
                    </Group>
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <ScheduleFormModal opened={!!editing} onClose={() => setEditing(null)} agent={editing?.agent} schedule={editing?.schedule} />
      <ScheduleFiresModal agent={history?.agent.slug ?? ''} schedule={history?.schedule ?? null} onClose={() => setHistory(null)} />
    </>
  );
}

/** A red icon button that asks "are you sure?" in a popover before it acts. */
function ConfirmIcon({ label, message, onConfirm, loading }: { label: string; message: string; onConfirm: () => void; loading: boolean }) {
  const [opened, setOpened] = useState(false);
  return (
    <Popover opened={opened} onChange={setOpened} withArrow trapFocus position="bottom-end">
      <Popover.Target>
        <ActionIcon variant="light" color="red" size={30} onClick={() => setOpened((o) => !o)} aria-label={label} loading={loading} title={label}>
          <IconTrash size={16} />
        </ActionIcon>
      </Popover.Target>
      <Popover.Dropdown maw={320}>
        <Stack gap="xs">
          <Text size="sm">{message}</Text>
          <Group justify="flex-end" gap="xs">
            <Button size="xs" variant="default" onClick={() => setOpened(false)}>
              Cancel
            </Button>
            <Button
              size="xs"
              color="red"
              onClick={() => {
                setOpened(false);
                onConfirm();
              }}
            >
              {label}
            </Button>
          </Group>
        </Stack>
      </Popover.Dropdown>
    </Popover>
  );
}
