import { ActionIcon, Button, Checkbox, Code, Group, Input, SegmentedControl, SimpleGrid, Stack, Text, TextInput } from '@mantine/core';
import { IconPlus, IconTrash } from '@tabler/icons-react';
import type { ReactNode } from 'react';
import { EGRESS, EGRESS_HELP, entryNote, entryProblem, LAYERS_HELP, policyNotes, PRESETS, presetHosts, type Egress, type NetworkErrors, type NetworkPolicy, type Preset } from '../lib/network';

/** Several entries pasted at once (one a line, or separated by commas or spaces). */
function pastedEntries(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

/** What a preset holds, for its checkbox: what it is for and its hosts (or its presets). */
function presetDescription(name: Preset, inChosenGroup: boolean): string {
  const p = PRESETS.find((x) => x.name === name)!;
  const what = p.label.toLowerCase() === p.name ? '' : `${p.label}: `;
  const holds = p.includes ? `the presets ${p.includes.join(', ')}` : presetHosts(p.name).join(', ');
  return `${what}${holds}${inChosenGroup ? ' (in package_managers, which is chosen)' : ''}.`;
}

/**
 * A network policy's editor: the egress, and with `allowlist` the entries and the presets.
 * Each entry shows the server's error for it (`errors["allow.<i>"]`, from a 422) or, before
 * a save, the hint of the server's rules; hints never stop a save, the server decides.
 */
export function NetworkPolicyEditor({
  value,
  onChange,
  errors = {},
  disabled = false,
  label = 'Network',
  description = LAYERS_HELP,
}: {
  value: NetworkPolicy;
  onChange: (p: NetworkPolicy) => void;
  errors?: NetworkErrors;
  disabled?: boolean;
  label?: ReactNode;
  description?: ReactNode;
}) {
  const set = (patch: Partial<NetworkPolicy>) => onChange({ ...value, ...patch });
  const setEntry = (i: number, text: string) => set({ allow: value.allow.map((e, j) => (j === i ? text : e)) });
  // A pasted list (one a line, or separated by commas or spaces) becomes one row per entry:
  // in place of a blank row, or after a filled one.
  const paste = (i: number, text: string): boolean => {
    const parts = pastedEntries(text);
    if (parts.length < 2) return false;
    const keep = value.allow[i].trim() ? [value.allow[i]] : [];
    set({ allow: [...value.allow.slice(0, i), ...keep, ...parts, ...value.allow.slice(i + 1)] });
    return true;
  };
  const notes = policyNotes(value);
  const grouped = new Set(value.presets.flatMap((p) => PRESETS.find((x) => x.name === p)?.includes ?? []));
  return (
    <Input.Wrapper label={label} description={description} error={errors.egress} data-testid="network-policy">
      <Stack gap="sm" mt={6}>
        <Group gap="sm" align="center" wrap="wrap">
          <SegmentedControl
            aria-label="Egress"
            data={EGRESS.map((e) => ({ value: e, label: e }))}
            value={value.egress}
            onChange={(e) => set({ egress: e as Egress })}
            disabled={disabled}
            data-testid="network-egress"
          />
          <Text size="sm" c="dimmed" data-testid="network-egress-help">
            {EGRESS_HELP[value.egress]}
          </Text>
        </Group>
        {notes.map((n) => (
          <Text key={n} size="sm" c="orange.8" data-testid="network-note">
            {n}
          </Text>
        ))}
        {value.egress === 'allowlist' && (
          <>
            <Input.Wrapper
              label="Allowed hosts and addresses"
              description={
                <>
                  Host names (<Code>pypi.org</Code>), wildcards (<Code>*.pythonhosted.org</Code>: names under it), addresses and CIDRs (<Code>203.0.113.0/24</Code>, <Code>[2001:db8::/32]</Code>), each with an optional <Code>:port</Code> (none: any port). Paste a list to add several.
                </>
              }
              error={errors.allow}
            >
              <Stack gap={6} mt={4} data-testid="network-allow">
                {value.allow.map((entry, i) => {
                  const server = errors[`allow.${i}`];
                  const problem = entry.trim() ? entryProblem(entry) : null;
                  const note = entryNote(entry, value, i);
                  return (
                    <Stack key={i} gap={2} data-testid="network-entry">
                      <Group gap="xs" wrap="nowrap" align="flex-start">
                        <TextInput
                          aria-label={`Allowed entry ${i + 1}`}
                          placeholder="pypi.org, *.example.com:443, 203.0.113.0/24"
                          value={entry}
                          disabled={disabled}
                          error={server ?? problem}
                          errorProps={{ 'data-testid': server ? 'network-entry-error' : 'network-entry-hint' }}
                          onChange={(e) => setEntry(i, e.currentTarget.value)}
                          onPaste={(e) => {
                            if (paste(i, e.clipboardData.getData('text'))) e.preventDefault();
                          }}
                          styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
                          style={{ flex: 1 }}
                        />
                        <ActionIcon variant="subtle" color="red" aria-label={`Remove entry ${i + 1}`} mt={6} disabled={disabled} onClick={() => set({ allow: value.allow.filter((_, j) => j !== i) })}>
                          <IconTrash size={16} />
                        </ActionIcon>
                      </Group>
                      {note && !server && !problem && (
                        <Text size="xs" c="dimmed" data-testid="network-entry-note">
                          {note}
                        </Text>
                      )}
                    </Stack>
                  );
                })}
                <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} disabled={disabled} onClick={() => set({ allow: [...value.allow, ''] })}>
                  Add entry
                </Button>
              </Stack>
            </Input.Wrapper>
            <Checkbox.Group
              label="Presets"
              description="Named lists of hosts, kept by the server (a preset only grows by hosts its registry serves from)."
              value={value.presets}
              onChange={(chosen) => set({ presets: PRESETS.map((p) => p.name).filter((n) => chosen.includes(n)) })}
              error={errors.presets}
            >
              <SimpleGrid cols={{ base: 1, sm: 2 }} mt={6} spacing="xs" data-testid="network-presets">
                {PRESETS.map((p) => (
                  <Checkbox
                    key={p.name}
                    value={p.name}
                    disabled={disabled}
                    label={
                      <Text span ff="monospace" size="sm">
                        {p.name}
                      </Text>
                    }
                    description={presetDescription(p.name, grouped.has(p.name))}
                  />
                ))}
              </SimpleGrid>
            </Checkbox.Group>
          </>
        )}
      </Stack>
    </Input.Wrapper>
  );
}
