// The "MCP servers" field of "Start a session": the agent's servers, each kept or not. Every one
// is kept at first; a session started so follows the agent's servers (nothing is sent), one
// started with some left out uses only the others (its subagents keep theirs).
import { Checkbox, Group, Stack, Text } from '@mantine/core';
import type { Agent } from '../../api/client';
import { narrowMcpServers } from './startSession';

export function McpServersField({ servers, value, onChange, error }: { servers: NonNullable<Agent['mcp_servers']>; value: string[] | null; onChange: (value: string[] | null) => void; error?: string }) {
  const all = servers.map((s) => s.name);
  const kept = value ?? all;
  const description =
    value === null
      ? 'All of the agent’s: untick one to leave its tools out of this session (its subagents keep theirs).'
      : kept.length === 0
        ? 'None: this session’s model is offered no MCP tools.'
        : `Only ${kept.join(', ')}: the others’ tools are left out of this session (its subagents keep theirs).`;
  return (
    <Checkbox.Group label="MCP servers" description={description} value={kept} onChange={(x) => onChange(narrowMcpServers(all, x))} error={error} data-testid="start-mcp-servers">
      <Stack gap={6} mt={6}>
        {servers.map((s) => (
          <Checkbox
            key={s.name}
            value={s.name}
            data-testid="start-mcp-server"
            data-name={s.name}
            label={
              <Group gap={6} wrap="wrap">
                <Text size="sm" ff="monospace" span>
                  {s.name}
                </Text>
                <Text size="xs" c="dimmed" span>
                  {s.command ? 'in the sandbox' : 'remote'}
                  {s.required ? ', required' : ''}
                </Text>
              </Group>
            }
          />
        ))}
      </Stack>
    </Checkbox.Group>
  );
}
