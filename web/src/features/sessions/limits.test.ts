import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/client';
import { emptyLimits, idleTtlText, lifetimeEnded, limitsBody, resourcesText, validateLimits } from './limits';
import { emptyStartSession, fieldErrorsOf, sectionsWithErrors, validateStartSession } from './startSession';

const limits = (v: Partial<ReturnType<typeof emptyLimits>>) => ({ ...emptyLimits(), ...v });

describe('validateLimits', () => {
  it('takes every field empty, and values in range', () => {
    expect(validateLimits(emptyLimits())).toEqual({});
    expect(validateLimits(limits({ idle_ttl_seconds: '0', max_lifetime_seconds: '1', cpus: '0.5', memory_mb: '64', disk_mb: '16' }))).toEqual({});
    expect(validateLimits(limits({ idle_ttl_seconds: '31536000', max_lifetime_seconds: '31536000', cpus: '16', memory_mb: '65536' }))).toEqual({});
  });
  it('checks each as SessionCreate does', () => {
    const e = validateLimits(limits({ idle_ttl_seconds: '-1', max_lifetime_seconds: '0', cpus: '0', memory_mb: '63', disk_mb: '15' }));
    expect(Object.keys(e).sort()).toEqual(['idle_ttl_seconds', 'max_lifetime_seconds', 'resources.cpus', 'resources.disk_mb', 'resources.memory_mb']);
    expect(e.idle_ttl_seconds).toMatch(/0 \(never released\)/);
    expect(e['resources.memory_mb']).toMatch(/at least 64/);
    expect(Object.keys(validateLimits(limits({ idle_ttl_seconds: '1.5', max_lifetime_seconds: '31536001', cpus: 'x', memory_mb: '100.5' })))).toHaveLength(4);
  });
  it('is part of the dialog’s check, and unfolds the section that holds the error', () => {
    const e = validateStartSession({ ...emptyStartSession('a'), memory_mb: '10' });
    expect(e).toEqual({ 'resources.memory_mb': 'Whole MiB, at least 64.' });
    expect(sectionsWithErrors(e)).toEqual(['limits']);
    expect(sectionsWithErrors({ model: 'x', 'resources.cpus': 'y', agent_id: 'z' })).toEqual(['advanced', 'limits']);
    expect(sectionsWithErrors({ agent_id: 'z' })).toEqual([]);
  });
  it('takes a 422 on a resource onto its field', () => {
    const err = new ApiError(422, 'x', { detail: [{ loc: ['body', 'resources', 'cpus'], msg: 'cpus is more than 0 and at most 2 on this server (--sandbox-max-cpus)' }] });
    const fields = fieldErrorsOf(err);
    expect(fields).toEqual({ 'resources.cpus': 'cpus is more than 0 and at most 2 on this server (--sandbox-max-cpus)' });
    expect(sectionsWithErrors(fields)).toEqual(['limits']);
  });
});

describe('limitsBody', () => {
  it('sends null for what was left empty, and no resources when neither is given', () => {
    expect(limitsBody(emptyLimits())).toEqual({ idle_ttl_seconds: null, max_lifetime_seconds: null, resources: null });
    expect(limitsBody(limits({ idle_ttl_seconds: '0', max_lifetime_seconds: '3600', cpus: ' 0.5 ' }))).toEqual({ idle_ttl_seconds: 0, max_lifetime_seconds: 3600, resources: { cpus: 0.5, memory_mb: null, disk_mb: null } });
    expect(limitsBody(limits({ memory_mb: '512' })).resources).toEqual({ cpus: null, memory_mb: 512, disk_mb: null });
    expect(limitsBody(limits({ disk_mb: '2048' })).resources).toEqual({ cpus: null, memory_mb: null, disk_mb: 2048 });
  });
});

describe('how the session page words its limits', () => {
  it('names the resources', () => {
    expect(resourcesText(null)).toBeNull();
    expect(resourcesText({ cpus: null, memory_mb: null })).toBeNull();
    expect(resourcesText({ cpus: 0.5, memory_mb: 512 })).toBe('0.5 CPUs · 512 MiB');
    expect(resourcesText({ cpus: 1, memory_mb: 2048 })).toBe('1 CPU · 2 GiB');
    expect(resourcesText({ disk_mb: 20 })).toBe('20 MiB disk');
    expect(resourcesText({ cpus: 0.5, memory_mb: 512, disk_mb: 4096 })).toBe('0.5 CPUs · 512 MiB · 4 GiB disk');
  });
  it('says the idle TTL, and when a session has ended for good', () => {
    expect(idleTtlText(null)).toBeNull();
    expect(idleTtlText(0)).toBe('never released when idle');
    expect(idleTtlText(600)).toBe('released after 10m 0s idle');
    expect(lifetimeEnded({ status: 'stopped', stopped_reason: 'lifetime' })).toBe(true);
    expect(lifetimeEnded({ status: 'stopped', stopped_reason: 'idle' })).toBe(false);
    expect(lifetimeEnded({ status: 'running', stopped_reason: null })).toBe(false);
  });
});
