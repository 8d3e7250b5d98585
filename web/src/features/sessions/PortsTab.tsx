import { Anchor, Button, Group, NumberInput, Stack, Text } from '@mantine/core';
import { IconExternalLink } from '@tabler/icons-react';
import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type SessionDetail } from '../../api/client';
import { EmptyState, ErrorAlert } from '../../components/common';
import { openPreview } from './openPreview';

/** The session's exposed ports, each opened through a signed preview URL, and any other port on request. */
export default function PortsTab({ session }: { session: SessionDetail }) {
  const [port, setPort] = useState<number | ''>(session.exposed_ports[0] ?? '');
  const open = useMutation({
    mutationFn: (p: number) => unwrap(api.GET('/api/sessions/{session_id}/ports/{port}', { params: { path: { session_id: session.id, port: p } } })),
    onSuccess: (r) => openPreview(r.url),
  });
  return (
    <Stack maw={640}>
      <Text size="sm" c="dimmed">
        A service the agent starts inside the sandbox is reachable through a signed preview URL on the preview origin, while the session runs.
      </Text>
      {session.exposed_ports.length === 0 ? (
        <EmptyState title="No exposed ports">Add exposed ports to the agent (its Sandbox tab) to preview services of new sessions.</EmptyState>
      ) : (
        <Group>
          {session.exposed_ports.map((p) => (
            <Button key={p} variant="light" rightSection={<IconExternalLink size={14} />} onClick={() => open.mutate(p)} loading={open.isPending && open.variables === p}>
              Open port {p}
            </Button>
          ))}
        </Group>
      )}
      <Group align="flex-end">
        <NumberInput label="Another port" min={1} max={65535} value={port} onChange={(v) => setPort(typeof v === 'number' ? v : '')} w={140} />
        <Button variant="default" disabled={port === ''} onClick={() => port !== '' && open.mutate(port)}>
          Open preview
        </Button>
      </Group>
      {open.data && (
        <Text size="sm">
          Preview (if no tab opened): <Anchor href={open.data.url} target="_blank" rel="noopener noreferrer" data-testid="preview-link">{open.data.url}</Anchor>
        </Text>
      )}
      <ErrorAlert error={open.error} />
    </Stack>
  );
}
