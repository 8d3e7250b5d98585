// A project's spend this calendar month against its monthly limit (GET /api/projects/{ref}/spend,
// which also says what it runs now, for the project page's Capacity card), shared by the
// project's page and the usage page: the query, and a bar with the figures in words
// ("$0.80 of $1.00 this month (2026-12)"), the calls without a price (not counted) and when
// the 80 % warning went out.
import { Group, Progress, Stack, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client';
import { keys } from '../api/queryKeys';
import { monthlyLimitOf, monthlySpendText, percentText, spendColor, spentPercent, unpricedSpendNote, type ProjectSpend } from '../lib/spendLimit';
import { RelTime } from '../lib/time';

/**
 * The project's spend this month and what it runs now; nothing is asked without a project.
 * With `refreshMs`, asked again that often while the page is visible (not in a hidden tab).
 */
export function useProjectSpend(ref: string | null | undefined, { refreshMs }: { refreshMs?: number } = {}) {
  return useQuery({
    queryKey: keys.projects.spend(ref ?? ''),
    queryFn: () => unwrap(api.GET('/api/projects/{ref}/spend', { params: { path: { ref: ref! } } })),
    enabled: !!ref,
    refetchInterval: refreshMs ?? false,
    refetchIntervalInBackground: false,
  });
}

/** The month's spend against the limit: a bar (none without a limit), the figures, the notes. */
export function SpendMeter({ spend, size = 'sm' }: { spend: ProjectSpend; size?: 'xs' | 'sm' }) {
  const pct = spentPercent(spend);
  const reached = pct != null && pct >= 100;
  const unpriced = unpricedSpendNote(spend);
  const limit = monthlyLimitOf(spend.limits);
  return (
    <Stack gap={4} data-testid="spend-meter" data-percent={pct == null ? undefined : Math.floor(pct + 1e-9)} data-reached={reached || undefined}>
      <Group justify="space-between" gap="xs" wrap="wrap">
        <Text size={size} fw={600} data-testid="spend-meter-text">
          {monthlySpendText(spend)}
        </Text>
        {pct != null && (
          <Text size={size} fw={600} c={reached ? 'red.7' : pct >= 80 ? 'orange.8' : 'dimmed'} data-testid="spend-meter-percent" style={{ whiteSpace: 'nowrap' }}>
            {percentText(pct)}
            {reached ? ' · reached' : ''}
          </Text>
        )}
      </Group>
      {limit != null && <Progress value={Math.min(100, pct ?? 0)} color={spendColor(pct)} size="md" aria-label={`Monthly spend: ${monthlySpendText(spend)}`} />}
      {unpriced && (
        <Text size="xs" c="orange.8" data-testid="spend-meter-unpriced">
          {unpriced}
        </Text>
      )}
      {spend.warned_at && (
        <Text size="xs" c="dimmed" data-testid="spend-meter-warned">
          The 80 % warning went out <RelTime value={spend.warned_at} size="xs" />
        </Text>
      )}
    </Stack>
  );
}
