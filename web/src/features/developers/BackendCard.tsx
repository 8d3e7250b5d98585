import { Badge, Card, Code, Group, Loader, Stack, Table, Text, ThemeIcon, Title } from '@mantine/core';
import { IconCheck, IconMinus, IconX } from '@tabler/icons-react';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../components/common';
import { capabilityRows, type BackendInfo, type CapabilityRow, type Mark } from './backendCapabilities';

const MARKS: Record<Exclude<Mark, 'value'>, { color: string; icon: typeof IconCheck; label: string }> = {
  yes: { color: 'green', icon: IconCheck, label: 'yes' },
  no: { color: 'gray', icon: IconX, label: 'no' },
  partly: { color: 'yellow', icon: IconMinus, label: 'partly' },
};

function MarkCell({ row }: { row: CapabilityRow }) {
  if (row.mark === 'value') return <Code>{row.value}</Code>;
  const { color, icon: Icon, label } = MARKS[row.mark];
  return (
    <ThemeIcon color={color} variant="light" size="sm" radius="xl" aria-label={label} title={label}>
      <Icon size={14} />
    </ThemeIcon>
  );
}

function Backend({ backend }: { backend: BackendInfo }) {
  return (
    <Stack gap="xs" data-testid="backend" data-backend={backend.name}>
      <Group gap="xs">
        <Text fw={600} ff="monospace" data-testid="backend-name">
          {backend.name}
        </Text>
        {backend.default && (
          <Badge size="sm" variant="light">
            default
          </Badge>
        )}
      </Group>
      <Table>
        <Table.Tbody>
          {capabilityRows(backend.capabilities).map((row) => (
            <Table.Tr key={row.field} data-testid={`capability-${row.field}`} data-mark={row.mark}>
              <Table.Td w={40}>
                <MarkCell row={row} />
              </Table.Td>
              <Table.Td>
                {/* A field this UI does not know yet is shown by its name, as the server sent it. */}
                <Text size="sm" fw={500} ff={row.hint === null && row.label === row.field ? 'monospace' : undefined}>
                  {row.label}
                </Text>
                {row.hint && (
                  <Text size="xs" c="dimmed">
                    {row.hint}
                  </Text>
                )}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      <Text size="sm" data-testid="backend-runtime-classes">
        Runtime classes agents and environments may choose:{' '}
        {backend.runtime_classes?.length ? backend.runtime_classes.map((c) => <Code key={c}>{c}</Code>).reduce<React.ReactNode[]>((all, c, i) => (i ? [...all, ', ', c] : [c]), []) : 'none (an operator lists them with --kubernetes-runtime-classes)'}
      </Text>
    </Stack>
  );
}

/** The sandbox backend(s) this deployment runs sessions on, and what each can do (`GET /api/backends`). */
export function BackendCard() {
  // Configured when the server starts: the same for every project, and fixed until a restart.
  const backends = useQuery({ queryKey: keys.backends(), queryFn: () => unwrap(api.GET('/api/backends')), staleTime: Infinity });
  return (
    <Card withBorder data-testid="backend-card">
      <Title order={4} mb="xs">
        Sandbox backend
      </Title>
      <Text size="sm" c="dimmed" mb="sm">
        Where this deployment runs the sandboxes of its sessions, and what that backend can do (the server's <Code>--backend</Code>, also at{' '}
        <Code>GET /api/backends</Code>).
      </Text>
      <ErrorAlert error={backends.error} title="Could not read the sandbox backend" />
      {backends.isPending && <Loader size="sm" />}
      {backends.data?.length === 0 && <EmptyState title="The server lists no sandbox backend">Sessions need one: start the server with <Code>--backend</Code>.</EmptyState>}
      <Stack gap="lg">
        {(backends.data ?? []).map((b) => (
          <Backend key={b.name} backend={b} />
        ))}
      </Stack>
    </Card>
  );
}
