import { Badge, Group, Tooltip } from '@mantine/core';
import type { Session, SessionDetail } from '../../api/client';
import { atBudget } from './budget';

export function statusColor(status: string): string {
  return { provisioning: 'yellow', running: 'teal', stopped: 'gray', error: 'red' }[status] ?? 'gray';
}

type BadgeSession = Pick<Session, 'status' | 'activity' | 'stopped_reason'> &
  Partial<Pick<Session, 'budget' | 'usage'>> &
  Partial<Pick<SessionDetail, 'runs' | 'sandbox_seconds'>>;

export function StatusBadge({ session }: { session: BadgeSession }) {
  const asleep = session.status === 'stopped' && session.stopped_reason === 'idle';
  // Past its max lifetime: stopped for good.
  const ended = session.status === 'stopped' && session.stopped_reason === 'lifetime';
  // At its budget: its last turn stopped there (a detail knows its runs), or a cost or token
  // limit is reached (all a list row can tell). Not while a turn is in flight.
  const budget = session.activity !== 'busy' && !!session.usage && atBudget({ budget: session.budget, usage: session.usage, runs: session.runs, sandbox_seconds: session.sandbox_seconds });
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
      {budget && (
        <Tooltip
          label={session.runs ? 'Its last turn stopped at a limit of its budget (or a limit is reached): raise the budget to go on.' : 'A limit of its budget is reached: a message stops before any model call until the budget is raised.'}
          multiline
          w={280}
        >
          <Badge color="orange" variant="light" data-testid="session-budget-reached">
            budget reached
          </Badge>
        </Tooltip>
      )}
    </Group>
  );
}
