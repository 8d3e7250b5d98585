// The session's background processes: start one, watch the list, read a process's recent
// output, kill or remove it. They live in the sandbox's daemon, so all of it needs the
// session running; they end with the sandbox.
import { Alert, Anchor, Badge, Box, Button, Code, Group, ScrollArea, Stack, Table, Text, TextInput } from '@mantine/core';
import { IconPlayerPlay } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type Process, type ProcessDetail, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert } from '../../components/common';
import { formatBytes, RelTime } from '../../lib/time';

/** How often a running process (the list, or the one shown) is read again. */
const POLL_MS = 2000;
const SIGNALS: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 9: 'SIGKILL', 15: 'SIGTERM' };

/** "0", "1", or "143 · SIGTERM"; nothing while it runs. */
export function exitText(p: Pick<Process, 'status' | 'exit_code' | 'signal'>): string {
  if (p.status === 'running') return '—';
  const signal = p.signal == null ? null : (SIGNALS[p.signal] ?? `signal ${p.signal}`);
  return [p.exit_code ?? null, signal].filter((x) => x !== null).join(' · ') || '—';
}

function ProcessStatusBadge({ process: p }: { process: Process }) {
  const color = p.status === 'running' ? 'teal' : p.exit_code === 0 ? 'gray' : 'red';
  return (
    <Badge color={color} variant="light" data-testid="process-status">
      {p.status}
    </Badge>
  );
}

/** Once the sandbox stopped, its processes are gone: say so instead of asking the daemon. */
export default function ProcessesTab({ session }: { session: SessionDetail }) {
  if (session.status !== 'running') {
    return (
      <Alert color="gray" mb="sm">
        {session.status === 'provisioning'
          ? 'The sandbox is provisioning: background processes can start once it runs.'
          : `The sandbox is ${session.status}: background processes need it running, and the ones it had ended with it (start the session first).`}
      </Alert>
    );
  }
  return <Processes sessionId={session.id} />;
}

/** What the last Kill or Remove answered: the process as it ended, no longer in the list. */
type Ended = { detail: ProcessDetail; killed: boolean };

function Processes({ sessionId }: { sessionId: string }) {
  const qc = useQueryClient();
  const [selected, setSelected] = useState<string | null>(null);
  const [ended, setEnded] = useState<Ended | null>(null);
  const list = useQuery({
    queryKey: keys.sessions.processes(sessionId),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/processes', { params: { path: { session_id: sessionId } } })),
    refetchInterval: (q) => (q.state.data?.some((p) => p.status === 'running') ? POLL_MS : false),
  });
  const remove = useMutation({
    mutationFn: (p: Process) =>
      unwrap(api.DELETE('/api/sessions/{session_id}/processes/{process_id}', { params: { path: { session_id: sessionId, process_id: p.id } } })),
    onSuccess: (detail, p) => {
      setEnded({ detail, killed: p.status === 'running' });
      setSelected(detail.id);
      qc.removeQueries({ queryKey: keys.sessions.process(sessionId, detail.id) });
      qc.invalidateQueries({ queryKey: keys.sessions.processes(sessionId), exact: true });
    },
  });
  const select = (id: string) => {
    setSelected(id);
    if (ended?.detail.id !== id) setEnded(null);
  };
  const processes = list.data ?? [];
  return (
    <Stack gap="sm">
      <StartForm
        sessionId={sessionId}
        onStarted={(p) => {
          qc.invalidateQueries({ queryKey: keys.sessions.processes(sessionId), exact: true });
          select(p.id);
        }}
      />
      <ErrorAlert error={list.error} title="The processes could not be listed" />
      <ErrorAlert error={remove.error} title={remove.variables?.status === 'running' ? 'The process was not killed' : 'The process was not removed'} />
      {list.isPending ? (
        <Text size="sm" c="dimmed">
          Reading the processes…
        </Text>
      ) : list.isError ? null : processes.length === 0 ? (
        <EmptyState title="No background processes">A process started here keeps running after the page closes, until it exits, is killed, or the sandbox stops.</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={720}>
          <Table aria-label="Background processes" highlightOnHover>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Process</Table.Th>
                <Table.Th>Command</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Exit</Table.Th>
                <Table.Th>Started</Table.Th>
                <Table.Th>Ended</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {processes.map((p) => (
                <Table.Tr key={p.id} data-testid="process-row" data-selected={p.id === selected || undefined} bg={p.id === selected ? 'var(--mantine-color-default-hover)' : undefined}>
                  <Table.Td>
                    <Anchor component="button" type="button" ff="monospace" size="sm" onClick={() => select(p.id)} aria-label={`Show the output of ${p.id}`}>
                      {p.id}
                    </Anchor>
                  </Table.Td>
                  <Table.Td maw={360}>
                    <Text ff="monospace" size="sm" truncate="end" title={`${p.command}\n(in ${p.cwd}, pid ${p.pid})`}>
                      {p.command}
                    </Text>
                  </Table.Td>
                  <Table.Td>
                    <ProcessStatusBadge process={p} />
                  </Table.Td>
                  <Table.Td>{exitText(p)}</Table.Td>
                  <Table.Td>
                    <RelTime value={p.started_at} size="sm" />
                  </Table.Td>
                  <Table.Td>
                    <RelTime value={p.ended_at} size="sm" />
                  </Table.Td>
                  <Table.Td>
                    <Button
                      size="compact-sm"
                      variant="light"
                      color={p.status === 'running' ? 'red' : 'gray'}
                      onClick={() => remove.mutate(p)}
                      loading={remove.isPending && remove.variables?.id === p.id}
                      aria-label={`${p.status === 'running' ? 'Kill' : 'Remove'} ${p.id}`}
                    >
                      {p.status === 'running' ? 'Kill' : 'Remove'}
                    </Button>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {ended && ended.detail.id === selected ? (
        <ProcessOutput
          process={ended.detail}
          note={`${ended.killed ? 'Killed and removed' : 'Removed'}: it is no longer in the list. This is how it ended.`}
        />
      ) : (
        selected && <SelectedProcess key={selected} sessionId={sessionId} processId={selected} />
      )}
    </Stack>
  );
}

function StartForm({ sessionId, onStarted }: { sessionId: string; onStarted: (p: Process) => void }) {
  const [command, setCommand] = useState('');
  const [cwd, setCwd] = useState('');
  const start = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/sessions/{session_id}/processes', { params: { path: { session_id: sessionId } }, body: { command, cwd: cwd.trim() || null } })),
    onSuccess: (p) => {
      setCommand('');
      onStarted(p);
    },
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        if (command.trim() && !start.isPending) start.mutate();
      }}
    >
      <Stack gap={6}>
        <Group align="flex-end" wrap="wrap">
          <TextInput
            label="Command"
            description="Run as sh -c, with the session’s bound secrets in its environment."
            placeholder="python -m http.server 8000"
            required
            style={{ flex: 1, minWidth: 280 }}
            styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
            value={command}
            onChange={(e) => setCommand(e.currentTarget.value)}
          />
          <TextInput label="Working directory" description="Absolute, or relative to the workspace." placeholder="/workspace" w={220} value={cwd} onChange={(e) => setCwd(e.currentTarget.value)} />
          <Button type="submit" leftSection={<IconPlayerPlay size={16} />} loading={start.isPending} disabled={!command.trim()}>
            Start process
          </Button>
        </Group>
        <ErrorAlert error={start.error} title="The process did not start" />
      </Stack>
    </form>
  );
}

/** The chosen process, read again while it runs. */
function SelectedProcess({ sessionId, processId }: { sessionId: string; processId: string }) {
  const detail = useQuery({
    queryKey: keys.sessions.process(sessionId, processId),
    queryFn: () =>
      unwrap(api.GET('/api/sessions/{session_id}/processes/{process_id}', { params: { path: { session_id: sessionId, process_id: processId } } })),
    refetchInterval: (q) => (q.state.data?.status === 'running' ? POLL_MS : false),
  });
  if (detail.error) return <ErrorAlert error={detail.error} title={`The output of ${processId} could not be read`} />;
  if (!detail.data) return <Text size="sm" c="dimmed">Reading {processId}…</Text>;
  return <ProcessOutput process={detail.data} />;
}

function ProcessOutput({ process: p, note }: { process: ProcessDetail; note?: string }) {
  return (
    <Box component="section" aria-label={`Output of ${p.id}`} data-testid="process-output">
      <Stack gap="xs">
        <Group gap="xs">
          <Text fw={600} ff="monospace" size="sm">
            {p.id}
          </Text>
          <ProcessStatusBadge process={p} />
          {p.status === 'exited' && (
            <Text size="sm" c="dimmed">
              exit {exitText(p)}
            </Text>
          )}
          <Text size="sm" c="dimmed">
            pid {p.pid} in {p.cwd}
          </Text>
        </Group>
        {note && (
          <Alert color="gray" py="xs" data-testid="process-ended">
            {note}
          </Alert>
        )}
        <Stream name="stdout" label={`Standard output of ${p.id}`} text={p.stdout} dropped={p.stdout_dropped} running={p.status === 'running'} />
        <Stream name="stderr" label={`Standard error of ${p.id}`} text={p.stderr} dropped={p.stderr_dropped} running={p.status === 'running'} />
      </Stack>
    </Box>
  );
}

function Stream({ name, label, text, dropped, running }: { name: string; label: string; text: string; dropped: number; running: boolean }) {
  return (
    <Box component="section" aria-label={label}>
      <Text size="xs" fw={600} c="dimmed" mb={2}>
        {name}
        {dropped > 0 && ` · the first ${formatBytes(dropped)} are not kept (only the last 64 KiB are)`}
      </Text>
      <ScrollArea.Autosize mah={320} type="auto">
        <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-word' }}>
          {text || (running ? '(nothing written yet)' : '(nothing written)')}
        </Code>
      </ScrollArea.Autosize>
    </Box>
  );
}
