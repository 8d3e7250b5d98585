import { Alert, Button, Card, Group, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { IconCoin } from '@tabler/icons-react';
import { useState } from 'react';
import type { SessionDetail } from '../../api/client';
import { CostCard, CostText, StatCard } from '../../components/Stat';
import { formatDuration, formatNumber, RelTime } from '../../lib/time';
import { budgetUseOf, limitRows } from './budget';
import { BudgetMeters, BudgetModal } from './SessionBudget';

type Tokens = { input_tokens?: number; output_tokens?: number; total_tokens?: number; requests?: number; active_seconds?: number; cost_usd?: number; unpriced_requests?: number };

/** One table of the session's usage, by model or by agent (a name and its tokens, requests and cost). */
function Breakdown({ title, data, testId }: { title: string; data: Record<string, Tokens> | undefined; testId: string }) {
  const rows = Object.entries(data ?? {});
  return (
    <Card withBorder data-testid={testId}>
      <Title order={5} mb="xs">
        {title}
      </Title>
      {rows.length === 0 ? (
        <Text size="sm" c="dimmed">
          Nothing yet.
        </Text>
      ) : (
        <Table.ScrollContainer minWidth={420}>
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Input</Table.Th>
                <Table.Th>Output</Table.Th>
                <Table.Th>Requests</Table.Th>
                <Table.Th>Cost</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map(([k, v]) => (
                <Table.Tr key={k} data-key={k}>
                  <Table.Td ff="monospace">{k}</Table.Td>
                  <Table.Td>{formatNumber(v.input_tokens)}</Table.Td>
                  <Table.Td>{formatNumber(v.output_tokens)}</Table.Td>
                  <Table.Td>{formatNumber(v.requests)}</Table.Td>
                  <Table.Td>
                    <CostText usage={v} testId="breakdown-cost" />
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Card>
  );
}

/** The session's budget: each limit against what was used, and the way to change it. */
function BudgetCard({ session }: { session: SessionDetail }) {
  const [open, setOpen] = useState(false);
  const rows = limitRows(session.budget, budgetUseOf(session));
  return (
    <Card withBorder data-testid="usage-budget">
      <Group justify="space-between" mb="xs">
        <Title order={5}>Budget</Title>
        <Button size="xs" variant="light" leftSection={<IconCoin size={14} />} onClick={() => setOpen(true)}>
          {rows.length ? 'Change' : 'Set a budget'}
        </Button>
      </Group>
      {rows.length ? (
        <BudgetMeters rows={rows} />
      ) : (
        <Text size="sm" c="dimmed">
          No budget: its turns end when the model finishes or at their step limit. A budget stops a turn before the model call that would go past a limit of cost, tokens, model steps or sandbox time.
        </Text>
      )}
      {open && <BudgetModal session={session} onClose={() => setOpen(false)} />}
    </Card>
  );
}

/** What the session used: tokens, cost and time in all, by model and by agent, and each run's share. */
export default function UsageTab({ session }: { session: SessionDetail }) {
  if (session.status === 'error') return <Alert color="red">{session.error}</Alert>;
  const u = (session.usage ?? {}) as Tokens & { by_model?: Record<string, Tokens>; by_agent?: Record<string, Tokens> };
  return (
    <Stack>
      <SimpleGrid cols={{ base: 2, sm: 3, lg: 6 }}>
        <CostCard label="Cost" usage={u} testId="session-usage-cost" />
        <StatCard label="Input tokens" value={formatNumber(u.input_tokens)} />
        <StatCard label="Output tokens" value={formatNumber(u.output_tokens)} />
        <StatCard label="Requests" value={formatNumber(u.requests)} />
        <StatCard label="Model time" value={formatDuration(u.active_seconds)} />
        <StatCard label="Sandbox time" value={formatDuration(session.sandbox_seconds)} />
      </SimpleGrid>
      <BudgetCard session={session} />
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Breakdown title="By model" data={u.by_model} testId="usage-by-model" />
        <Breakdown title="By agent" data={u.by_agent} testId="usage-by-agent" />
      </SimpleGrid>
      <Card withBorder>
        <Title order={5} mb="xs">
          Runs
        </Title>
        {session.runs.length === 0 ? (
          <Text size="sm" c="dimmed">No runs yet.</Text>
        ) : (
          <Table.ScrollContainer minWidth={560}>
            <Table>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Prompt</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Turns</Table.Th>
                  <Table.Th>Tokens</Table.Th>
                  <Table.Th>Cost</Table.Th>
                  <Table.Th>Started</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {session.runs.map((r) => (
                  <Table.Tr key={r.id}>
                    <Table.Td>
                      <Text size="sm" lineClamp={1}>
                        {r.prompt}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      {r.status}
                      {r.stop_reason === 'budget_reached' ? ' · stopped at the budget' : r.stop_reason ? ` · ${r.stop_reason}` : ''}
                    </Table.Td>
                    <Table.Td>{r.turns}</Table.Td>
                    <Table.Td>{formatNumber((r.usage as Tokens)?.total_tokens)}</Table.Td>
                    <Table.Td>
                      <CostText usage={r.usage as Tokens} testId="run-cost" />
                    </Table.Td>
                    <Table.Td>
                      <RelTime value={r.created_at} size="sm" />
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Card>
    </Stack>
  );
}
