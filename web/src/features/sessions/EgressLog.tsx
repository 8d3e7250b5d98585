import { Badge, Code, Table, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../components/common';
import { formatBytes, formatNumber, RelTime } from '../../lib/time';

/** How often a running session's log is read again: the server sums it every 5 s. */
const REFRESH_MS = 5000;

/**
 * A session's egress log: each host and port its sandbox reached (or was refused) through the
 * egress proxy, the most recently used first; or why there is none.
 */
export function EgressLog({ session }: { session: SessionDetail }) {
  const log = useQuery({
    queryKey: keys.sessions.egress(session.id),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/egress', { params: { path: { session_id: session.id } } })),
    refetchInterval: session.status === 'running' ? REFRESH_MS : false,
  });
  if (log.error) return <ErrorAlert error={log.error} title="The egress log could not be read" />;
  if (!log.data) return <Text size="sm" c="dimmed">Loading the egress log…</Text>;
  if (!log.data.enabled) {
    return (
      <EmptyState title="Egress control is off on this server">
        This server runs no egress proxy, so the sandbox has the backend’s own network and its connections are neither checked against the policies above nor recorded. An operator turns it on with --egress-proxy.
      </EmptyState>
    );
  }
  if (log.data.data.length === 0) {
    return (
      <EmptyState title="No egress recorded yet">
        The hosts this session’s sandbox connects to will be listed here, with connections and bytes, and the connections refused; each refusal is also in the transcript with the rule that refused it. Counts arrive within 5 seconds.
      </EmptyState>
    );
  }
  // Six columns do not fit a phone: the table scrolls sideways there instead of being cut.
  return (
    <Table.ScrollContainer minWidth={560}>
    <Table fz="sm" verticalSpacing={4} data-testid="egress-rows">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Host</Table.Th>
          <Table.Th ta="right">Connections</Table.Th>
          <Table.Th ta="right">Sent</Table.Th>
          <Table.Th ta="right">Received</Table.Th>
          <Table.Th ta="right">Refused</Table.Th>
          <Table.Th>Last seen</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {log.data.data.map((e) => (
          <Table.Tr key={`${e.host}:${e.port}`} data-testid="egress-row">
            <Table.Td>
              <Code>
                {e.host}:{e.port}
              </Code>
            </Table.Td>
            <Table.Td ta="right">{formatNumber(e.connections)}</Table.Td>
            <Table.Td ta="right">{formatBytes(e.bytes_sent)}</Table.Td>
            <Table.Td ta="right">{formatBytes(e.bytes_received)}</Table.Td>
            <Table.Td ta="right">
              {e.denied > 0 ? (
                <Badge size="sm" variant="light" color="red">
                  {formatNumber(e.denied)}
                </Badge>
              ) : (
                <Text span size="sm" c="dimmed">
                  0
                </Text>
              )}
            </Table.Td>
            <Table.Td>
              <RelTime value={e.last_at} size="sm" />
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
    </Table.ScrollContainer>
  );
}
