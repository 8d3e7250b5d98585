// What a sandbox backend can do (`capabilities` of `GET /api/backends`), in words a developer
// reads: one row per field the server sends. The known fields have their sentences here; a
// field the server adds later still gets a row under its own name, so a new capability shows
// up without an edit here. Pure (no React), so the card and the end-to-end test read the same
// rows.
import type { Schemas } from '../../api/client';

export type BackendInfo = Schemas['BackendInfo'];

/** `yes` and `no` for a boolean; `partly` for snapshots of the workspace alone; `value` for a field shown as its value. */
export type Mark = 'yes' | 'no' | 'partly' | 'value';

export type CapabilityRow = {
  /** The field of `capabilities` this row shows. */
  field: string;
  label: string;
  /** What it means for a session, or null for a field this UI does not know. */
  hint: string | null;
  mark: Mark;
  /** The field's value as text, for a `value` row (a string or number the server sent). */
  value?: string;
};

type Known = { label: string; hint: string };

/** The boolean capabilities this UI knows, in the order the card lists them (after snapshots). */
const BOOLEANS: Record<string, Known> = {
  image_builds: {
    label: 'Environment image builds',
    hint: 'An environment that lists packages is built into an image once, and its sessions start from it.',
  },
  daemon: {
    label: 'Terminals and background processes',
    hint: 'Each sandbox runs the sandbox daemon: the terminal, background processes, and command output as it is written.',
  },
  warm_pool: {
    label: 'Warm pool',
    hint: 'Sessions can start from sandboxes started ahead of time, instead of waiting for one to boot.',
  },
  disk_measurement: {
    label: 'Disk limit enforced',
    hint: 'What a sandbox writes is measured, so a session past its disk limit is stopped.',
  },
  isolation: {
    label: 'Isolated by the kernel',
    hint: 'Each sandbox runs in namespaces of its own, without privileges, held to its CPU, memory and process limits. Only a test backend lacks it.',
  },
};

function snapshotRow(value: unknown): CapabilityRow {
  if (value === 'image') {
    return {
      field: 'snapshots',
      label: 'Snapshots keep installed packages',
      hint: "A snapshot saves an image of the sandbox's filesystem beside the workspace, so a fork starts with what was installed.",
      mark: 'yes',
    };
  }
  if (value === 'archive_only') {
    return {
      field: 'snapshots',
      label: 'Snapshots keep the workspace only',
      hint: 'A snapshot saves the workspace files; packages installed outside it are not kept, so put them in an environment.',
      mark: 'partly',
    };
  }
  return { field: 'snapshots', label: 'Snapshots', hint: null, mark: 'value', value: String(value) };
}

function unknownRow(field: string, value: unknown): CapabilityRow {
  if (typeof value === 'boolean') return { field, label: field, hint: null, mark: value ? 'yes' : 'no' };
  return { field, label: field, hint: null, mark: 'value', value: typeof value === 'string' ? value : JSON.stringify(value) };
}

/** The rows of one backend's capabilities: snapshots, the known booleans, then any other field in the server's order. */
export function capabilityRows(capabilities: BackendInfo['capabilities']): CapabilityRow[] {
  const fields = capabilities as Record<string, unknown>;
  const rows: CapabilityRow[] = [];
  if ('snapshots' in fields) rows.push(snapshotRow(fields.snapshots));
  for (const [field, known] of Object.entries(BOOLEANS)) {
    if (!(field in fields)) continue;
    const value = fields[field];
    rows.push(typeof value === 'boolean' ? { field, ...known, mark: value ? 'yes' : 'no' } : unknownRow(field, value));
  }
  for (const [field, value] of Object.entries(fields)) {
    if (field !== 'snapshots' && !(field in BOOLEANS)) rows.push(unknownRow(field, value));
  }
  return rows;
}
