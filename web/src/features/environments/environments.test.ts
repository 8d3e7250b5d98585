import { describe, expect, it } from 'vitest';
import type { NetworkPolicy } from '../../lib/network';
import { buildLabel, configValues, emptyValues, entries, packageProblem, toConfig, validateEnvironment } from './environments';

describe('environment form', () => {
  it('takes packages one per line and keeps the manager order', () => {
    const v = { ...emptyValues(), name: 'data', packages: { ...emptyValues().packages, pip: 'six\n\n sqlalchemy==2.0.30 ', apt: 'jq' } };
    const c = toConfig(v);
    expect(c.packages).toEqual({ apt: ['jq'], cargo: [], gem: [], go: [], npm: [], pip: ['six', 'sqlalchemy==2.0.30'] });
    expect(c.image).toBeNull();
    expect(c.networking).toEqual({ type: 'unrestricted' });
    expect(configValues(c).packages.pip).toBe('six\nsqlalchemy==2.0.30');
    expect(entries('  ')).toEqual([]);
  });

  it('carries the network policy beside networking, as sent and read back', () => {
    const network: NetworkPolicy = { egress: 'allowlist', allow: ['pypi.org', ''], presets: ['package_managers'] };
    const c = toConfig({ ...emptyValues(), network });
    expect(c.network).toEqual({ egress: 'allowlist', allow: ['pypi.org'], presets: ['package_managers'] });
    expect(c.networking).toEqual({ type: 'unrestricted' });
    expect(configValues(c).network).toEqual({ egress: 'allowlist', allow: ['pypi.org'], presets: ['package_managers'] });
    // A configuration stored before policies existed reads as open.
    expect(configValues({ image: null, packages: {} } as unknown as Parameters<typeof configValues>[0]).network).toEqual({ egress: 'open', allow: [], presets: [] });
  });

  it('refuses what the server refuses before anything is sent', () => {
    expect(packageProblem('express@4.18.0')).toBeUndefined();
    expect(packageProblem('-e')).toMatch(/options/);
    expect(packageProblem('six;id')).toMatch(/character/);
    const e = validateEnvironment({ ...emptyValues(), name: ' ', image: 'a b', packages: { ...emptyValues().packages, npm: "it's" } });
    expect(Object.keys(e).sort()).toEqual(['image', 'name', 'npm']);
    expect(validateEnvironment({ ...emptyValues(), name: 'a/b' }).name).toMatch(/'\/'/);
  });

  it('says what each build state means', () => {
    expect(buildLabel({ status: 'failed', error: 'pip failed (exit code 1): nope' }).text).toContain('pip failed');
    expect(buildLabel({ status: 'none' }).color).toBe('gray');
    expect(buildLabel({ status: 'ready', image: 'sandbox-agents-env:abc' }).text).toContain('sandbox-agents-env:abc');
  });
});
