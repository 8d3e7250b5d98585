import { ActionIcon, Autocomplete, Button, Group, SegmentedControl, Stack, Text, TextInput } from '@mantine/core';
import { IconPlus, IconTrash } from '@tabler/icons-react';
import { BINDING_HELP, BINDING_KINDS, emptyBindingRow, type BindingKind, type BindingRow } from './secretBindings';

/**
 * The agent's secret bindings, one row each: the secret, how it is bound (a variable, a
 * header the egress proxy injects, or a placeholder it swaps), and that kind's fields.
 * `error(key)` answers for keys like `secret_bindings.0.inject.header`.
 */
export function SecretBindingsEditor({
  rows,
  onChange,
  error,
  secretNames,
}: {
  rows: BindingRow[];
  onChange: (rows: BindingRow[]) => void;
  error: (key: string) => string | undefined;
  secretNames: string[];
}) {
  const update = (i: number, patch: Partial<BindingRow>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <Stack maw={760} gap="sm">
      <Text size="sm" c="dimmed">
        Project secrets, resolved when the sandbox boots; values are never shown. A variable puts the secret in the sandbox’s environment. With a header (inject) or a placeholder the secret never enters the sandbox: the egress proxy adds it to requests to the hosts you name. Those two work only on a server run with --egress-proxy (an operator’s flag): without the proxy nothing adds the header or swaps the placeholder.
      </Text>
      {rows.map((b, i) => {
        const k = (f: string) => `secret_bindings.${i}.${f}`;
        return (
          <Stack key={i} gap={6} data-testid="secret-binding" p="xs" style={{ border: '1px solid var(--mantine-color-default-border)', borderRadius: 4 }}>
            <Group gap="xs" wrap="nowrap" align="flex-start">
              <Autocomplete placeholder="secret name" data={secretNames} value={b.secret} error={error(k('secret'))} aria-label="Secret" onChange={(v) => update(i, { secret: v })} />
              <SegmentedControl
                size="xs"
                aria-label="Bound as"
                data={BINDING_KINDS}
                value={b.kind}
                onChange={(v) => update(i, { kind: v as BindingKind })}
              />
              <ActionIcon variant="subtle" color="red" aria-label="Remove binding" mt={6} ml="auto" onClick={() => onChange(rows.filter((_, j) => j !== i))}>
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
            {b.kind === 'env' && (
              <TextInput placeholder="ENV_VAR" value={b.env} error={error(k('env'))} aria-label="Environment variable" onChange={(e) => update(i, { env: e.currentTarget.value })} />
            )}
            {b.kind === 'inject' && (
              <Group gap="xs" grow align="flex-start">
                <TextInput label="Host" placeholder="api.github.com" value={b.host} error={error(k('inject.host'))} onChange={(e) => update(i, { host: e.currentTarget.value })} />
                <TextInput label="Header" placeholder="Authorization" value={b.header} error={error(k('inject.header'))} onChange={(e) => update(i, { header: e.currentTarget.value })} />
                <TextInput label="Format" placeholder="Bearer {value}" value={b.format} error={error(k('inject.format'))} onChange={(e) => update(i, { format: e.currentTarget.value })} />
              </Group>
            )}
            {b.kind === 'placeholder' && (
              <Group gap="xs" grow align="flex-start">
                <TextInput label="Variable" placeholder="GITHUB_TOKEN" value={b.env} error={error(k('env'))} onChange={(e) => update(i, { env: e.currentTarget.value })} />
                <TextInput label="Hosts" placeholder="api.github.com, uploads.github.com" value={b.hosts} error={error(k('placeholder.hosts'))} onChange={(e) => update(i, { hosts: e.currentTarget.value })} />
              </Group>
            )}
            <Text size="xs" c="dimmed">
              {BINDING_HELP[b.kind]}
            </Text>
          </Stack>
        );
      })}
      <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => onChange([...rows, emptyBindingRow()])}>
        Bind a secret
      </Button>
    </Stack>
  );
}
