import { BarChart } from '@mantine/charts';
import '@mantine/charts/styles.css';
import { Badge, Card, CloseButton, Group, SegmentedControl, SimpleGrid, Table, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useSearchParams } from 'react-router-dom';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { CostCard, CostText, StatCard } from '../../components/Stat';
import { useOptionalAppContext } from '../../context';
import { formatUsd } from '../../lib/money';
import { formatDuration, formatNumber } from '../../lib/time';
import { fetchUsage, type GroupBy, type UsageGroup, type UsageReport } from './usageApi';
import { keys } from '../../api/queryKeys';
import { MonthlyLimitCard } from './MonthlyLimitCard';

const day = (d: Date) => d.toISOString().slice(0, 10);
const calls = (n: number) => `${formatNumber(n)} call${n === 1 ? '' : 's'}`;

/** Spend per day or per group; what has no price is said under the chart, not drawn as $0. */
function SpendChart({ groups, total }: { groups: UsageGroup[]; total: UsageReport['total'] }) {
  const unpriced = total.unpriced_requests;
  return (
    <Card withBorder data-testid="spend-chart">
      <Title order={5} mb="sm">
        Spend
      </Title>
      {total.cost_usd > 0 || unpriced === 0 ? (
        <BarChart h={280} data={groups} dataKey="key" series={[{ name: 'cost_usd', label: 'Spend', color: 'grape.6' }]} valueFormatter={formatUsd} withLegend />
      ) : (
        <Text size="sm" c="dimmed" ta="center" py="xl">
          No model call in this period has a price, so there is no spend to chart.
        </Text>
      )}
      {unpriced > 0 && (
        <Text size="xs" c="orange.8" mt="xs" data-testid="spend-chart-unpriced">
          {total.cost_usd > 0 ? `+ ${calls(unpriced)} without a price, not in these bars` : `${calls(unpriced)} unpriced`}
        </Text>
      )}
    </Card>
  );
}

export default function UsagePage() {
  const [params, setParams] = useSearchParams();
  const groupBy = (params.get('group_by') as GroupBy) || 'day';
  // Both days are included: today's usage is in the default window.
  const to = params.get('to') || day(new Date());
  const from = params.get('from') || day(new Date(Date.now() - 30 * 24 * 3600 * 1000));
  const agent = params.get('agent') || null;
  const set = (k: string, v: string | null) => {
    const n = new URLSearchParams(params);
    if (v === null) n.delete(k);
    else n.set(k, v);
    setParams(n, { replace: true });
  };
  // The project picked (none when the page is rendered alone, as in its tests).
  const projectSlug = useOptionalAppContext()?.project?.slug ?? null;
  const usage = useQuery({ queryKey: keys.usage.report({ from, to, groupBy, agent }), queryFn: () => fetchUsage({ from, to, groupBy, agent }), retry: false });
  const groups = usage.data?.groups ?? [];
  const total = usage.data?.total;

  return (
    <>
      <PageHeader title="Usage" description="Tokens, spend and model time in this project, over time, by agent and by model." />
      <Group mb="md" align="flex-end">
        <SegmentedControl value={groupBy} onChange={(v) => set('group_by', v)} data={[{ value: 'day', label: 'By day' }, { value: 'agent', label: 'By agent' }, { value: 'model', label: 'By model' }]} aria-label="Group by" />
        <TextInput type="date" label="From" value={from} onChange={(e) => set('from', e.currentTarget.value)} />
        <TextInput type="date" label="To" value={to} onChange={(e) => set('to', e.currentTarget.value)} />
        {agent && (
          <Badge size="lg" variant="light" mb={6} data-testid="usage-agent" rightSection={<CloseButton size="xs" variant="transparent" onClick={() => set('agent', null)} aria-label="Show every agent" />}>
            Agent: {agent}
          </Badge>
        )}
      </Group>
      <MonthlyLimitCard projectSlug={projectSlug} />
      <ErrorAlert error={usage.error} />
      {total && (
        <>
          <SimpleGrid cols={{ base: 2, sm: 3, lg: 5 }} mb="md">
            <CostCard label="Spend" usage={total} testId="usage-spend" />
            <StatCard label="Input tokens" value={formatNumber(total.input_tokens)} />
            <StatCard label="Output tokens" value={formatNumber(total.output_tokens)} />
            <StatCard label="Requests" value={formatNumber(total.requests)} />
            <StatCard label="Model time" value={formatDuration(total.active_seconds)} />
          </SimpleGrid>
          {groups.length === 0 ? (
            <EmptyState title="No usage in this period">{agent ? "Runs in this agent's sessions show up here." : "Runs in this project's sessions show up here."}</EmptyState>
          ) : (
            <>
              <SimpleGrid cols={{ base: 1, md: 2 }} mb="md">
                <Card withBorder>
                  <Title order={5} mb="sm">
                    Tokens
                  </Title>
                  <BarChart h={280} data={groups} dataKey="key" type="stacked" series={[{ name: 'input_tokens', label: 'Input', color: 'blue.6' }, { name: 'output_tokens', label: 'Output', color: 'teal.6' }]} withLegend />
                </Card>
                <SpendChart groups={groups} total={total} />
              </SimpleGrid>
              <Table.ScrollContainer minWidth={720}>
                <Table data-testid="usage-table">
                  <Table.Thead>
                    <Table.Tr>
                      <Table.Th>{groupBy}</Table.Th>
                      <Table.Th>Input</Table.Th>
                      <Table.Th>Output</Table.Th>
                      <Table.Th>Total</Table.Th>
                      <Table.Th>Requests</Table.Th>
                      <Table.Th>Spend</Table.Th>
                      <Table.Th>Model time</Table.Th>
                    </Table.Tr>
                  </Table.Thead>
                  <Table.Tbody>
                    {groups.map((g) => (
                      <Table.Tr key={g.key} data-testid="usage-row" data-key={g.key}>
                        <Table.Td ff="monospace">{g.key}</Table.Td>
                        <Table.Td>{formatNumber(g.input_tokens)}</Table.Td>
                        <Table.Td>{formatNumber(g.output_tokens)}</Table.Td>
                        <Table.Td>{formatNumber(g.total_tokens)}</Table.Td>
                        <Table.Td>{formatNumber(g.requests)}</Table.Td>
                        <Table.Td>
                          <CostText usage={g} testId="usage-row-spend" />
                        </Table.Td>
                        <Table.Td>{formatDuration(g.active_seconds)}</Table.Td>
                      </Table.Tr>
                    ))}
                  </Table.Tbody>
                </Table>
              </Table.ScrollContainer>
            </>
          )}
        </>
      )}
    </>
  );
}
