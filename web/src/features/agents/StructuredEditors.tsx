// The manifest's entries and the skills source as rows of fields (structured.ts holds the
// model), each with its JSON as the "advanced" view. Switching views keeps everything; JSON
// that does not parse stays in its view with the reason said, never dropped.
import { ActionIcon, Alert, Button, Card, Group, Input, SegmentedControl, Select, SimpleGrid, Stack, Switch, Text, TextInput, Textarea } from '@mantine/core';
import { IconPlus, IconTrash } from '@tabler/icons-react';
import { useState } from 'react';
import { LazyCodeEditor } from '../../components/LazyCodeEditor';
import {
  ENTRY_FIELDS,
  ENTRY_KINDS,
  entriesObject,
  fieldValue,
  newEntryRow,
  otherFields,
  parseEntries,
  parseSkillsSource,
  pretty,
  SKILLS_FIELDS,
  SKILLS_KINDS,
  skillsSourceJson,
  withField,
  withKind,
  type EntryRow,
  type FieldSpec,
  type Spec,
} from './structured';

type View = 'rows' | 'json';

function ViewSwitch({ view, onChange, label }: { view: View; onChange: (v: View) => void; label: string }) {
  return (
    <SegmentedControl
      size="xs"
      style={{ alignSelf: 'flex-start' }}
      aria-label={label}
      value={view}
      onChange={(v) => onChange(v as View)}
      data={[
        { value: 'rows', label: 'Form' },
        { value: 'json', label: 'JSON (advanced)' },
      ]}
    />
  );
}

/** The inputs of one spec's kind; fields this form has no input for are named, and kept. */
function SpecFields({ spec, table, onChange, error }: { spec: Spec; table: Record<string, FieldSpec[]>; onChange: (s: Spec) => void; error: (field: string) => string | undefined }) {
  const fields = table[String(spec.kind)] ?? [];
  const others = otherFields(spec, table);
  const input = (f: FieldSpec) => {
    const value = fieldValue(spec, f);
    if (f.type === 'bool') return <Switch key={f.name} label={f.label} checked={value as boolean} onChange={(e) => onChange(withField(spec, f, e.currentTarget.checked))} />;
    if (f.type === 'textarea')
      return <Textarea key={f.name} label={f.label} required={f.required} autosize minRows={2} maxRows={12} value={value as string} error={error(f.name)} onChange={(e) => onChange(withField(spec, f, e.currentTarget.value))} styles={{ input: { fontFamily: 'monospace' } }} />;
    return <TextInput key={f.name} label={f.label} required={f.required} placeholder={f.placeholder} value={value as string} error={error(f.name)} onChange={(e) => onChange(withField(spec, f, e.currentTarget.value))} />;
  };
  const short = fields.filter((f) => f.type === 'text' || f.type === 'version');
  return (
    <>
      {short.length > 0 && <SimpleGrid cols={{ base: 1, sm: 2 }}>{short.map(input)}</SimpleGrid>}
      {fields.filter((f) => !short.includes(f)).map(input)}
      {others.length > 0 && (
        <Text size="xs" c="dimmed">
          Also set, kept as is (edit in the JSON view): {others.join(', ')}
        </Text>
      )}
    </>
  );
}

export function ManifestEntriesEditor({
  rows,
  json,
  onChange,
  errors,
}: {
  rows: EntryRow[];
  /** The JSON view's text while it is shown, else null. */
  json: string | null;
  onChange: (patch: { entries?: EntryRow[]; entriesJson?: string | null }) => void;
  errors: Record<string, string>;
}) {
  const [switchError, setSwitchError] = useState<string | null>(null);
  const view: View = json === null ? 'rows' : 'json';
  const switchTo = (to: View) => {
    if (to === view) return;
    if (to === 'json') {
      const o = entriesObject(rows);
      if (!o.ok) return setSwitchError(o.error);
      setSwitchError(null);
      onChange({ entriesJson: pretty(o.value) });
    } else {
      const parsed = parseEntries(json ?? '{}');
      if (!parsed.ok) return setSwitchError(`The JSON cannot be shown as rows: ${parsed.error} Fix it, or keep editing it here.`);
      setSwitchError(null);
      onChange({ entries: parsed.value, entriesJson: null });
    }
  };
  const setRow = (i: number, row: EntryRow) => onChange({ entries: rows.map((r, j) => (j === i ? row : r)) });
  return (
    <Input.Wrapper label="Workspace entries" description="What the workspace holds at boot, by path: a file, an empty directory, a git checkout, a host directory or an S3 bucket." error={errors.entries}>
      <Stack gap="xs" mt={4} data-testid="manifest-entries">
        <ViewSwitch view={view} onChange={switchTo} label="Workspace entries view" />
        {switchError && (
          <Alert color="red" p="xs" data-testid="entries-view-error">
            {switchError}
          </Alert>
        )}
        {view === 'json' ? (
          <LazyCodeEditor language="json" value={json ?? ''} onChange={(v) => onChange({ entriesJson: v })} ariaLabel="Workspace entries" />
        ) : (
          <>
            {rows.length === 0 && (
              <Text size="sm" c="dimmed">
                No entries: the workspace starts empty.
              </Text>
            )}
            {rows.map((r, i) => (
              <Card withBorder p="sm" key={i} data-testid="manifest-entry">
                <Stack gap="xs">
                  <Group align="flex-start" wrap="nowrap">
                    <TextInput label="Path" description="Relative to /workspace" style={{ flex: 1 }} value={r.path} error={errors[`entries.${i}.path`]} onChange={(e) => setRow(i, { ...r, path: e.currentTarget.value })} />
                    <Select
                      label="Kind"
                      w={160}
                      data={ENTRY_KINDS}
                      value={ENTRY_KINDS.includes(r.spec.kind as never) ? String(r.spec.kind) : null}
                      error={errors[`entries.${i}.kind`]}
                      allowDeselect={false}
                      onChange={(k) => k && setRow(i, { ...r, spec: withKind(r.spec, k, ENTRY_FIELDS) })}
                    />
                    <ActionIcon variant="subtle" color="red" aria-label={`Remove entry ${r.path}`} mt={28} onClick={() => onChange({ entries: rows.filter((_, j) => j !== i) })}>
                      <IconTrash size={16} />
                    </ActionIcon>
                  </Group>
                  <SpecFields spec={r.spec} table={ENTRY_FIELDS} onChange={(spec) => setRow(i, { ...r, spec })} error={(f) => errors[`entries.${i}.${f}`]} />
                </Stack>
              </Card>
            ))}
            <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => onChange({ entries: [...rows, newEntryRow(rows)] })}>
              Add entry
            </Button>
          </>
        )}
      </Stack>
    </Input.Wrapper>
  );
}

/** The skills source (one, or none): its kind and fields, or its JSON. The form's value is
 * the JSON text either way; the fields view shows it only while it parses. */
export function SkillsSourceEditor({ value, onChange, error }: { value: string; onChange: (json: string) => void; error?: string }) {
  const [view, setView] = useState<View>(() => (parseSkillsSource(value).ok ? 'rows' : 'json'));
  const [switchError, setSwitchError] = useState<string | null>(null);
  const parsed = parseSkillsSource(value);
  // A value set from outside (the bundle picker) that does not parse shows as JSON.
  const shown: View = view === 'rows' && !parsed.ok ? 'json' : view;
  const switchTo = (to: View) => {
    if (to === 'rows' && !parsed.ok) return setSwitchError(`The JSON cannot be shown as fields: ${parsed.error} Fix it, or keep editing it here.`);
    setSwitchError(null);
    setView(to);
  };
  const spec = parsed.ok ? parsed.value : null;
  return (
    <Input.Wrapper label="Skills source" description="Where the agent's skills come from: a git repository, a directory on the server's host, or a skill bundle of the project." error={error}>
      <Stack gap="xs" mt={4} data-testid="skills-source">
        <ViewSwitch view={shown} onChange={switchTo} label="Skills source view" />
        {switchError && (
          <Alert color="red" p="xs" data-testid="skills-view-error">
            {switchError}
          </Alert>
        )}
        {shown === 'json' ? (
          <LazyCodeEditor language="json" value={value} onChange={onChange} minHeight={80} ariaLabel="Skills source" />
        ) : (
          <Card withBorder p="sm">
            <Stack gap="xs">
              <Select
                label="Source"
                w={200}
                allowDeselect={false}
                data={['none', ...SKILLS_KINDS]}
                value={spec ? String(spec.kind) : 'none'}
                onChange={(k) => onChange(k && k !== 'none' ? skillsSourceJson(withKind(spec ?? {}, k, SKILLS_FIELDS)) : '')}
              />
              {spec && <SpecFields spec={spec} table={SKILLS_FIELDS} onChange={(s) => onChange(skillsSourceJson(s))} error={() => undefined} />}
            </Stack>
          </Card>
        )}
      </Stack>
    </Input.Wrapper>
  );
}
