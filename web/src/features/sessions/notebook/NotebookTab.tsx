import { Badge, Box, Button, Code, Divider, Group, Paper, Stack, Text } from '@mantine/core';
import { IconDownload, IconRefresh } from '@tabler/icons-react';
import { useQuery } from '@tanstack/react-query';
import { useMemo, type CSSProperties } from 'react';
import { api, unwrap, type SessionDetail } from '../../../api/client';
import { keys } from '../../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../../components/common';
import { PageFallback } from '../../../components/PageFallback';
import { download } from '../../../lib/download';
import { AnsiText } from './AnsiText';
import { hasRunningCell, ipynbText, notebookRows, STATUS_LABEL, type Cell, type CellOutput } from './notebook';

const pre: CSSProperties = { margin: 0, whiteSpace: 'pre-wrap', wordBreak: 'break-word', maxHeight: 420, overflow: 'auto' };

function Output({ o }: { o: CellOutput }) {
  switch (o.kind) {
    case 'stream':
      return (
        <Box
          component="pre"
          ff="monospace"
          fz="sm"
          px="xs"
          py={4}
          data-testid={`cell-${o.name}`}
          style={{ ...pre, ...(o.name === 'stderr' ? { background: 'var(--mantine-color-red-light)', color: 'var(--mantine-color-red-light-color)', borderRadius: 4 } : {}) }}
        >
          <AnsiText text={o.text} />
        </Box>
      );
    case 'text':
      return (
        <Group gap="xs" align="flex-start" wrap="nowrap">
          {o.executionCount != null && (
            <Text size="xs" ff="monospace" c="red.7" mt={4} style={{ whiteSpace: 'nowrap' }}>
              Out[{o.executionCount}]:
            </Text>
          )}
          <Box component="pre" ff="monospace" fz="sm" px="xs" py={4} data-testid="cell-result" style={{ ...pre, minWidth: 0, flex: 1 }}>
            {o.text}
          </Box>
        </Group>
      );
    case 'image':
      return <img src={o.src} alt={o.alt} data-testid="cell-image" loading="lazy" style={{ maxWidth: '100%', height: 'auto', alignSelf: 'flex-start', background: 'white' }} />;
    case 'error':
      return (
        <Box component="pre" ff="monospace" fz="xs" p="xs" data-testid="cell-error" aria-label={`${o.ename}: ${o.evalue}`} style={{ ...pre, background: 'var(--mantine-color-red-light)', borderRadius: 4 }}>
          <AnsiText text={o.traceback} />
        </Box>
      );
  }
}

function CellView({ cell }: { cell: Cell }) {
  const status = STATUS_LABEL[cell.status];
  return (
    <Paper withBorder p="xs" radius="sm" data-testid="notebook-cell" data-status={cell.status} style={{ minWidth: 0 }}>
      <Group justify="space-between" mb={4} wrap="nowrap">
        <Text size="xs" ff="monospace" c="blue.7">
          In [{cell.executionCount ?? ' '}]:
        </Text>
        <Badge size="sm" variant={cell.status === 'ok' ? 'light' : 'filled'} color={status.color} data-testid="cell-status">
          {status.label}
        </Badge>
      </Group>
      <Code block data-testid="cell-source" style={{ whiteSpace: 'pre', overflowX: 'auto' }}>
        {cell.source || ' '}
      </Code>
      {cell.outputs.length > 0 && (
        <Stack gap={6} mt={6}>
          {cell.outputs.map((o, i) => (
            <Output key={i} o={o} />
          ))}
        </Stack>
      )}
    </Paper>
  );
}

/**
 * The session's notebook, read-only: every cell the python tool ran, its outputs, how it
 * ended, and where the kernel restarted. Refetched when a python call starts or ends (the
 * page invalidates keys.sessions.notebook(id)), and every 2 s while a cell runs.
 */
export default function NotebookTab({ session }: { session: SessionDetail }) {
  const nb = useQuery({
    queryKey: keys.sessions.notebook(session.id),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/notebook', { params: { path: { session_id: session.id } } })),
    refetchInterval: (q) => (hasRunningCell(q.state.data) ? 2000 : false),
  });
  const rows = useMemo(() => notebookRows(nb.data), [nb.data]);
  if (nb.isPending) return <PageFallback />;
  if (nb.error) return <ErrorAlert error={nb.error} title="The notebook could not be read" />;
  const cells = rows.filter((r) => r.kind === 'cell').length;
  const restarts = rows.length - cells;
  return (
    <Stack gap="sm" data-testid="notebook">
      <Group justify="space-between" wrap="wrap">
        <Text size="sm" c="dimmed" data-testid="notebook-summary">
          {cells} cell{cells === 1 ? '' : 's'} the python tool ran, oldest first{restarts ? ` · the kernel restarted ${restarts} time${restarts === 1 ? '' : 's'}` : ''}. Read-only.
        </Text>
        <Group gap="xs">
          <Button size="xs" variant="subtle" leftSection={<IconRefresh size={14} />} onClick={() => nb.refetch()} loading={nb.isFetching}>
            Refresh
          </Button>
          <Button size="xs" variant="default" leftSection={<IconDownload size={14} />} disabled={!cells} onClick={() => download(`${session.id}.ipynb`, ipynbText(nb.data), 'application/x-ipynb+json')}>
            Download .ipynb
          </Button>
        </Group>
      </Group>
      {cells === 0 ? (
        <EmptyState title="No Python cells yet: an agent with the python capability writes them">
          Each call of the agent’s python tool runs a cell in the session’s IPython kernel; its code and outputs show here.
        </EmptyState>
      ) : (
        rows.map((r) =>
          r.kind === 'restart' ? (
            <Divider key={r.key} color="orange" labelPosition="center" data-testid="kernel-restart" label={<Text size="xs" c="orange.7" fw={600}>kernel restarted — earlier state was lost</Text>} />
          ) : (
            <CellView key={r.key} cell={r.cell} />
          ),
        )
      )}
    </Stack>
  );
}
