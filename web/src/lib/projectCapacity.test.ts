import { describe, expect, it } from 'vitest';
import {
  capacityBody,
  capacityOf,
  capacityPercent,
  capacitySavedText,
  capacityUsageText,
  capacityValuesOf,
  requestsPerMinuteText,
  validateCapacity,
  validateCapacityValues,
} from './projectCapacity';
import { limitsBody, presentLimits } from './spendLimit';

const MESSAGE = 'A whole number, 1 to 1,000,000 (empty for the server’s default).';

describe('the capacity fields', () => {
  it('take a whole number from 1 to 1,000,000, and empty for the server’s default', () => {
    for (const ok of ['', '  ', '1', ' 2 ', '1000000']) expect(validateCapacity(ok)).toBeNull();
    for (const bad of ['0', '-1', '1.5', '1e3', 'abc', '1000001', '0x10']) expect(validateCapacity(bad)).toBe(MESSAGE);
  });

  it('say each field’s problem apart', () => {
    expect(validateCapacityValues({ max_sandboxes: '0', max_runs: '', requests_per_minute: '600' })).toEqual({ max_sandboxes: MESSAGE });
    expect(validateCapacityValues({ max_sandboxes: '1', max_runs: '2', requests_per_minute: '' })).toEqual({});
  });

  it('start from the project’s limits, empty where none is set', () => {
    expect(capacityValuesOf({ max_sandboxes: 2, monthly_cost_usd: 5, requests_per_minute: null })).toEqual({ max_sandboxes: '2', max_runs: '', requests_per_minute: '' });
    expect(capacityValuesOf(undefined)).toEqual({ max_sandboxes: '', max_runs: '', requests_per_minute: '' });
    expect(capacityOf({ max_runs: 3 }, 'max_runs')).toBe(3);
    expect(capacityOf({}, 'max_runs')).toBeNull();
  });
});

describe('what a save sends: the whole set, since the PATCH replaces it', () => {
  it('keeps the monthly spend limit when the capacity is saved', () => {
    expect(capacityBody({ max_sandboxes: ' 2 ', max_runs: '', requests_per_minute: '600' }, { monthly_cost_usd: 5, max_runs: 4 })).toEqual({
      monthly_cost_usd: 5,
      max_sandboxes: 2,
      requests_per_minute: 600,
    });
    // Emptied fields are left out; nulls are not sent back.
    expect(capacityBody({ max_sandboxes: '', max_runs: '', requests_per_minute: '' }, { max_sandboxes: 1, monthly_cost_usd: null })).toEqual({});
  });

  it('keeps the capacity when the monthly limit is set, changed or removed', () => {
    const current = { max_sandboxes: 1, max_runs: 2, requests_per_minute: 600, monthly_cost_usd: 5 };
    expect(limitsBody('0.5', current)).toEqual({ max_sandboxes: 1, max_runs: 2, requests_per_minute: 600, monthly_cost_usd: 0.5 });
    expect(limitsBody('', current)).toEqual({ max_sandboxes: 1, max_runs: 2, requests_per_minute: 600 });
    expect(limitsBody('', { monthly_cost_usd: 5 })).toEqual({});
    expect(presentLimits({ max_runs: null, max_sandboxes: 3 })).toEqual({ max_sandboxes: 3 });
  });
});

describe('what the project runs now', () => {
  const spend = (more: Record<string, unknown>) => ({ sandboxes: 1, sandboxes_queued: 0, runs: 0, runs_queued: 0, limits: {}, ...more });

  it('says the counts against the project’s limits, and the queue when there is one', () => {
    expect(capacityUsageText('sandboxes', spend({ sandboxes_queued: 1, limits: { max_sandboxes: 2 } }))).toBe('1 of 2 sandboxes · 1 queued');
    expect(capacityUsageText('sandboxes', spend({ sandboxes_queued: 1, limits: { max_sandboxes: 1 } }))).toBe('1 of 1 sandboxes · 1 queued');
    expect(capacityUsageText('runs', spend({ limits: { max_runs: 1 } }))).toBe('0 of 1 turns in flight');
    expect(capacityUsageText('runs', spend({ runs: 3, runs_queued: 2, limits: { max_runs: 3 } }))).toBe('3 of 3 turns in flight · 2 queued');
  });

  it('says the counts alone without a project limit', () => {
    expect(capacityUsageText('sandboxes', spend({}))).toBe('1 sandbox · no project limit');
    expect(capacityUsageText('sandboxes', spend({ sandboxes: 2, sandboxes_queued: 1 }))).toBe('2 sandboxes · 1 queued · no project limit');
    expect(capacityUsageText('runs', spend({}))).toBe('0 turns in flight · no project limit');
    expect(capacityUsageText('runs', spend({ runs: 1 }))).toBe('1 turn in flight · no project limit');
    // A server that does not send the counts yet: nothing runs, as far as it says.
    expect(capacityUsageText('runs', { limits: {} })).toBe('0 turns in flight · no project limit');
  });

  it('fills the bar to the limit, none without one', () => {
    expect(capacityPercent('sandboxes', spend({ limits: { max_sandboxes: 2 } }))).toBe(50);
    expect(capacityPercent('sandboxes', spend({ sandboxes: 3, limits: { max_sandboxes: 2 } }))).toBe(100);
    expect(capacityPercent('runs', spend({}))).toBeNull();
  });

  it('says the requests per minute and the notification', () => {
    expect(requestsPerMinuteText({ requests_per_minute: 1200 })).toBe('1,200 a minute, all its callers together');
    expect(requestsPerMinuteText({})).toBe('no project limit (each caller’s own)');
    expect(capacitySavedText({ max_runs: 1 })).toBe('Capacity saved');
    expect(capacitySavedText({ monthly_cost_usd: 1 })).toBe('Capacity: the server’s defaults');
  });
});
