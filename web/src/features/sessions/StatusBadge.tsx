import { Badge, Group } from '@mantine/core';
import type { Session } from '../../api/client';

export function statusColor(status: string): string {
  return { provisioning: 'yellow', running: 'teal', stopped: 'gray', error: 'red' }[status] ?? 'gray';
}

export function StatusBadge({ session }: { session: Pick<Session, 'status' | 'activity' | 'stopped_reason'> }) {
  const asleep = session.status === 'stopped' && session.stopped_reason === 'idle';
  // Past its max lifetime: stopped for good.
  const ended = session.status === 'stopped' && session.stopped_reason === 'lifetime';
  return (
    <Group gap={4} wrap="nowrap">
      <Badge color={statusColor(session.status)} variant="light" data-testid="session-status" data-reason={session.stopped_reason ?? undefined}>
        {asleep ? 'asleep' : ended ? 'ended' : session.status}
      </Badge>
      {session.activity === 'busy' && (
        <Badge color="blue" variant="dot">
          busy
        </Badge>
      )}
    </Group>
  );
}
