// One MCP server as the control plane found it (GET /api/agents/{ref}/mcp-servers): the protocol
// revision it speaks and its tools (which the model is offered, and by what name), or why it
// could not be reached. A server run in the sandbox is only declared here: each session starts
// its own when a turn starts, so its tools (or why it would not start) show in that session.
import { Alert, Badge, Group, Loader, Stack, Text } from '@mantine/core';
import { IconAlertCircle, IconAlertTriangle } from '@tabler/icons-react';
import type { McpKind, McpServerStatus } from './mcpServers';

/** What a server run in the sandbox is, since nothing is connected to from here: not an error. */
function SandboxNote() {
  return (
    <Text size="sm" c="dimmed" data-testid="mcp-status-sandbox">
      Runs in the sandbox: each session starts it there when a turn starts, so its tools are listed then, in that session. A server that cannot start is shown in the session’s transcript with its stderr.
    </Text>
  );
}

export function McpServerStatusView({ status, loading, unsaved, kind }: { status: McpServerStatus | undefined; loading: boolean; unsaved: 'new' | 'changed' | null; kind?: McpKind }) {
  if (unsaved === 'new') {
    return (
      <Text size="sm" c="dimmed" data-testid="mcp-status-unsaved">
        {kind === 'sandbox' ? 'Not saved yet: save it, and sessions start it when their turns start.' : 'Not saved yet: save to connect to it.'}
      </Text>
    );
  }
  if (!status) {
    return loading ? (
      <Group gap="xs" data-testid="mcp-status-loading">
        <Loader size="xs" />
        <Text size="sm" c="dimmed">
          Connecting…
        </Text>
      </Group>
    ) : (
      <Text size="sm" c="dimmed">
        No status yet.
      </Text>
    );
  }
  const offered = status.tools?.filter((t) => t.offered).length ?? 0;
  return (
    <Stack gap="xs" data-testid="mcp-status" data-server={status.name}>
      {unsaved === 'changed' && (
        <Text size="xs" c="dimmed">
          As saved: save to check your changes.
        </Text>
      )}
      <Group gap={6}>
        <Badge size="sm" variant="light" color="gray">
          {status.kind === 'sandbox' ? 'in the sandbox' : 'remote'}
        </Badge>
        {status.required && (
          <Badge size="sm" variant="light" color="orange">
            required
          </Badge>
        )}
        {status.protocol && (
          <Badge size="sm" variant="light" color="teal" data-testid="mcp-protocol">
            protocol {status.protocol}
          </Badge>
        )}
        {loading && <Loader size="xs" aria-label="Checking again" />}
      </Group>
      {status.error && (
        <Alert
          color={status.required ? 'red' : 'orange'}
          icon={status.required ? <IconAlertCircle size={16} /> : <IconAlertTriangle size={16} />}
          title={`${status.name} could not be reached`}
          role="alert"
          data-testid="mcp-status-error"
          p="xs"
        >
          <Text size="sm" style={{ wordBreak: 'break-word' }}>
            {status.error}
          </Text>
          <Text size="xs" c="dimmed" mt={4}>
            {status.required ? 'It is required: turns fail while it cannot be reached.' : 'Turns go on without its tools, and the transcript says why.'}
          </Text>
        </Alert>
      )}
      {status.kind === 'sandbox' && !status.tools && !status.error && <SandboxNote />}
      {status.tools && (
        <>
          <Text size="xs" c="dimmed">
            {status.tools.length} tool{status.tools.length === 1 ? '' : 's'}, {offered} offered to the model
          </Text>
          <Stack gap={4} data-testid="mcp-tools">
            {status.tools.map((t) => (
              <div key={t.name} data-testid="mcp-tool" data-offered={t.offered} data-tool={t.name}>
                <Group gap={6} wrap="nowrap">
                  <Text size="sm" ff="monospace" fw={600} td={t.offered ? undefined : 'line-through'} c={t.offered ? undefined : 'dimmed'} style={{ wordBreak: 'break-all' }} data-testid="mcp-tool-offered-as">
                    {t.offered_as}
                  </Text>
                  {!t.offered && (
                    <Badge size="xs" variant="outline" color="gray" miw="max-content">
                      not offered
                    </Badge>
                  )}
                </Group>
                {t.description && (
                  <Text size="xs" c="dimmed" lineClamp={2}>
                    {t.description}
                  </Text>
                )}
              </div>
            ))}
          </Stack>
        </>
      )}
    </Stack>
  );
}
