// Figures as the usage pages show them: a card with a label and a value, and what model calls
// cost, with the calls no price was found for said beside the amount (never a silent $0.00).
import { Card, Text, Tooltip } from '@mantine/core';
import type { ReactNode } from 'react';
import { describeCost, type Costed } from '../lib/money';

/** Why some calls have no price, for the tooltip on the note that counts them. */
export const UNPRICED_HELP =
  'Calls no price was found for: the provider reported no cost and the model catalogue has no per-token price for the model (or they were made before this server priced calls). They are not in the amount.';

type StatProps = { label: string; value: ReactNode; note?: ReactNode; noteHelp?: string; testId?: string; bare?: boolean };

/**
 * One figure in a card: its label above, the value, and a note beneath when there is one.
 * `bare` leaves the card's border out, for figures inside a card of their own.
 */
export function StatCard({ label, value, note, noteHelp, testId, bare }: StatProps) {
  return (
    <Card withBorder={!bare} p={bare ? 0 : undefined} data-testid={testId}>
      <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
        {label}
      </Text>
      <Text fw={700} size="lg" data-testid={testId && `${testId}-value`}>
        {value}
      </Text>
      {note && <Note help={noteHelp} testId={testId && `${testId}-note`}>{note}</Note>}
    </Card>
  );
}

function Note({ children, help, testId }: { children: ReactNode; help?: string; testId?: string }) {
  const text = (
    <Text size="xs" c="orange.8" data-testid={testId} tabIndex={help ? 0 : undefined} style={{ whiteSpace: 'nowrap' }}>
      {children}
    </Text>
  );
  return help ? (
    <Tooltip label={help} multiline w={300} openDelay={300}>
      {text}
    </Tooltip>
  ) : (
    text
  );
}

/** What `usage` cost, in a card. */
export function CostCard({ usage, ...props }: Omit<StatProps, 'value' | 'note' | 'noteHelp'> & { usage: Costed | null | undefined }) {
  const c = describeCost(usage);
  return <StatCard {...props} value={c.text} note={c.note} noteHelp={UNPRICED_HELP} />;
}

/** What `usage` cost, in a table cell's words: the amount, and the unpriced calls beneath. */
export function CostText({ usage, testId }: { usage: Costed | null | undefined; testId?: string }) {
  const c = describeCost(usage);
  return (
    <div data-testid={testId}>
      <Text size="sm" c={c.text === 'Unpriced' ? 'dimmed' : undefined} style={{ whiteSpace: 'nowrap' }}>
        {c.text}
      </Text>
      {c.note && <Note help={UNPRICED_HELP}>{c.note}</Note>}
    </div>
  );
}
