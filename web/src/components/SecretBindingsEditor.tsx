import { ActionIcon, Autocomplete, Button, Group, SegmentedControl, SimpleGrid, Stack, Text, TextInput } from '@mantine/core';
import { IconPlus, IconTrash } from '@tabler/icons-react';
import { BINDING_HELP, BINDING_KINDS, emptyBindingRow, type BindingKind, type BindingRow } from '../lib/secretBindings';

/**
 * Secret bindings (an agent's, or a session's besides its agent's), one row each: the secret, how it is bound (a variable, a
 * header the egress proxy injects, or a placeholder it swaps), and that kind's fields.
 * `error(key)` answers for keys like `secret_bindings.0.inject.header`.
 */
export function SecretBindingsEditor({
  rows,
  onChange,
  error,
  secretNames,
  intro,
}: {
  rows: BindingRow[];
  onChange: (rows: BindingRow[]) => void;
  error: (key: string) => string | undefined;
  secretNames: string[];
  /** What the bindings are for, before the rows; the kinds' own help follows each row. */
  intro: React.ReactNode;
}) {
  const update = (i: number, patch: Partial<BindingRow>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <Stack maw={760} gap="sm">
      {intro}
      {rows.map((b, i) => {
        const k = (f: string) => `secret_bindings.${i}.${f}`;
        return (
          <Stack key={i} gap={6} data-testid="secret-binding" p="xs" style={{ border: '1px solid var(--mantine-color-default-border)', borderRadius: 4 }}>
            <Group gap="xs" align="flex-start">
              <Autocomplete placeholder="secret name" data={secretNames} value={b.secret} error={error(k('secret'))} aria-label={`Secret ${i + 1}`} onChange={(v) => update(i, { secret: v })} />
              <SegmentedControl
                size="xs"
                aria-label={`Bound as ${i + 1}`}
                data={BINDING_KINDS}
                value={b.kind}
                onChange={(v) => update(i, { kind: v as BindingKind })}
              />
              <ActionIcon variant="subtle" color="red" aria-label={`Remove binding ${i + 1}`} mt={6} ml="auto" onClick={() => onChange(rows.filter((_, j) => j !== i))}>
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
            {b.kind === 'env' && (
              <TextInput placeholder="ENV_VAR" value={b.env} error={error(k('env'))} aria-label={`Environment variable ${i + 1}`} onChange={(e) => update(i, { env: e.currentTarget.value })} />
            )}
            {b.kind === 'inject' && (
              <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="xs">
                <TextInput label="Host" placeholder="api.github.com" value={b.host} error={error(k('inject.host'))} onChange={(e) => update(i, { host: e.currentTarget.value })} />
                <TextInput label="Header" placeholder="Authorization" value={b.header} error={error(k('inject.header'))} onChange={(e) => update(i, { header: e.currentTarget.value })} />
                <TextInput label="Format" placeholder="Bearer {value}" value={b.format} error={error(k('inject.format'))} onChange={(e) => update(i, { format: e.currentTarget.value })} />
              </SimpleGrid>
            )}
            {b.kind === 'placeholder' && (
              <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="xs">
                <TextInput label="Variable" placeholder="GITHUB_TOKEN" value={b.env} error={error(k('env'))} onChange={(e) => update(i, { env: e.currentTarget.value })} />
                <TextInput label="Hosts" placeholder="api.github.com, uploads.github.com" value={b.hosts} error={error(k('placeholder.hosts'))} onChange={(e) => update(i, { hosts: e.currentTarget.value })} />
              </SimpleGrid>
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
