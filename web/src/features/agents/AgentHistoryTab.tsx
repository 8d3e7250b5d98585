// The agent's history: every accepted create or edit is a version on record (who made it, when,
// which fields it changed, or which older version it restored). Any two versions' definitions
// compared (CodeMirror's merge view, loaded lazily), and an old version restored under the
// agent's version lock: it becomes a new version, and sessions pinned to others run on as they
// were.
import { Alert, Anchor, Badge, Button, Card, Code, Group, Pagination, SegmentedControl, Select, Stack, Table, Text, Title } from '@mantine/core';
import { useMediaQuery } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { IconAlertCircle } from '@tabler/icons-react';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { api, ApiError, unwrap, unwrapPage, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, ErrorAlert } from '../../components/common';
import { LazyDiffView } from '../../components/LazyDiffView';
import { changedByParts, defaultComparison, definitionText, differingFields, HISTORY_PAGE, pageOfVersion, type AgentVersionSummary } from '../../lib/agentVersions';
import { RelTime } from '../../lib/time';

type Comparison = { from: number; to: number };
type Subject = 'definition' | 'instructions';

export function AgentHistoryTab({ agent, focus, onRestored, onStale }: { agent: Agent; focus: number | null; onRestored: (a: Agent) => void; onStale: () => void }) {
  const qc = useQueryClient();
  const slug = agent.slug;
  const current = agent.version;
  const [page, setPage] = useState(() => (focus != null ? pageOfVersion(focus, current) : 1));
  const [compare, setCompare] = useState<Comparison | null>(() => defaultComparison(current, focus));
  const compareCard = useRef<HTMLDivElement>(null);
  // A first edit (or a restore elsewhere) gives a lone version something to be compared with.
  useEffect(() => {
    if (compare === null) setCompare(defaultComparison(current));
  }, [current, compare]);

  const query = { limit: HISTORY_PAGE, offset: (page - 1) * HISTORY_PAGE };
  const versions = useQuery({
    queryKey: keys.agents.versionsPage(slug, query),
    queryFn: () => unwrapPage(api.GET('/api/agents/{ref}/versions', { params: { path: { ref: slug }, query } })),
    placeholderData: keepPreviousData,
  });

  const restore = useMutation({
    mutationFn: (version: number) => unwrap(api.POST('/api/agents/{ref}/versions/{version}/restore', { params: { path: { ref: slug, version } }, body: { version: current } })),
    onSuccess: (a, version) => {
      onRestored(a);
      qc.invalidateQueries({ queryKey: keys.agents.versions(slug) });
      setPage(1);
      // What the restore changed: the version it replaced against the new one.
      setCompare({ from: current, to: a.version });
      notifications.show({ color: 'teal', message: `Restored v${version} as v${a.version}` });
    },
    onError: (e) => {
      // Someone edited it meanwhile: show the agent and its history as they are now.
      if (e instanceof ApiError && e.status === 409) {
        onStale();
        qc.invalidateQueries({ queryKey: keys.agents.versions(slug) });
      }
    },
  });

  const show = (c: Comparison) => {
    setCompare(c);
    compareCard.current?.scrollIntoView?.({ behavior: 'smooth', block: 'start' });
  };

  const total = versions.data?.total ?? current;
  return (
    <Stack>
      <RestoreError error={restore.error} version={restore.variables} />
      <Card withBorder>
        <Group justify="space-between" mb="xs" wrap="wrap">
          <Title order={4}>Versions</Title>
          <Text size="sm" c="dimmed">
            Every accepted edit is a version. A session runs the version it was started on, unless it follows the latest.
          </Text>
        </Group>
        <ErrorAlert error={versions.error} />
        <Table.ScrollContainer minWidth={760}>
          <Table data-testid="agent-versions" verticalSpacing="xs">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Version</Table.Th>
                <Table.Th>When</Table.Th>
                <Table.Th>By</Table.Th>
                <Table.Th>Changed</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(versions.data?.items ?? []).map((v) => (
                <VersionRow
                  key={v.version}
                  v={v}
                  current={current}
                  focused={v.version === focus}
                  compared={compare != null && (v.version === compare.from || v.version === compare.to)}
                  onCompare={show}
                  onRestore={() => restore.mutate(v.version)}
                  restoring={restore.isPending && restore.variables === v.version}
                />
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
        {total > HISTORY_PAGE && <Pagination mt="md" total={Math.ceil(total / HISTORY_PAGE)} value={page} onChange={setPage} aria-label="Pages of versions" />}
      </Card>
      <div ref={compareCard} style={{ scrollMarginTop: 72 }}>
        {compare ? (
          <CompareCard slug={slug} current={current} compare={compare} onChange={setCompare} />
        ) : (
          <Card withBorder>
            <Title order={4} mb="xs">
              Compare
            </Title>
            <Text size="sm" c="dimmed">
              Only one version so far: each edit adds one, and any two can be compared here.
            </Text>
          </Card>
        )}
      </div>
    </Stack>
  );
}

function VersionRow({
  v,
  current,
  focused,
  compared,
  onCompare,
  onRestore,
  restoring,
}: {
  v: AgentVersionSummary;
  current: number;
  focused: boolean;
  compared: boolean;
  onCompare: (c: Comparison) => void;
  onRestore: () => void;
  restoring: boolean;
}) {
  const by = changedByParts(v.changed_by);
  const isCurrent = v.version === current;
  return (
    <Table.Tr data-testid="agent-version" data-version={v.version} data-focused={focused || undefined} bg={focused ? 'var(--mantine-color-yellow-light)' : compared ? 'var(--mantine-color-blue-light)' : undefined}>
      <Table.Td>
        <Group gap={6} wrap="nowrap">
          <Text fw={600} size="sm" data-testid="version-number">
            v{v.version}
          </Text>
          {isCurrent && (
            <Badge size="sm" color="teal" variant="light" data-testid="version-current" miw="max-content">
              current
            </Badge>
          )}
        </Group>
      </Table.Td>
      <Table.Td>
        <RelTime value={v.created_at} size="sm" />
      </Table.Td>
      <Table.Td data-testid="version-by">
        <Group gap={6}>
          <Badge size="sm" variant="outline" color="gray" miw="max-content">
            {by.kind}
          </Badge>
          {by.name && (
            <Text size="sm" style={{ wordBreak: 'break-all' }}>
              {by.name}
            </Text>
          )}
        </Group>
      </Table.Td>
      <Table.Td data-testid="version-changes">
        <Group gap={4}>
          {v.restored_from != null && (
            <Badge size="sm" color="grape" variant="light" data-testid="version-restored-from" miw="max-content">
              restored from v{v.restored_from}
            </Badge>
          )}
          {v.version === 1 ? (
            <Text size="sm" c="dimmed">
              created
            </Text>
          ) : v.changed.length ? (
            v.changed.map((f) => (
              <Code key={f} data-testid="version-changed-field">
                {f}
              </Code>
            ))
          ) : (
            <Text size="sm" c="dimmed">
              no changes
            </Text>
          )}
        </Group>
      </Table.Td>
      <Table.Td>
        <Group gap={4} justify="flex-end" wrap="nowrap">
          {v.version > 1 && (
            <Button size="compact-xs" variant="subtle" onClick={() => onCompare({ from: v.version - 1, to: v.version })}>
              What changed
            </Button>
          )}
          {!isCurrent && (
            <Button size="compact-xs" variant="subtle" onClick={() => onCompare({ from: v.version, to: current })}>
              Compare with current
            </Button>
          )}
          {!isCurrent && (
            <ConfirmButton
              size="compact-xs"
              variant="light"
              color="orange"
              loading={restoring}
              message={`Make v${v.version}'s definition the agent's again? It becomes v${current + 1}; sessions pinned to other versions run on as they were.`}
              confirmLabel={`Restore v${v.version}`}
              onConfirm={onRestore}
            >
              Restore
            </ConfirmButton>
          )}
        </Group>
      </Table.Td>
    </Table.Tr>
  );
}

/** A refused restore, in words: a stale lock (409), or an old definition not valid now (422). */
function RestoreError({ error, version }: { error: unknown; version: number | undefined }) {
  if (!error) return null;
  const v = version != null ? `v${version}` : 'that version';
  if (error instanceof ApiError && error.status === 409) {
    return (
      <Alert color="orange" icon={<IconAlertCircle size={18} />} title="Not restored: the agent changed meanwhile" role="alert" data-testid="restore-error">
        <Text size="sm">{error.detail}</Text>
        <Text size="sm" mt={4}>
          Someone saved a newer version since this page read it, so nothing changed. The list below is now up to date: look again, and restore {v} if you still want it.
        </Text>
      </Alert>
    );
  }
  if (error instanceof ApiError && error.status === 422) {
    return (
      <Alert color="red" icon={<IconAlertCircle size={18} />} title={`Not restored: ${v} is not valid now`} role="alert" data-testid="restore-error">
        <Text size="sm">{error.detail}</Text>
        <Text size="sm" mt={4}>
          Something it names (a subagent, a deploy key, an environment) is gone or has changed since. Edit the agent instead, starting from what {v} had.
        </Text>
      </Alert>
    );
  }
  return (
    <div data-testid="restore-error">
      <ErrorAlert error={error} title="Not restored" />
    </div>
  );
}

function CompareCard({ slug, current, compare, onChange }: { slug: string; current: number; compare: Comparison; onChange: (c: Comparison) => void }) {
  const narrow = useMediaQuery('(max-width: 48em)');
  const [layout, setLayout] = useState<'split' | 'unified' | null>(null);
  const mode = layout ?? (narrow ? 'unified' : 'split');
  const [subject, setSubject] = useState<Subject>('definition');
  const read = (version: number) => ({
    queryKey: keys.agents.version(slug, version),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}/versions/{version}', { params: { path: { ref: slug, version } } })),
    // A version never changes.
    staleTime: Infinity,
  });
  const from = useQuery(read(compare.from));
  const to = useQuery(read(compare.to));
  const options = Array.from({ length: current }, (_, i) => current - i).map((n) => ({ value: String(n), label: n === current ? `v${n} (current)` : `v${n}` }));
  const pick = (side: keyof Comparison) => (value: string | null) => value && onChange({ ...compare, [side]: Number(value) });
  const a = from.data?.agent;
  const b = to.data?.agent;
  const differing = a && b ? differingFields(a, b) : null;
  const text = (x: Agent) => (subject === 'instructions' ? x.instructions : definitionText(x));

  return (
    <Card withBorder data-testid="version-compare">
      <Group justify="space-between" align="flex-end" mb="xs" wrap="wrap">
        <Title order={4}>Compare</Title>
        <Group gap="xs" align="flex-end" wrap="wrap">
          <Select label="From" w={130} data={options} value={String(compare.from)} onChange={pick('from')} allowDeselect={false} searchable limit={100} data-testid="compare-from" />
          <Select label="To" w={130} data={options} value={String(compare.to)} onChange={pick('to')} allowDeselect={false} searchable limit={100} data-testid="compare-to" />
          <SegmentedControl aria-label="What to compare" value={subject} onChange={(x) => setSubject(x as Subject)} data={[{ value: 'definition', label: 'Definition' }, { value: 'instructions', label: 'Instructions' }]} />
          <SegmentedControl aria-label="Layout" value={mode} onChange={(x) => setLayout(x as 'split' | 'unified')} data={[{ value: 'split', label: 'Side by side' }, { value: 'unified', label: 'Unified' }]} />
        </Group>
      </Group>
      <ErrorAlert error={from.error ?? to.error} />
      {differing && (
        <Text size="sm" mb="xs" data-testid="compare-summary">
          v{compare.from} → v{compare.to}:{' '}
          {compare.from === compare.to ? 'the same version' : differing.length ? `differ in ${differing.join(', ')}` : 'the same definition'}
          {subject === 'definition' && (
            <Text span size="xs" c="dimmed">
              {' '}
              (the definition as JSON, without its id, version and times)
            </Text>
          )}
        </Text>
      )}
      {a && b ? (
        <>
          {mode === 'split' && (
            <Group grow gap={0} mb={4}>
              <Text size="xs" c="dimmed" fw={600}>
                v{compare.from}
              </Text>
              <Text size="xs" c="dimmed" fw={600}>
                v{compare.to}
                {compare.to === current ? ' (current)' : ''}
              </Text>
            </Group>
          )}
          <div data-testid="version-diff">
            <LazyDiffView a={text(a)} b={text(b)} aLabel={`v${compare.from}`} bLabel={`v${compare.to}`} language={subject === 'instructions' ? 'markdown' : 'json'} mode={mode} />
          </div>
        </>
      ) : (
        !(from.error ?? to.error) && (
          <Text size="sm" c="dimmed">
            Reading the versions…
          </Text>
        )
      )}
      {a && b && subject === 'definition' && a.instructions !== b.instructions && (
        <Text size="xs" c="dimmed" mt={4}>
          The instructions are one line of JSON here:{' '}
          <Anchor component="button" size="xs" onClick={() => setSubject('instructions')}>
            compare them as text
          </Anchor>
          .
        </Text>
      )}
    </Card>
  );
}
