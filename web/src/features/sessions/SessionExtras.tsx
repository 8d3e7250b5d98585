import { Alert, Anchor, Button, Card, Group, NumberInput, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { IconExternalLink } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router-dom';
import { api, unwrap, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert } from '../../components/common';
import { formatBytes, formatDuration, formatNumber, RelTime } from '../../lib/time';

/**
 * Opens a preview URL in a new tab with rel=noopener noreferrer: the preview cannot reach back
 * into this window, and it gets no Referer with the session's URL. The signed URL is the only
 * credential; no cookie or key is added to it. Anything but http(s) is refused.
 */
export function openPreview(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url, window.location.href);
  } catch {
    return false;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return false;
  const a = document.createElement('a');
  a.href = parsed.href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  document.body.appendChild(a);
  a.click();
  a.remove();
  return true;
}

function Ports({ session }: { session: SessionDetail }) {
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

function Snapshots({ session }: { session: SessionDetail }) {
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

type Tokens = { input_tokens?: number; output_tokens?: number; total_tokens?: number; requests?: number; active_seconds?: number };

function Breakdown({ title, data }: { title: string; data: Record<string, Tokens> | undefined }) {
  const rows = Object.entries(data ?? {});
  return (
    <Card withBorder>
      <Title order={5} mb="xs">
        {title}
      </Title>
      {rows.length === 0 ? (
        <Text size="sm" c="dimmed">
          Nothing yet.
        </Text>
      ) : (
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Input</Table.Th>
              <Table.Th>Output</Table.Th>
              <Table.Th>Requests</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map(([k, v]) => (
              <Table.Tr key={k}>
                <Table.Td ff="monospace">{k}</Table.Td>
                <Table.Td>{formatNumber(v.input_tokens)}</Table.Td>
                <Table.Td>{formatNumber(v.output_tokens)}</Table.Td>
                <Table.Td>{formatNumber(v.requests)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Card>
  );
}

function Usage({ session }: { session: SessionDetail }) {
  const u = (session.usage ?? {}) as Tokens & { by_model?: Record<string, Tokens>; by_agent?: Record<string, Tokens> };
  return (
    <Stack>
      <SimpleGrid cols={{ base: 2, sm: 5 }}>
        {[
          ['Input tokens', formatNumber(u.input_tokens)],
          ['Output tokens', formatNumber(u.output_tokens)],
          ['Requests', formatNumber(u.requests)],
          ['Model time', formatDuration(u.active_seconds)],
          ['Sandbox time', formatDuration(session.sandbox_seconds)],
        ].map(([k, v]) => (
          <Card withBorder key={k}>
            <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
              {k}
            </Text>
            <Text fw={700} size="lg">
              {v}
            </Text>
          </Card>
        ))}
      </SimpleGrid>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Breakdown title="By model" data={u.by_model} />
        <Breakdown title="By agent" data={u.by_agent} />
      </SimpleGrid>
      <Card withBorder>
        <Title order={5} mb="xs">
          Runs
        </Title>
        {session.runs.length === 0 ? (
          <Text size="sm" c="dimmed">No runs yet.</Text>
        ) : (
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Prompt</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Turns</Table.Th>
                <Table.Th>Tokens</Table.Th>
                <Table.Th>Started</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {session.runs.map((r) => (
                <Table.Tr key={r.id}>
                  <Table.Td>
                    <Text size="sm" lineClamp={1}>
                      {r.prompt}
                    </Text>
                  </Table.Td>
                  <Table.Td>
                    {r.status}
                    {r.stop_reason ? ` · ${r.stop_reason}` : ''}
                  </Table.Td>
                  <Table.Td>{r.turns}</Table.Td>
                  <Table.Td>{formatNumber((r.usage as Tokens)?.total_tokens)}</Table.Td>
                  <Table.Td>
                    <RelTime value={r.created_at} size="sm" />
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
      </Card>
    </Stack>
  );
}

/**
 * What the session's last boot staged of its agent's skills source: where the tree came from
 * (a bundle and its version, a directory, a repository and ref), and each skill with where it
 * lives in the workspace. A lazy source's skills are copied there when the model loads them.
 */
function Skills({ session }: { session: SessionDetail }) {
  const staged = session.skills;
  if (!staged) {
    return (
      <EmptyState title="No skills">
        {session.agent?.skills_source
          ? 'The session has not booted with its agent’s skills source yet.'
          : 'The agent has no skills source: give it a skill bundle, a directory or a repository to stage skills into its sessions.'}
      </EmptyState>
    );
  }
  const how = staged.lazy ? 'loaded on demand (load_skill)' : 'staged at boot';
  return (
    <Stack gap="sm" data-testid="session-skills">
      <Text size="sm">
        From <b>{staged.origin || 'the skills source'}</b> · {staged.skills.length} skill{staged.skills.length === 1 ? '' : 's'}, {how}
        {staged.announced ? ', announced to the model' : ', not announced (the agent lacks the skills capability)'}.
      </Text>
      {staged.skills.length > 0 && (
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Description</Table.Th>
              <Table.Th>Path</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {staged.skills.map((k) => (
              <Table.Tr key={k.path}>
                <Table.Td>{k.name}</Table.Td>
                <Table.Td>
                  <Text size="sm" lineClamp={2}>
                    {k.description}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace">
                    {k.path}
                  </Text>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      {staged.workspace_docs && (
        <Card withBorder>
          <Title order={6} mb={4}>
            Added to the instructions
          </Title>
          <Text size="sm" style={{ whiteSpace: 'pre-wrap' }}>
            {staged.workspace_docs}
          </Text>
        </Card>
      )}
    </Stack>
  );
}

export default function SessionExtras({ tab, session }: { tab: 'ports' | 'snapshots' | 'skills' | 'usage'; session: SessionDetail }) {
  if (tab === 'ports') return <Ports session={session} />;
  if (tab === 'snapshots') return <Snapshots session={session} />;
  if (tab === 'skills') return <Skills session={session} />;
  if (session.status === 'error') return <Alert color="red">{session.error}</Alert>;
  return <Usage session={session} />;
}
