import { Button, Group, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router-dom';
import { api, unwrap, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert } from '../../components/common';
import { formatBytes, RelTime } from '../../lib/time';

/** The session's snapshots: take one, restore one over the workspace, or fork a new session from one. */
export default function SnapshotsTab({ session }: { session: SessionDetail }) {
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [label, setLabel] = useState('');
  const list = useQuery({ queryKey: keys.sessions.snapshots(session.id), queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/snapshots', { params: { path: { session_id: session.id } } })) });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/sessions/{session_id}/snapshots', { params: { path: { session_id: session.id } }, body: { label } })),
    onSuccess: () => {
      setLabel('');
      qc.invalidateQueries({ queryKey: keys.sessions.snapshots(session.id) });
    },
  });
  const restore = useMutation({
    mutationFn: (sid: string) => unwrap(api.POST('/api/sessions/{session_id}/snapshots/{snapshot_id}/restore', { params: { path: { session_id: session.id, snapshot_id: sid } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.sessions.detail(session.id) }),
  });
  const fork = useMutation({
    mutationFn: (sid: string) =>
      unwrap(
        api.POST('/api/sessions', {
          body: { agent_id: session.agent_id, title: `${session.title || 'Session'} (fork)`, model: null, instructions: null, manifest: null, from_snapshot_id: sid, environment_id: null, prompt: null },
        }),
      ),
    onSuccess: (s) => navigate(`/sessions/${s.id}`),
  });
  return (
    <Stack>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <Group align="flex-end">
          <TextInput label="Label" placeholder="before the refactor" value={label} onChange={(e) => setLabel(e.currentTarget.value)} />
          <Button type="submit" loading={create.isPending}>
            Take snapshot
          </Button>
        </Group>
      </form>
      <Text size="xs" c="dimmed">Mounted buckets are not included.</Text>
      <ErrorAlert error={create.error ?? restore.error ?? fork.error ?? list.error} />
      {list.data && list.data.length === 0 ? (
        <EmptyState title="No snapshots yet">A snapshot saves the workspace and the container's image; restore it here or fork a new session from it.</EmptyState>
      ) : (
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Label</Table.Th>
              <Table.Th>Size</Table.Th>
              <Table.Th>Taken</Table.Th>
              <Table.Th />
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {(list.data ?? []).map((s) => (
              <Table.Tr key={s.id}>
                <Table.Td>{s.label || <Text c="dimmed" span size="sm">{s.id.slice(0, 8)}</Text>}</Table.Td>
                <Table.Td>{formatBytes(s.size_bytes)}</Table.Td>
                <Table.Td>
                  <RelTime value={s.created_at} size="sm" />
                </Table.Td>
                <Table.Td>
                  <Group gap="xs" justify="flex-end">
                    <ConfirmButton size="xs" variant="light" color="orange" message="Replace this session's workspace with the snapshot?" onConfirm={() => restore.mutate(s.id)} confirmLabel="Restore">
                      Restore
                    </ConfirmButton>
                    <Button size="xs" variant="default" onClick={() => fork.mutate(s.id)} loading={fork.isPending && fork.variables === s.id}>
                      Fork into a new session
                    </Button>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  );
}
