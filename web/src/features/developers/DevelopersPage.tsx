import { Anchor, Card, Code, Stack, Table, Text, Title, Badge, Group } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { CodeBlock, ErrorAlert, PageHeader } from '../../components/common';
import { useAppContext } from '../../context';
import { BackendCard } from './BackendCard';
import { E2bCard } from './E2bCard';
import { McpCard } from './McpCard';

/** The payload keys of each stored event type (the catalogue names the types, not the keys). */
export const PAYLOAD_KEYS: Record<string, string[]> = {
  'session.created': ['agent_id', 'title'],
  'session.status_running': ['backend', 'container_id'],
  'session.status_idle': ['final_output', 'stop_reason', 'run_status', 'turns', 'usage', 'session_usage', 'sandbox_seconds', 'call_ids', 'budget'],
  'session.status_error': ['error', 'run_status', 'stop_reason', 'turns', 'usage', 'session_usage', 'sandbox_seconds'],
  'session.status_stopped': ['reason'],
  'session.budget_reached': ['limit', 'max', 'used', 'budget'],
  'user.message': ['text'],
  'user.file': ['path', 'size', 'filename'],
  'agent.message': ['text', 'subagent'],
  'agent.thinking': ['text', 'subagent'],
  'agent.tool_use': ['tool', 'call_id', 'arguments', 'subagent'],
  'agent.tool_result': ['tool', 'call_id', 'output', 'subagent'],
  'agent.client_tool_call': ['tool', 'call_id', 'arguments (JSON string)', 'deferrable'],
  'agent.client_tool_result': ['call_id', 'tool', 'output', 'is_error', 'timed_out'],
  'agent.handoff': ['from', 'to'],
  'agent.compaction': ['tokens_before', 'tokens_after', 'window', 'summary_chars', 'summary', 'messages_covered', 'subagent'],
};

export default function DevelopersPage() {
  const { project, me } = useAppContext();
  const types = useQuery({ queryKey: keys.webhooks.eventTypes(), queryFn: () => unwrap(api.GET('/api/webhooks/event-types')), staleTime: Infinity });
  const base = window.location.origin;
  const env = `export SANDBOX_AGENTS_BASE_URL=${base}\n${me.auth_required ? 'export SANDBOX_AGENTS_API_KEY=ak_…   # from API keys\n' : ''}${project ? `export SANDBOX_AGENTS_PROJECT=${project.slug}\n` : ''}`;
  const quickstart = `from sandbox_agents import Client

client = Client()  # reads SANDBOX_AGENTS_BASE_URL, SANDBOX_AGENTS_API_KEY, SANDBOX_AGENTS_PROJECT

agent = client.agents.create(slug="analyst", name="Analyst", instructions="Be brief.")
session = client.sessions.create_and_wait(agent.slug)
result = client.sessions.run(session.id, "Write output/report.md with three findings.")
print(result.text)

for event in client.sessions.stream(session.id):   # the live event log, resumable
    print(event.seq, event.type)`;
  const verify = `import hashlib, hmac, time

def verify(secret: str, header: str, body: bytes, tolerance: int = 300) -> bool:
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    t, v1 = parts.get("t"), parts.get("v1")
    if not t or not v1 or abs(time.time() - int(t)) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, v1)

# request.headers["X-Anecdote-Signature"], the raw request body`;
  return (
    <Stack>
      <PageHeader title="Developers" description="Everything this UI does, your code can do through the API and the Python client." />
      <Card withBorder>
        <Title order={4} mb="xs">Python SDK</Title>
        <CodeBlock code="pip install sandbox-agents" />
        <Text size="sm" mt="sm" mb={4}>This deployment:</Text>
        <CodeBlock code={env} />
        <Text size="sm" mt="sm" mb={4}>Quickstart:</Text>
        <CodeBlock code={quickstart} />
        <Text size="sm" mt="sm">
          Reference: <Anchor href="/docs">/docs</Anchor> (every endpoint, generated from the server) · <Anchor href="/openapi.json">/openapi.json</Anchor>
        </Text>
      </Card>
      <McpCard />
      <E2bCard />
      <BackendCard />
      <Card withBorder>
        <Title order={4} mb="xs">Event catalogue</Title>
        <Text size="sm" c="dimmed" mb="sm">
          Every session writes an ordered log: <Code>GET /api/sessions/{'{id}'}/events?after=&limit=</Code> pages it; <Code>GET …/events/stream?after=N</Code> replays then follows it over SSE, with no gaps and no repeats. <Code>agent.text_delta</Code> (seq 0) is streamed only. Terminal events: <Code>session.status_idle</Code>, <Code>session.status_error</Code>.
        </Text>
        <ErrorAlert error={types.error} />
        <Table.ScrollContainer minWidth={640}>
          <Table>
            <Table.Thead><Table.Tr><Table.Th>Type</Table.Th><Table.Th>Meaning</Table.Th><Table.Th>Payload keys</Table.Th></Table.Tr></Table.Thead>
            <Table.Tbody>
              {(types.data ?? []).map((t) => (
                <Table.Tr key={t.type}>
                  <Table.Td><Group gap={4} wrap="nowrap"><Badge size="xs" variant="light">{t.group}</Badge><Text size="sm" ff="monospace">{t.type}</Text></Group></Table.Td>
                  <Table.Td><Text size="sm">{t.description}</Text></Table.Td>
                  <Table.Td><Text size="xs" ff="monospace">{(PAYLOAD_KEYS[t.type] ?? []).join(', ') || '—'}</Text></Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      </Card>
      <Card withBorder>
        <Title order={4} mb="xs">Webhooks</Title>
        <Text size="sm" mb={4}>Each delivery is a POST with this body (the event has the same shape as the stream's):</Text>
        <CodeBlock code={`{"id": "<delivery id>", "type": "<event type>", "session_id": "<session id>", "event": {"seq": 42, "session_id": "…", "run_id": "…", "type": "session.status_idle", "payload": {…}, "created_at": "…"}}`} />
        <Text size="sm" mt="sm" mb={4}>
          Headers: <Code>X-Anecdote-Signature: t=&lt;unix&gt;,v1=&lt;hex HMAC-SHA256(secret, t + "." + raw body)&gt;</Code>, <Code>X-Anecdote-Event</Code>, <Code>X-Anecdote-Delivery</Code> (stable across retries: use it to stay idempotent). Delivery is at least once; a 2xx answer counts as delivered. Verify it like this:
        </Text>
        <CodeBlock code={verify} />
      </Card>
    </Stack>
  );
}
