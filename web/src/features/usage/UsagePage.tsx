import { BarChart } from '@mantine/charts';
import '@mantine/charts/styles.css';
import { Card, Group, SegmentedControl, SimpleGrid, Table, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useSearchParams } from 'react-router-dom';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { formatDuration, formatNumber } from '../../lib/time';
import { fetchUsage, type GroupBy } from './usageApi';
import { keys } from '../../api/queryKeys';

const day = (d: Date) => d.toISOString().slice(0, 10);

export default function UsagePage() {
  const [params, setParams] = useSearchParams();
  const groupBy = (params.get('group_by') as GroupBy) || 'day';
  // Both days are included: today's usage is in the default window.
  const to = params.get('to') || day(new Date());
  const from = params.get('from') || day(new Date(Date.now() - 30 * 24 * 3600 * 1000));
  const set = (k: string, v: string) => {
    const n = new URLSearchParams(params);
    n.set(k, v);
    setParams(n, { replace: true });
  };
  const usage = useQuery({ queryKey: keys.usage({ from, to, groupBy }), queryFn: () => fetchUsage({ from, to, groupBy }), retry: false });
  const groups = usage.data?.groups ?? [];
  const total = usage.data?.total;

  return (
    <>
      <PageHeader title="Usage" description="Tokens and model time in this project, over time, by agent and by model." />
      <Group mb="md" align="flex-end">
        <SegmentedControl value={groupBy} onChange={(v) => set('group_by', v)} data={[{ value: 'day', label: 'By day' }, { value: 'agent', label: 'By agent' }, { value: 'model', label: 'By model' }]} aria-label="Group by" />
        <TextInput type="date" label="From" value={from} onChange={(e) => set('from', e.currentTarget.value)} />
        <TextInput type="date" label="To" value={to} onChange={(e) => set('to', e.currentTarget.value)} />
      </Group>
      <ErrorAlert error={usage.error} />
      {total && (
        <>
          <SimpleGrid cols={{ base: 2, sm: 4 }} mb="md">
            {[
              ['Input tokens', formatNumber(total.input_tokens)],
              ['Output tokens', formatNumber(total.output_tokens)],
              ['Requests', formatNumber(total.requests)],
              ['Model time', formatDuration(total.active_seconds)],
            ].map(([k, v]) => (
              <Card withBorder key={k}>
                <Text size="xs" c="dimmed" tt="uppercase" fw={600}>{k}</Text>
                <Text fw={700} size="lg">{v}</Text>
              </Card>
            ))}
          </SimpleGrid>
          {groups.length === 0 ? (
            <EmptyState title="No usage in this period">Runs in this project's sessions show up here.</EmptyState>
          ) : (
            <>
              <Card withBorder mb="md">
                <Title order={5} mb="sm">Tokens</Title>
                <BarChart h={280} data={groups} dataKey="key" type="stacked" series={[{ name: 'input_tokens', label: 'Input', color: 'blue.6' }, { name: 'output_tokens', label: 'Output', color: 'teal.6' }]} withLegend />
              </Card>
              <Table>
                <Table.Thead><Table.Tr><Table.Th>{groupBy}</Table.Th><Table.Th>Input</Table.Th><Table.Th>Output</Table.Th><Table.Th>Total</Table.Th><Table.Th>Requests</Table.Th><Table.Th>Model time</Table.Th></Table.Tr></Table.Thead>
                <Table.Tbody>
                  {groups.map((g) => (
                    <Table.Tr key={g.key}><Table.Td ff="monospace">{g.key}</Table.Td><Table.Td>{formatNumber(g.input_tokens)}</Table.Td><Table.Td>{formatNumber(g.output_tokens)}</Table.Td><Table.Td>{formatNumber(g.total_tokens)}</Table.Td><Table.Td>{formatNumber(g.requests)}</Table.Td><Table.Td>{formatDuration(g.active_seconds)}</Table.Td></Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </>
          )}
        </>
      )}
    </>
  );
}
