// The agent's manifest entries and skills source as rows of fields, the JSON still there as the
// "advanced" view. Kinds and fields follow openapi.json's EntrySpec and SkillsSource (a kind
// the schema adds and these tables lack fails the type check). A row keeps every field it was
// given, known here or not, so a JSON → rows → JSON round trip returns what went in; an empty
// optional field is left out, so the server's default applies.
import type { Schemas } from '../../api/client';
import { SLUG_RE, validateEntryPath } from '../../lib/rules';

export type EntryKind = Schemas['EntrySpec']['kind'];
export type SkillsKind = Schemas['SkillsSource']['kind'];

export type FieldSpec = {
  name: string;
  label: string;
  /** text: a string; textarea: a long string; bool: a switch; version: `latest` or a number. */
  type: 'text' | 'textarea' | 'bool' | 'version';
  required?: boolean;
  placeholder?: string;
  /** A switch's value when the field is absent (the server's default). */
  defaultValue?: boolean;
};

const text = (name: string, label: string, placeholder?: string, required = false): FieldSpec => ({ name, label, type: 'text', placeholder, required });
const bool = (name: string, label: string, defaultValue: boolean): FieldSpec => ({ name, label, type: 'bool', defaultValue });

export const ENTRY_FIELDS: Record<EntryKind, FieldSpec[]> = {
  file: [{ name: 'content', label: 'Content', type: 'textarea', required: true }],
  dir: [],
  git_repo: [text('repo', 'Repository', 'owner/name', true), text('ref', 'Ref', 'main'), text('host', 'Host', 'github.com'), text('subpath', 'Subpath', 'the whole repository')],
  local_dir: [text('src', 'Host directory', '/absolute/path', true)],
  s3_mount: [text('bucket', 'Bucket', 'bucket-name', true), text('prefix', 'Prefix', 'the whole bucket'), bool('read_only', 'Read-only', true), bool('acknowledge_credential_exposure', 'The sandbox may see the credentials', false)],
};
export const ENTRY_KINDS = Object.keys(ENTRY_FIELDS) as EntryKind[];

export const SKILLS_FIELDS: Record<SkillsKind, FieldSpec[]> = {
  git_repo: [text('repo', 'Repository', 'owner/name', true), text('ref', 'Ref', 'main'), text('host', 'Host', 'github.com'), text('subpath', 'Subpath', 'the repository root'), text('ssh_key_id', 'Git key', 'none (a public repository)')],
  local_dir: [text('src', 'Host directory', '/absolute/path', true), text('subpath', 'Subpath', 'the directory itself'), bool('lazy', 'Lazy (index first, load each skill on demand)', true)],
  bundle: [text('bundle', 'Bundle', 'slug', true), { name: 'version', label: 'Version', type: 'version', placeholder: 'latest' }, text('subpath', 'Subpath', 'the bundle root'), bool('lazy', 'Lazy (index first, load each skill on demand)', true)],
};
export const SKILLS_KINDS = Object.keys(SKILLS_FIELDS) as SkillsKind[];

/** One manifest entry: its workspace path and its spec as given (`kind` and any field). */
export type EntryRow = { path: string; spec: Record<string, unknown> };
export type Spec = Record<string, unknown>;
type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

export function isObject(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

export const pretty = (v: unknown) => JSON.stringify(v, null, 2);

export function entryRowsOf(entries: Record<string, unknown>): EntryRow[] {
  return Object.entries(entries).map(([path, spec]) => ({ path, spec: isObject(spec) ? { ...spec } : { kind: spec } }));
}

/** The advanced view's text as rows, or why it cannot be shown as rows. */
export function parseEntries(json: string): Parsed<EntryRow[]> {
  let v: unknown;
  try {
    v = JSON.parse(json.trim() === '' ? '{}' : json);
  } catch (e) {
    return { ok: false, error: `not valid JSON: ${(e as Error).message}` };
  }
  if (!isObject(v)) return { ok: false, error: 'An object of workspace path → entry.' };
  const bad = Object.entries(v).find(([, spec]) => !isObject(spec));
  if (bad) return { ok: false, error: `"${bad[0]}": an entry is an object with a kind.` };
  return { ok: true, value: entryRowsOf(v) };
}

/** The rows as the manifest's `entries`; refused while two rows share a path (one would be lost). */
export function entriesObject(rows: EntryRow[]): Parsed<Record<string, Spec>> {
  const out: Record<string, Spec> = {};
  for (const r of rows) {
    if (Object.prototype.hasOwnProperty.call(out, r.path)) return { ok: false, error: `Two entries at "${r.path}": give each its own path first.` };
    out[r.path] = r.spec;
  }
  return { ok: true, value: out };
}

/** A new row: a directory at the first free `new-entry`, `new-entry-2`, … path. */
export function newEntryRow(rows: EntryRow[]): EntryRow {
  const taken = new Set(rows.map((r) => r.path));
  let path = 'new-entry';
  for (let i = 2; taken.has(path); i++) path = `new-entry-${i}`;
  return { path, spec: { kind: 'dir' } };
}

/** What a field's input shows. */
export function fieldValue(spec: Spec, f: FieldSpec): string | boolean {
  const v = spec[f.name];
  if (f.type === 'bool') return typeof v === 'boolean' ? v : (f.defaultValue ?? false);
  return v === undefined || v === null ? '' : String(v);
}

/** The spec with a field set from its input: an empty optional field is left out (the
 * server's default), a version that is all digits is a number. */
export function withField(spec: Spec, f: FieldSpec, input: string | boolean): Spec {
  const out = { ...spec };
  if (f.type === 'bool') out[f.name] = !!input;
  else if (input === '' && !f.required) delete out[f.name];
  else if (f.type === 'version' && /^\d+$/.test(String(input))) out[f.name] = Number(input);
  else out[f.name] = String(input);
  return out;
}

/** The spec as another kind: the fields the new kind also has are kept, the others dropped. */
export function withKind(spec: Spec, kind: string, table: Record<string, FieldSpec[]>): Spec {
  const keep = new Set((table[kind] ?? []).map((f) => f.name));
  const out: Spec = { kind };
  for (const [k, v] of Object.entries(spec)) if (keep.has(k)) out[k] = v;
  for (const f of table[kind] ?? []) if (f.required && !(f.name in out)) out[f.name] = '';
  return out;
}

/** Fields of a spec that this form has no input for (kept as they are; edited in the JSON). */
export function otherFields(spec: Spec, table: Record<string, FieldSpec[]>): string[] {
  const known = new Set(['kind', ...(table[String(spec.kind)] ?? []).map((f) => f.name)]);
  return Object.keys(spec).filter((k) => !known.has(k));
}

/** What is wrong with one spec, as (field, message) pairs; none when the server would take it. */
export function specProblems(spec: Spec, table: Record<string, FieldSpec[]>): [string, string][] {
  const fields = table[String(spec.kind)];
  if (!fields) return [['kind', `kind must be one of ${Object.keys(table).join(', ')}.`]];
  const out: [string, string][] = [];
  for (const f of fields) {
    if (f.required && (typeof spec[f.name] !== 'string' || (spec[f.name] as string).trim() === '')) out.push([f.name, `a ${spec.kind} needs ${f.label.toLowerCase()} ("${f.name}").`]);
  }
  if (typeof spec.src === 'string' && spec.src !== '' && !spec.src.startsWith('/')) out.push(['src', 'src must be an absolute path.']);
  return out;
}

/** Every row's errors, keyed `entries.<i>.path` and `entries.<i>.<field>`. */
export function entryRowErrors(rows: EntryRow[]): Record<string, string> {
  const e: Record<string, string> = {};
  const seen = new Set<string>();
  rows.forEach((r, i) => {
    const pe = validateEntryPath(r.path);
    if (pe) e[`entries.${i}.path`] = `The path ${pe}.`;
    else if (seen.has(r.path)) e[`entries.${i}.path`] = 'Another entry has this path.';
    seen.add(r.path);
    for (const [field, msg] of specProblems(r.spec, ENTRY_FIELDS)) e[`entries.${i}.${field}`] = msg;
  });
  return e;
}

/** The skills source's JSON (empty: none) as a spec, or why it cannot be shown as fields. */
export function parseSkillsSource(json: string): Parsed<Spec | null> {
  if (json.trim() === '') return { ok: true, value: null };
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    return { ok: false, error: `not valid JSON: ${(e as Error).message}` };
  }
  if (v === null) return { ok: true, value: null };
  if (!isObject(v)) return { ok: false, error: 'An object, or empty for none.' };
  return { ok: true, value: v };
}

export const skillsSourceJson = (spec: Spec | null) => (spec ? pretty(spec) : '');

/** The bundle an agent form's skills source (JSON text) names, when its kind is `bundle`. */
export function bundleOfSkillsSource(text: string): string | null {
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      if (o.kind === 'bundle' && typeof o.bundle === 'string' && SLUG_RE.test(o.bundle)) return o.bundle;
    }
  } catch {
    /* not JSON (yet): no link */
  }
  return null;
}
