import { describe, expect, it } from 'vitest';
import { agentBody, emptyAgentForm, entriesOf } from './model';
import {
  bundleOfSkillsSource,
  ENTRY_FIELDS,
  entriesObject,
  entryRowsOf,
  fieldValue,
  newEntryRow,
  otherFields,
  parseEntries,
  parseSkillsSource,
  pretty,
  SKILLS_FIELDS,
  skillsSourceJson,
  withField,
  withKind,
  type EntryRow,
} from './structured';

const field = (kind: keyof typeof ENTRY_FIELDS, name: string) => ENTRY_FIELDS[kind].find((f) => f.name === name)!;
const skillsField = (kind: keyof typeof SKILLS_FIELDS, name: string) => SKILLS_FIELDS[kind].find((f) => f.name === name)!;

const MANIFEST = {
  'notes.md': { kind: 'file', content: '# Notes\n' },
  out: { kind: 'dir' },
  'src/app': { kind: 'git_repo', repo: 'o/app', ref: 'v1', subpath: null },
  data: { kind: 's3_mount', bucket: 'b', read_only: false, some_future_field: 7 },
};

describe('manifest entries as rows', () => {
  it('round-trips JSON → rows → JSON unchanged, unknown fields and nulls included', () => {
    const parsed = parseEntries(pretty(MANIFEST));
    expect(parsed.ok).toBe(true);
    const rows = (parsed as { value: EntryRow[] }).value;
    expect(rows.map((r) => r.path)).toEqual(['notes.md', 'out', 'src/app', 'data']);
    expect(entriesObject(rows)).toEqual({ ok: true, value: MANIFEST });
    expect(otherFields(rows[3].spec, ENTRY_FIELDS)).toEqual(['some_future_field']);
  });

  it('adds a row at a free path, edits its kind and fields, and removes it', () => {
    let rows = entryRowsOf({ 'new-entry': { kind: 'dir' } });
    const added = newEntryRow(rows);
    expect(added).toEqual({ path: 'new-entry-2', spec: { kind: 'dir' } });
    rows = [...rows, added];
    // A kind brings its required fields, empty, for the form to ask for.
    rows[1] = { path: 'repo', spec: withKind(rows[1].spec, 'git_repo', ENTRY_FIELDS) };
    expect(rows[1].spec).toEqual({ kind: 'git_repo', repo: '' });
    rows[1] = { ...rows[1], spec: withField(rows[1].spec, field('git_repo', 'repo'), 'o/r') };
    rows[1] = { ...rows[1], spec: withField(rows[1].spec, field('git_repo', 'ref'), 'dev') };
    // An optional field emptied is left out: the server's default applies.
    rows[1] = { ...rows[1], spec: withField(rows[1].spec, field('git_repo', 'ref'), '') };
    expect(rows[1].spec).toEqual({ kind: 'git_repo', repo: 'o/r' });
    expect(fieldValue(rows[1].spec, field('git_repo', 'ref'))).toBe('');
    // Switches show the server's default until set.
    const s3 = withKind({ kind: 'dir' }, 's3_mount', ENTRY_FIELDS);
    expect(fieldValue(s3, field('s3_mount', 'read_only'))).toBe(true);
    expect(withField(s3, field('s3_mount', 'read_only'), false)).toEqual({ kind: 's3_mount', bucket: '', read_only: false });
    // Another kind keeps the fields it shares and drops the rest.
    expect(withKind({ kind: 'git_repo', repo: 'o/r', ref: 'x' }, 'file', ENTRY_FIELDS)).toEqual({ kind: 'file', content: '' });
    rows = rows.filter((_, i) => i !== 0);
    expect(entriesObject(rows)).toEqual({ ok: true, value: { repo: { kind: 'git_repo', repo: 'o/r' } } });
  });

  it('refuses to leave the rows while two share a path, and says why JSON cannot be rows', () => {
    const dup = entriesObject([
      { path: 'a', spec: { kind: 'dir' } },
      { path: 'a', spec: { kind: 'file', content: '' } },
    ]);
    expect(dup).toEqual({ ok: false, error: expect.stringMatching(/Two entries at "a"/) });
    expect(parseEntries('{"a": ')).toEqual({ ok: false, error: expect.stringMatching(/not valid JSON/) });
    expect(parseEntries('[]')).toEqual({ ok: false, error: expect.stringMatching(/object/) });
    expect(parseEntries('{"a": "dir"}')).toEqual({ ok: false, error: expect.stringMatching(/"a"/) });
    expect(parseEntries('')).toEqual({ ok: true, value: [] });
  });

  it('sends the rows, or the JSON view while it is shown, as the manifest', () => {
    const v = { ...emptyAgentForm(), slug: 'a', name: 'A', entries: entryRowsOf(MANIFEST) };
    expect(agentBody(v).manifest?.entries).toEqual(MANIFEST);
    const json = { ...v, entriesJson: '{"only": {"kind": "dir"}}' };
    expect(entriesOf(json)).toEqual({ ok: true, value: { only: { kind: 'dir' } } });
    expect(agentBody(json).manifest?.entries).toEqual({ only: { kind: 'dir' } });
    expect(entriesOf({ ...v, entriesJson: '{' }).ok).toBe(false);
  });
});

describe('the skills source as fields', () => {
  it('round-trips, edits fields and kinds, and is empty for none', () => {
    const src = { kind: 'bundle', bundle: 'pdf', version: 'latest', lazy: true };
    const parsed = parseSkillsSource(pretty(src));
    expect(parsed).toEqual({ ok: true, value: src });
    expect(skillsSourceJson((parsed as { value: Record<string, unknown> }).value)).toBe(pretty(src));
    // A version that is all digits is a number; `latest` stays a word.
    const pinned = withField(src, skillsField('bundle', 'version'), '3');
    expect(pinned.version).toBe(3);
    expect(fieldValue(pinned, skillsField('bundle', 'version'))).toBe('3');
    expect(withField(src, skillsField('bundle', 'version'), 'latest').version).toBe('latest');
    const git = withKind(src, 'git_repo', SKILLS_FIELDS);
    expect(git).toEqual({ kind: 'git_repo', repo: '' });
    expect(withField(git, skillsField('git_repo', 'ssh_key_id'), 'key-1')).toEqual({ kind: 'git_repo', repo: '', ssh_key_id: 'key-1' });
    expect(withKind(src, 'local_dir', SKILLS_FIELDS)).toEqual({ kind: 'local_dir', src: '', lazy: true });
    expect(parseSkillsSource('')).toEqual({ ok: true, value: null });
    expect(parseSkillsSource('null')).toEqual({ ok: true, value: null });
    expect(skillsSourceJson(null)).toBe('');
    expect(parseSkillsSource('{"kind":')).toEqual({ ok: false, error: expect.stringMatching(/not valid JSON/) });
  });
});

describe('bundleOfSkillsSource', () => {
  it('links the agent form to the bundle its skills source names', () => {
    expect(bundleOfSkillsSource('{"kind":"bundle","bundle":"voc-runtime","version":"latest"}')).toBe('voc-runtime');
    expect(bundleOfSkillsSource('{"kind":"git_repo","repo":"o/r"}')).toBeNull();
    expect(bundleOfSkillsSource('{"kind":"bundle","bundle":"Bad"}')).toBeNull();
    expect(bundleOfSkillsSource('{"kind":"bun')).toBeNull();
  });
});
