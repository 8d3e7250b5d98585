// A schedule's history: each due time, when a server fired (or skipped) it, what became of it,
// and the session and run it started. Newest first, a page at a time, read again every few
// seconds while open (a fire lands whenever the schedule is due).
import { Anchor, Badge, Modal, Pagination, Stack, Table, Text } from '@mantine/core';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router-dom';
import { api, unwrapPage } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../components/common';
import { fireStatusColor, formatInZone, viewerZone, type Schedule } from '../../lib/schedules';

const PAGE = 20;

export function ScheduleFiresModal({ agent, schedule, onClose }: { agent: string; schedule: Schedule | null; onClose: () => void }) {
  return (
    <Modal opened={!!schedule} onClose={onClose} size="xl" title={schedule ? `History of ${schedule.name || 'the schedule'}` : ''}>
      {schedule && <ScheduleFires agent={agent} schedule={schedule} />}
    </Modal>
  );
}

export function ScheduleFires({ agent, schedule }: { agent: string; schedule: Schedule }) {
  const [page, setPage] = useState(1);
  const zone = viewerZone();
  const fires = useQuery({
    queryKey: keys.schedules.firesPage(agent, schedule.id, page),
    queryFn: () =>
      unwrapPage(api.GET('/api/agents/{ref}/schedules/{schedule_id}/fires', { params: { path: { ref: agent, schedule_id: schedule.id }, query: { limit: PAGE, offset: (page - 1) * PAGE } } })),
    placeholderData: keepPreviousData,
    refetchInterval: 3000,
  });
  const total = fires.data?.total ?? 0;
  return (
    <Stack data-testid="schedule-fires">
      <Text size="sm" c="dimmed">
        <Text span ff="monospace">
          {schedule.cron}
        </Text>{' '}
        in {schedule.timezone}; times below in your zone ({zone}).{total ? ` ${total} fire${total === 1 ? '' : 's'}.` : ''}
      </Text>
      <ErrorAlert error={fires.error} />
      {fires.data && fires.data.items.length === 0 ? (
        <EmptyState title="No fires yet">{schedule.paused ? 'The schedule is paused.' : 'Each due time is listed here once a server fires it.'}</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Due</Table.Th>
                <Table.Th>Fired</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Session</Table.Th>
                <Table.Th>Run</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(fires.data?.items ?? []).map((f) => (
                <Table.Tr key={f.due_at} data-testid="schedule-fire">
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatInZone(f.due_at, zone)}</Table.Td>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatInZone(f.fired_at, zone)}</Table.Td>
                  <Table.Td>
                    <Badge color={fireStatusColor(f.status)} variant="light" data-testid="fire-status">
                      {f.status}
                    </Badge>
                    {f.detail && (
                      <Text size="xs" c="dimmed" data-testid="fire-detail">
                        {f.detail}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    {f.session_id ? (
                      <Anchor component={Link} to={`/sessions/${f.session_id}`} ff="monospace" size="sm" data-testid="fire-session">
                        {f.session_id.slice(0, 8)}
                      </Anchor>
                    ) : (
                      <Text span c="dimmed">—</Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    {f.session_id && f.run_id ? (
                      <Anchor component={Link} to={`/sessions/${f.session_id}/usage`} ff="monospace" size="sm" title="The session's runs" data-testid="fire-run">
                        {f.run_id.slice(0, 8)}
                      </Anchor>
                    ) : (
                      <Text span c="dimmed">—</Text>
                    )}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {total > PAGE && <Pagination total={Math.ceil(total / PAGE)} value={page} onChange={setPage} aria-label="Pages of fires" />}
    </Stack>
  );
}
