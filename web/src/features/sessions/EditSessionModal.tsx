import { Button, Group, Input, Modal, Stack, TextInput } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type Schemas, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ErrorAlert } from '../../components/common';
import { LazyCodeEditor } from '../../components/LazyCodeEditor';

/** The merge patch that turns `before` into `after`: changed keys set, removed keys null. */
export function metadataPatch(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(after)) if (JSON.stringify(before[k]) !== JSON.stringify(v)) patch[k] = v;
  for (const k of Object.keys(before)) if (!(k in after)) patch[k] = null;
  return patch;
}

export function EditSessionModal({ session, opened, onClose }: { session: SessionDetail; opened: boolean; onClose: () => void }) {
  const qc = useQueryClient();
  const [title, setTitle] = useState(session.title);
  const [metadata, setMetadata] = useState(JSON.stringify(session.metadata ?? {}, null, 2));
  const [error, setError] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (body: { title: string; metadata: Record<string, unknown> }) =>
      unwrap(api.PATCH('/api/sessions/{session_id}', { params: { path: { session_id: session.id } }, body: body as Schemas['SessionPatch'] })),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.sessions.detail(session.id) });
      qc.invalidateQueries({ queryKey: keys.sessions.all() });
      onClose();
    },
  });
  return (
    <Modal opened={opened} onClose={onClose} title="Session details" size="lg">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          let parsed: unknown;
          try {
            parsed = JSON.parse(metadata || '{}');
          } catch (err) {
            setError(`Metadata is not valid JSON: ${(err as Error).message}`);
            return;
          }
          if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
            setError('Metadata is a JSON object.');
            return;
          }
          setError(null);
          save.mutate({ title, metadata: metadataPatch((session.metadata ?? {}) as Record<string, unknown>, parsed as Record<string, unknown>) });
        }}
      >
        <Stack>
          <TextInput label="Title" value={title} onChange={(e) => setTitle(e.currentTarget.value)} data-autofocus />
          <Input.Wrapper label="Metadata" description="Any JSON values; keys you remove are deleted." error={error}>
            <LazyCodeEditor language="json" value={metadata} onChange={setMetadata} minHeight={120} ariaLabel="Metadata" />
          </Input.Wrapper>
          <ErrorAlert error={save.error} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>Cancel</Button>
            <Button type="submit" loading={save.isPending}>Save</Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}
