// An agent's versions (openapi.json's `AgentVersionSummary`, `AgentVersion`, `VersionPin`):
// every accepted create or edit is an immutable version, numbered 1, 2, 3… with no gaps, so the
// numbers 1 to the agent's `version` are all of them. How a version's author and changes are
// said, the text two versions are compared on, where a version is on the History tab, and the
// "Agent version" choice of a new session (current, "latest", or an older number).
import type { Agent, Schemas } from '../api/client';

export type AgentVersionSummary = Schemas['AgentVersionSummary'];
export type ChangedBy = Schemas['ChangedBy'];
export type VersionPin = Schemas['VersionPin'];

/** Rows a page of the History tab shows. */
export const HISTORY_PAGE = 20;

/**
 * Fields of an `Agent` that are not its definition: the same in every version (`id`,
 * `created_at`), the version's own bookkeeping (`version`, `updated_at`), or the agent's state
 * now rather than the version's (`archived_at`). Left out of a comparison: they are noise.
 */
export const NOT_COMPARED = ['id', 'created_at', 'updated_at', 'version', 'archived_at'] as const;

/** The definition of `agent` as pretty-printed JSON (two spaces), without the fields of
 * NOT_COMPARED, in the order the server gives: the text two versions are compared on. */
export function definitionText(agent: Agent): string {
  const rest: Record<string, unknown> = { ...agent };
  for (const k of NOT_COMPARED) delete rest[k];
  return `${JSON.stringify(rest, null, 2)}\n`;
}

/** The top-level fields of the definition that differ between `a` and `b`, sorted (the
 * server's `changed`, for any two versions). */
export function differingFields(a: Agent, b: Agent): string[] {
  const ra = a as unknown as Record<string, unknown>;
  const rb = b as unknown as Record<string, unknown>;
  const skip: readonly string[] = NOT_COMPARED;
  const fields = new Set([...Object.keys(ra), ...Object.keys(rb)].filter((k) => !skip.includes(k)));
  return [...fields].filter((k) => JSON.stringify(ra[k] ?? null) !== JSON.stringify(rb[k] ?? null)).sort();
}

/** Who made a version, in words: the kind of credential, and its name when it has one (a
 * person's email, an API key's name, as they were then). */
export function changedByParts(by: ChangedBy | null | undefined): { kind: string; name: string | null } {
  if (!by) return { kind: 'unknown', name: null };
  const name = by.name || by.id || null;
  switch (by.kind) {
    case 'user':
      return { kind: 'person', name };
    case 'api_key':
      return { kind: 'API key', name };
    case 'token':
      return { kind: 'deployment token', name: null };
    case 'open':
      return { kind: 'open mode', name: null };
    default:
      return { kind: by.kind || 'unknown', name };
  }
}

/** `changedByParts` as one phrase: "person ada@example.com", "API key ci", "open mode". */
export function changedByLabel(by: ChangedBy | null | undefined): string {
  const { kind, name } = changedByParts(by);
  return name ? `${kind} ${name}` : kind;
}

/** What a version changed, in words: "created" for the first, the fields it changed, or "no
 * changes" for an edit that changed nothing. A restore says which version it brought back. */
export function changesText(v: Pick<AgentVersionSummary, 'version' | 'changed' | 'restored_from'>): string {
  const restored = v.restored_from != null ? `restored from v${v.restored_from}` : null;
  const what = v.version === 1 ? 'created' : v.changed.length ? v.changed.join(', ') : 'no changes';
  return restored ? `${restored}: ${what}` : what;
}

/** How a session's `agent_version` is said: "agent v3", or "agent latest" (it follows edits). */
export function pinLabel(pin: VersionPin | null | undefined): string | null {
  if (pin == null) return null;
  return pin === 'latest' ? 'agent latest' : `agent v${pin}`;
}

/** The agent page's History tab, at `version` when given (as a link: a path and a query). */
export function historyPath(slug: string, version?: number | null): string {
  return `/agents/${encodeURIComponent(slug)}?tab=history${version != null ? `&version=${version}` : ''}`;
}

/** The `version` of the URL when it names one of the agent's (a whole number 1 to `current`),
 * else null. */
export function parseVersion(value: string | null | undefined, current: number): number | null {
  if (value == null || !/^\d+$/.test(value.trim())) return null;
  const n = Number(value.trim());
  return n >= 1 && n <= current ? n : null;
}

/** The page of the History tab (1-based, newest first, `size` a page) that lists `version`. */
export function pageOfVersion(version: number, current: number, size = HISTORY_PAGE): number {
  return Math.floor(Math.max(0, current - version) / size) + 1;
}

/** What the History tab compares first: `focus` (a version named by the URL) against the
 * current one, else the one before the current against it; null while there is one version. */
export function defaultComparison(current: number, focus: number | null = null): { from: number; to: number } | null {
  if (focus != null && focus >= 1 && focus < current) return { from: focus, to: current };
  return current < 2 ? null : { from: current - 1, to: current };
}

/** The choice of "Agent version" when a session starts: the agent's current version (the
 * server's default: pinned to it), "latest" (follows every edit), or an older one's number. */
export type VersionChoice = 'current' | 'latest' | `${number}`;

/** The body's `agent_version` for a choice: left out for the current one, else the pin. */
export function versionChoiceBody(choice: string | null | undefined): VersionPin | undefined {
  if (!choice || choice === 'current') return undefined;
  if (choice === 'latest') return 'latest';
  const n = Number(choice);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}

/** The options of "Agent version": the current version (pinned), latest, then the older
 * versions listed (newest first), each with what it changed. */
export function versionChoices(current: number | null, versions: AgentVersionSummary[]): { value: string; label: string }[] {
  const older = versions.filter((v) => current == null || v.version < current).sort((a, b) => b.version - a.version);
  return [
    { value: 'current', label: current != null ? `Current: v${current} (pinned)` : 'Current (pinned)' },
    { value: 'latest', label: 'Latest (follows every edit)' },
    ...older.map((v) => ({ value: String(v.version), label: `v${v.version} (${changesText(v)})` })),
  ];
}

/** The options for moving a running session to another version: latest, then each version
 * listed (newest first, the newest marked current), and the session's own pin even when it is
 * older than those listed. */
export function sessionVersionChoices(pin: VersionPin, versions: AgentVersionSummary[]): { value: string; label: string }[] {
  const listed = [...versions].sort((a, b) => b.version - a.version);
  const newest = listed[0]?.version ?? null;
  const options = listed.map((v) => ({ value: String(v.version), label: v.version === newest ? `v${v.version} (current)` : `v${v.version} (${changesText(v)})` }));
  if (typeof pin === 'number' && !listed.some((v) => v.version === pin)) options.push({ value: String(pin), label: `v${pin}` });
  return [{ value: 'latest', label: 'Latest (follows every edit)' }, ...options];
}
