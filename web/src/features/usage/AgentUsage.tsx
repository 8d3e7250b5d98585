import { Anchor, Card, Group, SimpleGrid, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { keys } from '../../api/queryKeys';
import { ErrorAlert } from '../../components/common';
import { CostCard, StatCard } from '../../components/Stat';
import { formatNumber } from '../../lib/time';
import { fetchUsage } from './usageApi';

/**
 * What one agent's sessions spent over the last 30 days (the API's default window): the cost,
 * with the calls no price was found for, and the runs, requests and tokens behind it; linked to
 * the usage page filtered to the agent.
 */
export function AgentUsage({ agent }: { agent: { id: string; slug: string } }) {
  const usage = useQuery({ queryKey: keys.usage.ofAgent(agent.id), queryFn: () => fetchUsage({ agent: agent.id }) });
  const total = usage.data?.total;
  return (
    <Card withBorder data-testid="agent-usage">
      <Group justify="space-between" mb="xs">
        <Title order={4}>Usage, last 30 days</Title>
        <Anchor component={Link} to={`/usage?agent=${encodeURIComponent(agent.slug)}`} size="sm">
          Usage of this agent
        </Anchor>
      </Group>
      <ErrorAlert error={usage.error} />
      <SimpleGrid cols={{ base: 2, sm: 4 }}>
        <CostCard label="Cost" usage={total} testId="agent-cost" bare />
        <StatCard label="Runs" value={formatNumber(total?.runs)} bare />
        <StatCard label="Model requests" value={formatNumber(total?.requests)} bare />
        <StatCard label="Tokens" value={formatNumber(total?.total_tokens)} bare />
      </SimpleGrid>
    </Card>
  );
}
