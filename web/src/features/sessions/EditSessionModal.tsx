import { Button, Group, Input, Modal, Select, Stack, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, fieldErrors, unwrap, unwrapPage, type Schemas, type SessionDetail } from '../../api/client';
import { sessionVersionChoices, versionChoiceBody, type VersionPin } from '../../lib/agentVersions';
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
  // The version of its agent it runs: moved from its next turn.
  const pin = String(session.agent_version);
  const [agentVersion, setAgentVersion] = useState(pin);
  const slug = session.agent?.slug ?? session.agent_id;
  const versionsPage = { limit: 100, offset: 0 };
  const versions = useQuery({
    queryKey: keys.agents.versionsPage(slug, versionsPage),
    queryFn: () => unwrapPage(api.GET('/api/agents/{ref}/versions', { params: { path: { ref: slug }, query: versionsPage } })),
    enabled: opened,
    retry: false,
  });
  const save = useMutation({
    mutationFn: (body: { title: string; metadata: Record<string, unknown>; agent_version?: VersionPin }) =>
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
          const moved = agentVersion !== pin ? versionChoiceBody(agentVersion) : undefined;
          save.mutate({ title, metadata: metadataPatch((session.metadata ?? {}) as Record<string, unknown>, parsed as Record<string, unknown>), ...(moved !== undefined ? { agent_version: moved } : {}) });
        }}
      >
        <Stack>
          <TextInput label="Title" value={title} onChange={(e) => setTitle(e.currentTarget.value)} data-autofocus />
          <Select
            label="Agent version"
            description={
              agentVersion === pin
                ? agentVersion === 'latest'
                  ? 'It follows the agent: every turn runs it as it is then.'
                  : `Pinned to v${pin}: edits of the agent do not change what it runs.`
                : 'From its next turn, with its subagents as they are now; its sandbox boots it at its next start. What was copied when it started (network policy, budget) stays.'
            }
            data={sessionVersionChoices(session.agent_version, versions.data?.items ?? [])}
            value={agentVersion}
            onChange={(x) => setAgentVersion(x ?? pin)}
            allowDeselect={false}
            error={fieldErrors(save.error).agent_version}
          />
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
