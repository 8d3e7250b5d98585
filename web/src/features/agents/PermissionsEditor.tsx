// The agent form's Permissions tab: for each tool, group, subagent and client tool the agent
// has (lib/permissions.ts derives them as the server does), Allow, Ask or Deny; a tool of a
// group may also follow its group. `shell` under Ask takes the command prefixes that run
// without asking. An MCP server's key covers its tools, each of which may have its own: the
// tools the server listed are rows, and any other may be typed (they are known only when a
// run lists them). The server's 422 is shown at the key it names.
import { ActionIcon, Alert, Badge, Button, Group, Input, Paper, SegmentedControl, Stack, Text, TextInput } from '@mantine/core';
import { IconPlus, IconTrash } from '@tabler/icons-react';
import { useState } from 'react';
import { mcpKeyProblem } from '../../lib/mcp';
import {
  effectiveMode,
  orphanKeys,
  shownMode,
  takesPrefixes,
  withMode,
  withPrefixes,
  type PermissionMode,
  type PermissionRows,
  type PermissionTarget,
} from '../../lib/permissions';

const KIND_LABEL: Record<PermissionTarget['kind'], string> = { tool: 'tool', group: 'group', subagent: 'subagent', client: 'client tool', mcp: 'MCP server', mcp_tool: 'MCP tool' };
const MODE_COLOR: Record<PermissionMode, string | undefined> = { allow: 'teal', ask: 'orange', deny: 'red' };
const AS_GROUP = 'group';

function PrefixesEditor({ prefixes, onChange, errors }: { prefixes: string[]; onChange: (p: string[]) => void; errors: Record<string, string> }) {
  return (
    <Input.Wrapper
      label="Commands that run without asking"
      description="A command that starts with one of these (at a word boundary: “git status” covers “git status -s”, not “git statusx”) runs without asking, unless it chains, substitutes, expands or redirects (; & | ` $ \ < > or a newline): such a command always asks."
      error={errors['permissions.shell.allow_prefixes']}
      mt="xs"
      data-testid="shell-prefixes"
    >
      <Stack gap="xs" mt={4}>
        {prefixes.map((p, i) => (
          <Group key={i} gap="xs" wrap="nowrap" align="flex-start">
            <TextInput
              aria-label={`Command prefix ${i + 1}`}
              placeholder="git status"
              style={{ flex: 1 }}
              styles={{ input: { fontFamily: 'monospace' } }}
              value={p}
              error={errors[`permissions.shell.allow_prefixes.${i}`]}
              onChange={(e) => onChange(prefixes.map((q, j) => (j === i ? e.currentTarget.value : q)))}
            />
            <ActionIcon variant="subtle" color="red" mt={6} aria-label={`Remove prefix ${p || i + 1}`} onClick={() => onChange(prefixes.filter((_, j) => j !== i))}>
              <IconTrash size={16} />
            </ActionIcon>
          </Group>
        ))}
        <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => onChange([...prefixes, ''])}>
          Add a prefix
        </Button>
      </Stack>
    </Input.Wrapper>
  );
}

function PermissionRowView({ target, rows, onChange, errors }: { target: PermissionTarget; rows: PermissionRows; onChange: (rows: PermissionRows) => void; errors: Record<string, string> }) {
  const { key, group } = target;
  const shown = shownMode(rows, target);
  const row = rows[key];
  const data = [
    ...(group ? [{ value: AS_GROUP, label: `As ${group} (${effectiveMode(rows, group)})` }] : []),
    { value: 'allow', label: 'Allow' },
    { value: 'ask', label: 'Ask', disabled: target.handoff && shown !== 'ask' },
    { value: 'deny', label: 'Deny' },
  ];
  const error = errors[`permissions.${key}`];
  return (
    <Paper withBorder p="sm" ml={group ? 'lg' : 0} data-testid={`permission-${key}`} data-mode={effectiveMode(rows, key)}>
      <Group justify="space-between" align="center" wrap="wrap" gap="xs">
        <Stack gap={0} style={{ flex: '1 1 220px', minWidth: 0 }}>
          <Group gap={6} wrap="nowrap">
            <Text size="sm" fw={600} ff="monospace" style={{ wordBreak: 'break-all' }}>
              {key}
            </Text>
            <Badge size="xs" variant="light" color="gray">
              {KIND_LABEL[target.kind]}
            </Badge>
          </Group>
          <Text size="xs" c="dimmed">
            {target.description}
          </Text>
        </Stack>
        <SegmentedControl
          size="xs"
          aria-label={`Permission of ${key}`}
          color={shown ? MODE_COLOR[shown] : 'gray'}
          value={shown ?? AS_GROUP}
          data={data}
          onChange={(v) => onChange(withMode(rows, key, v === AS_GROUP ? null : (v as PermissionMode)))}
        />
      </Group>
      {error && (
        <Text size="xs" c="red" mt={4} role="alert">
          {error}
        </Text>
      )}
      {takesPrefixes(key, row) && <PrefixesEditor prefixes={row!.allow_prefixes} onChange={(p) => onChange(withPrefixes(rows, key, p))} errors={errors} />}
    </Paper>
  );
}

/** A key for an MCP tool no listing showed (`mcp__<server>__<tool>`), added under Ask. */
function McpKeyAdder({ servers, known, onAdd }: { servers: string[]; known: Set<string>; onAdd: (key: string) => void }) {
  const [key, setKey] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const add = () => {
    const k = key.trim();
    const why = mcpKeyProblem(k, servers) ?? (known.has(k) ? 'Already listed above.' : null);
    setProblem(why);
    if (why) return;
    onAdd(k);
    setKey('');
  };
  return (
    <Group gap="xs" align="flex-start" data-testid="mcp-key-adder">
      <TextInput
        aria-label="MCP tool key"
        placeholder={`mcp__${servers[0]}__tool_name`}
        description="Another tool of an MCP server, by the name the model calls it"
        value={key}
        error={problem}
        style={{ flex: '1 1 320px' }}
        styles={{ input: { fontFamily: 'monospace' } }}
        onChange={(e) => setKey(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter') {
            e.preventDefault();
            add();
          }
        }}
      />
      <Button variant="light" size="sm" leftSection={<IconPlus size={14} />} onClick={add}>
        Add
      </Button>
    </Group>
  );
}

export function PermissionsEditor({ rows, targets, onChange, errors }: { rows: PermissionRows; targets: PermissionTarget[]; onChange: (rows: PermissionRows) => void; errors: Record<string, string> }) {
  const orphans = orphanKeys(rows, targets);
  const known = new Set(targets.map((t) => t.key));
  const mcpServers = targets.filter((t) => t.kind === 'mcp').map((t) => t.key.slice('mcp__'.length));
  // Errors that no row shows: the whole set's, or a key the form does not list (any more).
  const elsewhere = Object.entries(errors).filter(([k]) => {
    if (k === 'permissions') return true;
    const key = k.slice('permissions.'.length).split('.')[0];
    return !known.has(key);
  });
  return (
    <Stack maw={820} gap="xs" data-testid="permissions">
      <Text size="sm" c="dimmed">
        What happens when the model calls each tool: <b>Allow</b> runs it; <b>Ask</b> parks the run until a person approves or denies the call (in the session’s transcript, or with POST /api/sessions/{'{id}'}/tool-confirmations), and a denial reaches the model as the tool’s error with the person’s message; <b>Deny</b> never offers the tool to the model. A tool’s own setting wins over its group’s. Edits apply from the next model step of sessions that follow the agent.
      </Text>
      {elsewhere.length > 0 && (
        <Alert color="red" p="xs" data-testid="permissions-errors">
          {elsewhere.map(([k, msg]) => (
            <Text size="sm" key={k}>
              {k}: {msg}
            </Text>
          ))}
        </Alert>
      )}
      {targets.length === 0 && (
        <Text size="sm" c="dimmed">
          The agent has no tools, subagents or client tools to set a permission for.
        </Text>
      )}
      {targets.map((t) => (
        <PermissionRowView key={t.key} target={t} rows={rows} onChange={onChange} errors={errors} />
      ))}
      {mcpServers.length > 0 && <McpKeyAdder servers={mcpServers} known={known} onAdd={(key) => onChange(withMode(rows, key, 'ask'))} />}
      {orphans.length > 0 && (
        <Text size="xs" c="dimmed" data-testid="permissions-orphans">
          Not sent, as the agent no longer has them: {orphans.map((k) => `${k} (${rows[k].mode})`).join(', ')}. They come back if the tool does before you save.
        </Text>
      )}
    </Stack>
  );
}
