// The agent's memory store (MEMORY.md and its summary): shown, edited and saved under its
// version. Sessions of agents with the `memory` capability start with it under `memories/`,
// and what they learn is merged back when they stop, so a save can find the store moved on:
// then it says so and offers to reload (the server changed nothing).
import { Alert, Button, Card, Group, Stack, Text, Textarea, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api, ApiError, unwrap, type Agent, type Schemas } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ErrorAlert } from '../../components/common';
import { LazyCodeEditor } from '../../components/LazyCodeEditor';
import { PageFallback } from '../../components/PageFallback';
import { RelTime } from '../../lib/time';

type AgentMemory = Schemas['AgentMemory'];

/** The store's limits, as the server enforces them (413 above). */
export const MAX_MEMORY_BYTES = 256 * 1024;
export const MAX_SUMMARY_CHARS = 16_000;

export function AgentMemoryTab({ agent }: { agent: Agent }) {
  const qc = useQueryClient();
  const slug = agent.slug;
  const stored = useQuery({
    queryKey: keys.agents.memory(slug),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}/memory', { params: { path: { ref: slug } } })),
  });
  // The draft and the version it was read at: a refetch in the background never overwrites
  // what the person is typing; only a load, a save or a reload resets it.
  const [draft, setDraft] = useState<AgentMemory | null>(null);
  const [stale, setStale] = useState(false);
  useEffect(() => {
    if (stored.data && draft === null) setDraft(stored.data);
  }, [stored.data, draft]);

  const save = useMutation({
    mutationFn: (d: AgentMemory) =>
      unwrap(api.PUT('/api/agents/{ref}/memory', { params: { path: { ref: slug } }, body: { memory: d.memory, summary: d.summary, version: d.version } })),
    onSuccess: (m) => {
      qc.setQueryData(keys.agents.memory(slug), m);
      setDraft(m);
      setStale(false);
      notifications.show({ message: `Memory saved (version ${m.version})` });
    },
    onError: (e) => {
      if (e instanceof ApiError && e.status === 409) setStale(true);
    },
  });

  const reload = async () => {
    const fresh = await stored.refetch();
    if (fresh.data) setDraft(fresh.data);
    setStale(false);
    save.reset();
  };

  if (stored.isPending || (stored.data && !draft)) return <PageFallback />;
  if (stored.error) return <ErrorAlert error={stored.error} />;
  const d = draft!;
  const base = stored.data!;
  const dirty = d.memory !== base.memory || d.summary !== base.summary;
  const memoryBytes = new TextEncoder().encode(d.memory).length;
  const summaryChars = [...d.summary].length;
  const tooLarge = memoryBytes > MAX_MEMORY_BYTES || summaryChars > MAX_SUMMARY_CHARS;
  const hasCapability = (agent.capabilities ?? []).includes('memory');

  return (
    <Stack>
      {!hasCapability && (
        <Alert color="gray" data-testid="memory-capability-note">
          This agent does not have the <b>memory</b> capability: its sessions neither start with this memory nor add to it. Edit the agent and add <b>memory</b> to its capabilities to use it.
        </Alert>
      )}
      {stale && (
        <Alert color="orange" title="Someone changed this memory since you opened it" data-testid="memory-conflict">
          <Text size="sm" mb="xs">
            A session's consolidation or another person saved a newer version, so yours was not saved and nothing changed. Reload to see the current memory (your edits here are replaced: copy them first if you want to keep them).
          </Text>
          <Button size="xs" variant="light" color="orange" onClick={reload}>
            Reload the current memory
          </Button>
        </Alert>
      )}
      {!stale && <ErrorAlert error={save.error} title="Not saved" />}
      <Card withBorder>
        <Group justify="space-between" mb="xs">
          <Title order={4}>Summary</Title>
          <Text size="xs" c={summaryChars > MAX_SUMMARY_CHARS ? 'red' : 'dimmed'} data-testid="memory-version">
            version {base.version}
            {base.updated_at ? (
              <>
                {' '}· updated <RelTime value={base.updated_at} />
              </>
            ) : (
              ' · never written'
            )}{' '}
            · {summaryChars.toLocaleString()} / {MAX_SUMMARY_CHARS.toLocaleString()} characters
          </Text>
        </Group>
        <Text size="sm" c="dimmed" mb="xs">
          Every turn's system prompt carries it, with the advice to consult memories/MEMORY.md.
        </Text>
        <Textarea aria-label="Memory summary" autosize minRows={3} maxRows={12} value={d.summary} onChange={(e) => setDraft({ ...d, summary: e.currentTarget.value })} placeholder="Nothing is remembered yet." />
      </Card>
      <Card withBorder>
        <Group justify="space-between" mb="xs">
          <Title order={4}>MEMORY.md</Title>
          <Text size="xs" c={memoryBytes > MAX_MEMORY_BYTES ? 'red' : 'dimmed'}>
            {(memoryBytes / 1024).toFixed(1)} / {MAX_MEMORY_BYTES / 1024} KiB
          </Text>
        </Group>
        {base.version === 0 && !d.memory && (
          <Text size="sm" c="dimmed" mb="xs">
            No memory yet. Sessions with the memory capability add what they learn when they stop; you can also write it here.
          </Text>
        )}
        <LazyCodeEditor language="markdown" value={d.memory} onChange={(v) => setDraft({ ...d, memory: v })} minHeight={240} ariaLabel="MEMORY.md" />
      </Card>
      <Group>
        <Button onClick={() => save.mutate(d)} loading={save.isPending} disabled={!dirty || tooLarge || stale}>
          Save memory
        </Button>
        <Button variant="default" onClick={reload} disabled={save.isPending}>
          {dirty ? 'Discard my edits' : 'Reload'}
        </Button>
        {tooLarge && (
          <Text size="sm" c="red">
            Over the limit: shorten it before saving.
          </Text>
        )}
      </Group>
    </Stack>
  );
}
