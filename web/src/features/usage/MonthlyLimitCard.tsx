// The usage page's word on the project's monthly spend limit (GET /api/projects/{ref}/spend):
// shown only when the project has one.
import { Anchor, Card, Group, Text } from '@mantine/core';
import { Link } from 'react-router-dom';
import { SpendMeter, useProjectSpend } from '../../components/ProjectSpend';
import { monthlyLimitOf } from '../../lib/spendLimit';

/** The project's monthly spend limit, when it has one: this calendar month's spend against it
 * (whatever window the page shows), with a way to the project's page where it is set. */
export function MonthlyLimitCard({ projectSlug }: { projectSlug: string | null }) {
  const spend = useProjectSpend(projectSlug);
  if (!spend.data || monthlyLimitOf(spend.data.limits) == null) return null;
  return (
    <Card withBorder mb="md" maw={640} data-testid="usage-monthly-limit">
      <Group justify="space-between" mb={6} wrap="nowrap">
        <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
          Monthly spend limit
        </Text>
        <Anchor component={Link} to={`/projects/${projectSlug}`} size="xs">
          Project’s limits
        </Anchor>
      </Group>
      <SpendMeter spend={spend.data} />
    </Card>
  );
}
