// The fields of one MCP server (mcpServers.ts holds the model): remote (a URL and headers, each
// text or a project secret's value) or run in the sandbox (a command and its environment), then
// the tools offered, whether turns need it, and a call's timeout. `error(key)` answers for the
// server's keys (`mcp_servers.0.url`), a field's own and those under it.
import { ActionIcon, Autocomplete, Button, Group, Input, SegmentedControl, SimpleGrid, Stack, Switch, TagsInput, Text, TextInput } from '@mantine/core';
import { IconPlus, IconTrash } from '@tabler/icons-react';
import { emptyHeaderRow, splitCommand, type HeaderRow, type McpKind, type McpServerRow } from './mcpServers';

const KINDS: { value: McpKind; label: string }[] = [
  { value: 'remote', label: 'Remote (URL)' },
  { value: 'sandbox', label: 'In the sandbox (command)' },
];

function HeadersEditor({ rows, onChange, error, at, secretNames }: { rows: HeaderRow[]; onChange: (rows: HeaderRow[]) => void; error: (key: string) => string | undefined; at: string; secretNames: string[] }) {
  const update = (j: number, patch: Partial<HeaderRow>) => onChange(rows.map((h, i) => (i === j ? { ...h, ...patch } : h)));
  const own = (j: number) => ['name', 'value', 'secret', 'format'].some((f) => error(`${at}.${j}.${f}`));
  // The server names the headers as a whole; the form names each field.
  const whole = rows.some((_, j) => own(j)) ? undefined : error(at);
  return (
    <Input.Wrapper label="Headers" description="Sent with every request to the server. A secret’s value is read on the control plane when it connects, never shown and never sent into the sandbox." error={whole}>
      <Stack gap="xs" mt={4}>
        {rows.map((h, j) => {
          const k = (f: string) => error(`${at}.${j}.${f}`);
          return (
            <Group key={j} gap="xs" align="flex-start" wrap="wrap" data-testid="mcp-header">
              <TextInput aria-label={`Header name ${j + 1}`} placeholder="Authorization" value={h.name} error={k('name')} w={180} onChange={(e) => update(j, { name: e.currentTarget.value })} />
              <SegmentedControl
                size="xs"
                mt={4}
                aria-label={`Header ${j + 1} from`}
                value={h.kind}
                data={[
                  { value: 'text', label: 'Text' },
                  { value: 'secret', label: 'Secret' },
                ]}
                onChange={(v) => update(j, { kind: v as HeaderRow['kind'] })}
              />
              {h.kind === 'text' ? (
                <TextInput aria-label={`Header value ${j + 1}`} placeholder="value" value={h.value} error={k('value')} style={{ flex: '1 1 200px' }} onChange={(e) => update(j, { value: e.currentTarget.value })} />
              ) : (
                <>
                  <Autocomplete aria-label={`Header secret ${j + 1}`} placeholder="secret name" data={secretNames} value={h.secret} error={k('secret')} w={200} onChange={(v) => update(j, { secret: v })} />
                  <TextInput aria-label={`Header format ${j + 1}`} placeholder="Bearer {value}" value={h.format} error={k('format')} style={{ flex: '1 1 160px' }} onChange={(e) => update(j, { format: e.currentTarget.value })} />
                </>
              )}
              <ActionIcon variant="subtle" color="red" mt={6} aria-label={`Remove header ${h.name || j + 1}`} onClick={() => onChange(rows.filter((_, i) => i !== j))}>
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
          );
        })}
        <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => onChange([...rows, emptyHeaderRow()])}>
          Add a header
        </Button>
      </Stack>
    </Input.Wrapper>
  );
}

function EnvEditor({ rows, onChange, error, at }: { rows: McpServerRow['env']; onChange: (rows: McpServerRow['env']) => void; error: (key: string) => string | undefined; at: string }) {
  const update = (j: number, patch: Partial<McpServerRow['env'][number]>) => onChange(rows.map((r, i) => (i === j ? { ...r, ...patch } : r)));
  return (
    <Input.Wrapper label="Environment" description="Its process gets the session’s environment variables, and these besides. No secrets here: bind those on the agent’s Secrets tab, and the server gets them with the session’s." error={rows.some((_, j) => error(`${at}.${j}.key`)) ? undefined : error(at)}>
      <Stack gap="xs" mt={4}>
        {rows.map((r, j) => (
          <Group key={j} gap="xs" align="flex-start" wrap="nowrap">
            <TextInput aria-label={`Variable ${j + 1}`} placeholder="NAME" value={r.key} error={error(`${at}.${j}.key`)} w={200} onChange={(e) => update(j, { key: e.currentTarget.value })} />
            <TextInput aria-label={`Value ${j + 1}`} placeholder="value" value={r.value} style={{ flex: 1 }} onChange={(e) => update(j, { value: e.currentTarget.value })} />
            <ActionIcon variant="subtle" color="red" mt={6} aria-label={`Remove variable ${r.key || j + 1}`} onClick={() => onChange(rows.filter((_, i) => i !== j))}>
              <IconTrash size={16} />
            </ActionIcon>
          </Group>
        ))}
        <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => onChange([...rows, { key: '', value: '' }])}>
          Add a variable
        </Button>
      </Stack>
    </Input.Wrapper>
  );
}

export function McpServerEditor({
  row,
  index,
  onChange,
  error,
  secretNames,
  listedTools,
}: {
  row: McpServerRow;
  index: number;
  onChange: (row: McpServerRow) => void;
  error: (key: string) => string | undefined;
  secretNames: string[];
  /** The tools the server listed, as suggestions for the allowed ones. */
  listedTools: string[];
}) {
  const set = <K extends keyof McpServerRow>(k: K, v: McpServerRow[K]) => onChange({ ...row, [k]: v });
  const at = (f: string) => `mcp_servers.${index}.${f}`;
  const words = row.kind === 'sandbox' ? splitCommand(row.command) : null;
  return (
    <Stack gap="sm">
      <Group gap="sm" align="flex-start" wrap="wrap">
        <TextInput
          label="Name"
          description={`Its tools are offered as mcp__${row.name.trim() || '<name>'}__<tool>`}
          placeholder="github"
          value={row.name}
          error={error(at('name'))}
          style={{ flex: '1 1 220px' }}
          onChange={(e) => set('name', e.currentTarget.value)}
        />
        <Input.Wrapper label="Runs">
          <SegmentedControl display="flex" size="sm" aria-label="Where the server runs" value={row.kind} data={KINDS} onChange={(v) => set('kind', v as McpKind)} />
        </Input.Wrapper>
      </Group>
      {row.kind === 'remote' ? (
        <>
          <TextInput
            label="URL"
            description="Its streamable HTTP endpoint, reached from the control plane (private addresses only where the operator allows them)."
            placeholder="https://example.com/mcp"
            value={row.url}
            error={error(at('url'))}
            onChange={(e) => set('url', e.currentTarget.value)}
            styles={{ input: { fontFamily: 'monospace' } }}
          />
          <HeadersEditor rows={row.headers} onChange={(h) => set('headers', h)} error={error} at={at('headers')} secretNames={secretNames} />
        </>
      ) : (
        <>
          <TextInput
            label="Command"
            description={words && words.length > 0 ? `Started in the sandbox, spoken to over stdio: ${words.length} word${words.length === 1 ? '' : 's'} (${words.map((w) => JSON.stringify(w)).join(' ')})` : 'Started in the sandbox, spoken to over stdio; quote a word with spaces.'}
            placeholder="npx -y @modelcontextprotocol/server-everything"
            value={row.command}
            error={error(at('command'))}
            onChange={(e) => set('command', e.currentTarget.value)}
            styles={{ input: { fontFamily: 'monospace' } }}
          />
          <EnvEditor rows={row.env} onChange={(env) => set('env', env)} error={error} at={at('env')} />
        </>
      )}
      <Stack gap={6}>
        <Switch label="Offer every tool of the server" checked={row.allTools} onChange={(e) => set('allTools', e.currentTarget.checked)} />
        {!row.allTools && (
          <TagsInput
            label="Tools offered"
            description="Their names as the server gives them; the others are never offered to the model."
            placeholder={row.allowedTools.length ? '' : 'a tool’s name, then Enter'}
            data={listedTools}
            value={row.allowedTools}
            error={error(at('allowed_tools'))}
            onChange={(v) => set('allowedTools', v)}
          />
        )}
        {row.allTools && error(at('allowed_tools')) && (
          <Text size="xs" c="red">
            {error(at('allowed_tools'))}
          </Text>
        )}
      </Stack>
      <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="sm">
        <Switch
          label="Required"
          description="A turn fails when the server cannot be reached; otherwise its tools are left out of that step and the transcript says why."
          checked={row.required}
          onChange={(e) => set('required', e.currentTarget.checked)}
        />
        <TextInput label="Timeout per call (seconds)" placeholder="60" value={row.timeout} error={error(at('timeout_seconds'))} onChange={(e) => set('timeout', e.currentTarget.value)} />
      </SimpleGrid>
    </Stack>
  );
}
