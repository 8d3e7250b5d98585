import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SRC } from '../test/sources';
import { entryNote, entryProblem, networkErrorsOf, policyBody, policyNotes, policyOf, policySummary, PRESETS, presetHosts, type NetworkPolicy, type Preset } from './network';

const RUST = readFileSync(join(SRC, '../../crates/domain/src/network.rs'), 'utf8');

/** `(name, &[hosts])` pairs of a Rust table (`PRESETS` or `PRESET_GROUPS`). */
function rustTable(name: string): Record<string, string[]> {
  const body = new RegExp(`const ${name}: [^=]*= &\\[([\\s\\S]*?)\\];\\n`).exec(RUST)?.[1] ?? '';
  const out: Record<string, string[]> = {};
  for (const m of body.matchAll(/\(\s*"([a-z_]+)",\s*&\[([^\]]*)\]/g)) out[m[1]] = [...m[2].matchAll(/"([^"]+)"/g)].map((h) => h[1]);
  return out;
}

describe('presets', () => {
  it('are the server’s, host for host', () => {
    const hosts = rustTable('PRESETS');
    const groups = rustTable('PRESET_GROUPS');
    expect(Object.keys(hosts).length).toBeGreaterThan(5);
    expect(PRESETS.map((p) => p.name)).toEqual([...Object.keys(groups), ...Object.keys(hosts)]);
    for (const [name, list] of Object.entries(hosts)) expect(presetHosts(name as Preset), name).toEqual(list);
    for (const [name, members] of Object.entries(groups)) expect(presetHosts(name as Preset), name).toEqual(members.flatMap((m) => hosts[m]));
  });
});

describe('entryProblem', () => {
  it('accepts what the server parses', () => {
    for (const ok of ['pypi.org', 'PyPI.org.', '*.pythonhosted.org', 'github.com:443', '203.0.113.0/24', '203.0.113.9', '203.0.113.0/24:8443', '[2001:db8::/32]', '[2001:db8::/32]:8443', '2001:db8::1', 'my_host.internal', 'localhost']) {
      expect(entryProblem(ok), ok).toBeNull();
    }
  });

  it('refuses what the server refuses, in its words', () => {
    // The server's own list of bad entries (network.rs, entries_parse_into_…).
    for (const bad of ['', '*', '*.com', 'a..b', '-a.com', 'host:0', 'host:70000', 'host:x', '[::1', '10.0.0.300', 'a b', '*.*.x.org', '203.0.113.0/33']) {
      expect(entryProblem(bad), bad).not.toBeNull();
    }
    expect(entryProblem('host:70000')).toBe("'host:70000' has port '70000': a port is a number from 1 to 65535");
    expect(entryProblem('[::1')).toBe("'[::1' opens a '[' it does not close");
    expect(entryProblem('*.com')).toMatch(/^'\*\.com' is not an entry: an entry is a host name/);
  });
});

describe('a policy as sent', () => {
  it('drops blank rows, and sends open and none without entries or presets', () => {
    expect(policyBody({ egress: 'allowlist', allow: [' pypi.org ', '', 'github.com'], presets: ['npm'] })).toEqual({ egress: 'allowlist', allow: ['pypi.org', 'github.com'], presets: ['npm'] });
    expect(policyBody({ egress: 'open', allow: ['pypi.org'], presets: ['npm'] })).toEqual({ egress: 'open', allow: [], presets: [] });
    expect(policyOf(null)).toEqual({ egress: 'open', allow: [], presets: [] });
    expect(policyOf({ egress: 'none' })).toEqual({ egress: 'none', allow: [], presets: [] });
  });

  it('says what it leaves out and what an empty allowlist means', () => {
    expect(policyNotes({ egress: 'allowlist', allow: [''], presets: [] })).toEqual(['An empty allowlist allows nothing: add entries or presets, or choose none.']);
    expect(policyNotes({ egress: 'none', allow: ['x.org'], presets: [] })[0]).toMatch(/With none, the entries and presets below are not used/);
    expect(policyNotes({ egress: 'allowlist', allow: ['x.org'], presets: [] })).toEqual([]);
  });

  it('notes repeats, hosts a chosen preset has and what a wildcard leaves out', () => {
    const p: NetworkPolicy = { egress: 'allowlist', allow: ['x.org', 'pypi.org', 'x.org', '*.example.com', 'bad name'], presets: ['package_managers'] };
    expect(p.allow.map((e, i) => entryNote(e, p, i))).toEqual([null, 'The package_managers preset has it already.', 'Listed above already.', 'Any name under example.com, not example.com itself: list that too if it is needed.', null]);
  });

  it('is summed up in a line', () => {
    expect(policySummary({ egress: 'open', allow: [], presets: [] })).toBe('open');
    expect(policySummary({ egress: 'allowlist', allow: ['a.org', 'b.org', 'c.org'], presets: ['github'] })).toBe('allowlist: github preset, a.org, b.org (+1)');
    expect(policySummary({ egress: 'allowlist', allow: [], presets: [] })).toBe('allowlist: nothing');
  });
});

describe('networkErrorsOf', () => {
  it('keeps the errors under its prefix, keyed below it', () => {
    const fields = { 'network.allow.1': 'bad', 'network.presets': 'unknown preset', network: 'whole', name: 'other', 'config.network.egress': 'x' };
    expect(networkErrorsOf(fields, 'network')).toEqual({ 'allow.1': 'bad', presets: 'unknown preset', egress: 'whole' });
    expect(networkErrorsOf(fields, 'config.network')).toEqual({ egress: 'x' });
  });

  it('maps an index of the sent list back onto the row it came from, blank rows skipped', () => {
    const sent = { egress: 'allowlist' as const, allow: ['a.org', '', 'bad name'], presets: [] };
    expect(networkErrorsOf({ 'network.allow.1': 'bad' }, 'network', sent)).toEqual({ 'allow.2': 'bad' });
    expect(networkErrorsOf({ 'network.allow.1': 'bad' }, 'network', sent, sent)).toEqual({ 'allow.2': 'bad' });
    // Edited since (or moved by a row removed above it): the message no longer applies.
    expect(networkErrorsOf({ 'network.allow.1': 'bad' }, 'network', sent, { ...sent, allow: ['a.org', '', 'fixed.org'] })).toEqual({});
    expect(networkErrorsOf({ 'network.allow.1': 'bad' }, 'network', sent, { ...sent, allow: ['', 'bad name'] })).toEqual({});
  });
});
