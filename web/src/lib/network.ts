// Network policies (`network` on agents, on an environment's configuration and on sessions):
// the shape the UI edits, the presets with what they hold, the server's entry rules
// (domain::network::parse_rule) as hints shown while an entry is typed, the body a policy is
// sent as, and a 422's messages routed to the entry they name. The server decides: a hint
// never stops a save, and its 422 is shown beside the entry it names.
import type { Schemas } from '../api/client';

/** What a sandbox may reach. */
export type Egress = Schemas['Egress'];
export const EGRESS: readonly Egress[] = ['open', 'allowlist', 'none'];

/** A policy as the editor holds it: every field present (the API's may leave empty ones out). */
export type NetworkPolicy = { egress: Egress; allow: string[]; presets: Preset[] };
/** A named list of hosts the server keeps (an enum of the API). */
export type Preset = NonNullable<Schemas['NetworkPolicy']['presets']>[number];

/** Which policy a layer of a session's network is. */
export type LayerSource = Schemas['LayerSource'];
export type NetworkLayer = { from: LayerSource; policy: NetworkPolicy };

/** At most this many `allow` entries (domain::network::MAX_ALLOW). */
export const MAX_ALLOW = 256;
/** The longest entry the server takes (domain::network::MAX_ENTRY). */
const MAX_ENTRY = 300;

/** What each egress means, for the control's labels and the help beside it. */
export const EGRESS_HELP: Record<Egress, string> = {
  open: 'The internet: any public address, never private, host or cloud-metadata ones.',
  allowlist: 'Only the hosts, addresses and presets listed below.',
  none: 'No network at all.',
};

/** Layers narrow: the sentence every editor and the session's layers say. */
export const LAYERS_HELP =
  'Policies narrow one another: a session’s connection must be allowed by its agent’s, its environment’s and its own policy. Whatever a policy says, the control plane, the host, other sandboxes, private and cloud-metadata addresses stay out of reach.';

type PresetInfo = { label: string; hosts: readonly string[]; includes?: readonly Preset[] };

/** What each preset is for and holds; a Record, so a preset the API adds fails the build here. */
const PRESET_INFO: Record<Preset, PresetInfo> = {
  package_managers: { label: 'PyPI, npm, crates.io, Go modules, Debian and Ubuntu mirrors', hosts: [], includes: ['pypi', 'npm', 'crates', 'go', 'debian', 'ubuntu'] },
  pypi: { label: 'PyPI', hosts: ['pypi.org', 'files.pythonhosted.org', '*.pythonhosted.org'] },
  npm: { label: 'npm', hosts: ['registry.npmjs.org', 'registry.yarnpkg.com'] },
  crates: { label: 'crates.io and Rust toolchains', hosts: ['crates.io', 'index.crates.io', 'static.crates.io', 'static.rust-lang.org'] },
  go: { label: 'Go modules', hosts: ['proxy.golang.org', 'sum.golang.org', 'storage.googleapis.com'] },
  debian: { label: 'Debian mirrors', hosts: ['deb.debian.org', 'security.debian.org', 'ftp.debian.org'] },
  ubuntu: { label: 'Ubuntu mirrors', hosts: ['archive.ubuntu.com', '*.archive.ubuntu.com', 'security.ubuntu.com', 'ports.ubuntu.com'] },
  github: { label: 'GitHub', hosts: ['github.com', '*.github.com', '*.githubusercontent.com'] },
};

/**
 * The presets and the hosts each holds, in domain::network's order (`package_managers`
 * first: the group of the registries). network.test.ts holds the hosts to the Rust ones.
 */
export const PRESETS: readonly ({ name: Preset } & PresetInfo)[] = (Object.keys(PRESET_INFO) as Preset[]).map((name) => ({ name, ...PRESET_INFO[name] }));

/** The hosts of a preset, a group's flattened. */
export function presetHosts(name: Preset): string[] {
  const p = PRESET_INFO[name];
  return [...p.hosts, ...(p.includes ?? []).flatMap(presetHosts)];
}

export function defaultPolicy(): NetworkPolicy {
  return { egress: 'open', allow: [], presets: [] };
}

/** A policy from the API (fields may be missing; null or undefined is the default, open). */
export function policyOf(p: Partial<Schemas['NetworkPolicy']> | null | undefined): NetworkPolicy {
  return { egress: p?.egress ?? 'open', allow: [...(p?.allow ?? [])], presets: [...(p?.presets ?? [])] };
}

/**
 * The policy as it is sent: entries trimmed and blank rows dropped; with `open` or `none`
 * the list and presets are sent empty, as the server requires (it refuses them there, since
 * they would mean nothing).
 */
export function policyBody(p: NetworkPolicy): NetworkPolicy {
  if (p.egress !== 'allowlist') return { egress: p.egress, allow: [], presets: [] };
  return { egress: 'allowlist', allow: p.allow.map((e) => e.trim()).filter(Boolean), presets: [...p.presets] };
}

/** The same policy, as sent (for "is there anything to save?"). */
export function samePolicy(a: NetworkPolicy, b: NetworkPolicy): boolean {
  return JSON.stringify(policyBody(a)) === JSON.stringify(policyBody(b));
}

const ENTRY_HELP = 'an entry is a host name (pypi.org), a wildcard (*.pythonhosted.org), an address or CIDR (203.0.113.0/24, [2001:db8::/32]), optionally with :port';

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

function isIpv6(text: string): boolean {
  if (!text.includes(':') || !/^[0-9a-fA-F:.]+$/.test(text)) return false;
  try {
    return new URL(`http://[${text}]/`).hostname !== '';
  } catch {
    return false;
  }
}

/** An address or a network (`203.0.113.0/24`, `2001:db8::/32`), as ipnet parses them. */
function isAddressOrNet(text: string): boolean {
  const [addr, prefix, ...rest] = text.split('/');
  if (rest.length) return false;
  const v4 = IPV4.test(addr);
  if (!v4 && !isIpv6(addr)) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (v4 ? 32 : 128);
}

/** A DNS name as domain::network::is_host_name has it. */
function isHostName(name: string): boolean {
  return name.length > 0 && name.length <= 253 && name.split('.').every((l) => l.length > 0 && l.length <= 63 && !l.startsWith('-') && !l.endsWith('-') && /^[A-Za-z0-9_-]+$/.test(l));
}

function targetOk(t: string): boolean {
  if (isAddressOrNet(t)) return true;
  let lower = t.toLowerCase();
  if (lower.endsWith('.')) lower = lower.slice(0, -1);
  if (lower.startsWith('*.')) {
    const suffix = lower.slice(2);
    // `*.com` would open a whole top-level domain: the server wants two labels under a wildcard.
    return isHostName(suffix) && suffix.includes('.');
  }
  const numeric = lower.split('.').every((l) => /^\d*$/.test(l));
  return isHostName(lower) && !numeric;
}

/**
 * Why the server would refuse an `allow` entry (its own sentence), or null: the rules of
 * domain::network::parse_rule, so the hint and the 422 agree.
 */
export function entryProblem(entry: string): string | null {
  const text = entry.trim();
  if (text === '' || text.length > MAX_ENTRY) return `'${entry}' is not an entry: ${ENTRY_HELP}`;
  const portOf = (p: string) => (/^\d+$/.test(p) && Number(p) >= 1 && Number(p) <= 65535 ? null : `'${text}' has port '${p}': a port is a number from 1 to 65535`);
  let target = text;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return `'${text}' opens a '[' it does not close`;
    target = text.slice(1, close);
    const after = text.slice(close + 1);
    if (after !== '') {
      if (!after.startsWith(':')) return `'${text}' has '${after}' after its address: ${ENTRY_HELP}`;
      const bad = portOf(after.slice(1));
      if (bad) return bad;
    }
  } else {
    const colon = text.lastIndexOf(':');
    // A bare IPv6 address has several colons; it takes no port unless bracketed.
    if (colon >= 0 && !text.slice(0, colon).includes(':')) {
      const bad = portOf(text.slice(colon + 1));
      if (bad) return bad;
      target = text.slice(0, colon);
    }
  }
  return targetOk(target) ? null : `'${entry}' is not an entry: ${ENTRY_HELP}`;
}

/** The host part of an entry, lower case, for comparing it with presets' hosts. */
function hostOf(entry: string): string {
  const t = entry.trim().toLowerCase();
  const colon = t.lastIndexOf(':');
  const host = colon >= 0 && !t.slice(0, colon).includes(':') ? t.slice(0, colon) : t;
  return host.endsWith('.') ? host.slice(0, -1) : host;
}

/** What a person may want to know about an entry that the server accepts; null when nothing. */
export function entryNote(entry: string, policy: NetworkPolicy, index: number): string | null {
  const text = entry.trim();
  if (!text || entryProblem(text)) return null;
  const host = hostOf(text);
  if (policy.allow.findIndex((e) => e.trim() === text) < index) return 'Listed above already.';
  const preset = policy.presets.find((p) => presetHosts(p).includes(host));
  if (preset && !text.includes(':')) return `The ${preset} preset has it already.`;
  if (host.startsWith('*.')) return `Any name under ${host.slice(2)}, not ${host.slice(2)} itself: list that too if it is needed.`;
  return null;
}

/** Hints on the whole policy (what it allows as sent), for the editor to show above the list. */
export function policyNotes(p: NetworkPolicy): string[] {
  const notes: string[] = [];
  const filled = p.allow.filter((e) => e.trim());
  if (p.egress === 'allowlist' && filled.length === 0 && p.presets.length === 0) notes.push('An empty allowlist allows nothing: add entries or presets, or choose none.');
  if (p.egress !== 'allowlist' && (filled.length > 0 || p.presets.length > 0)) notes.push(`With ${p.egress}, the entries and presets below are not used: saving clears them.`);
  if (filled.length > MAX_ALLOW) notes.push(`At most ${MAX_ALLOW} entries; this list has ${filled.length}.`);
  return notes;
}

/** An editor's errors: `egress`, `allow`, `allow.<i>`, `presets`, as the server names them under the policy. */
export type NetworkErrors = Record<string, string>;

/**
 * The field errors under `prefix` (`network`, `config.network`), keyed below it: a 422's
 * `network.allow.1` is the editor's `allow.1`. Indexes are those of the policy as sent, so
 * `sent` (the editor's policy when it was saved, blank rows included) maps them back onto
 * the rows the person sees; with `current`, an entry's error goes once its row is edited.
 */
export function networkErrorsOf(fields: Record<string, string>, prefix: string, sent?: NetworkPolicy, current?: NetworkPolicy): NetworkErrors {
  const rows = sent ? sent.allow.flatMap((e, i) => (e.trim() ? [i] : [])) : null;
  const out: NetworkErrors = {};
  for (const [key, msg] of Object.entries(fields)) {
    if (key !== prefix && !key.startsWith(`${prefix}.`)) continue;
    let rest = key === prefix ? '' : key.slice(prefix.length + 1);
    const m = /^allow\.(\d+)$/.exec(rest);
    if (m) {
      const row = rows ? (rows[Number(m[1])] ?? Number(m[1])) : Number(m[1]);
      if (sent && current && current.allow[row] !== sent.allow[row]) continue;
      rest = `allow.${row}`;
    }
    out[rest || 'egress'] = msg;
  }
  return out;
}

/** A policy as one short line: `open`, `none`, or `allowlist: pypi, github.com:443 (+3)`. */
export function policySummary(p: NetworkPolicy, max = 3): string {
  if (p.egress !== 'allowlist') return p.egress;
  const items = [...p.presets.map((x) => `${x} preset`), ...p.allow];
  if (items.length === 0) return 'allowlist: nothing';
  const shown = items.slice(0, max).join(', ');
  return `allowlist: ${shown}${items.length > max ? ` (+${items.length - max})` : ''}`;
}
