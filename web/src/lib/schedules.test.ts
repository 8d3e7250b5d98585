import { describe, expect, it } from 'vitest';
import { ApiError } from '../api/client';
import { emptyBudget } from './budget';
import { createBody, emptySchedule, formatInZone, nextFire, patchBody, scheduleFieldErrors, timeZones, validateSchedule, valuesOf, type Schedule } from './schedules';

const schedule = (more: Partial<Schedule> = {}): Schedule => ({
  id: 'sch1',
  agent_id: 'a1',
  name: 'Morning',
  cron: '0 9 * * 1-5',
  timezone: 'Asia/Tokyo',
  message: 'Good morning',
  session: 'new',
  budget: null,
  paused: false,
  missed: 'skip',
  busy: 'skip',
  next_fire_at: '2026-01-05T00:00:00Z',
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:00:00Z',
  ...more,
});

const unprocessable = (detail: unknown) => new ApiError(422, 'invalid', { detail });

describe('a due time in two zones', () => {
  it('says a moment in the zone asked, with its name', () => {
    expect(formatInZone('2026-01-05T00:00:00Z', 'Asia/Tokyo', 'en-US')).toBe('Jan 5, 2026, 09:00 GMT+9');
    expect(formatInZone('2026-01-05T00:00:00Z', 'America/New_York', 'en-US')).toBe('Jan 4, 2026, 19:00 EST');
    expect(formatInZone('2026-07-05T00:00:00Z', 'America/New_York', 'en-US')).toBe('Jul 4, 2026, 20:00 EDT');
    expect(formatInZone('2026-01-05T00:00:00Z', 'UTC', 'en-US')).toBe('Jan 5, 2026, 00:00 UTC');
  });

  it('shows seconds only when the moment has some', () => {
    expect(formatInZone('2026-01-05T00:00:07Z', 'UTC', 'en-US')).toBe('Jan 5, 2026, 00:00:07 UTC');
  });

  it('leaves what is not a time, or a zone it does not know, as given', () => {
    expect(formatInZone('soon', 'UTC', 'en-US')).toBe('soon');
    expect(formatInZone('2026-01-05T00:00:00Z', 'Mars/Olympus', 'en-US')).toBe('2026-01-05T00:00:00Z');
  });

  it("gives the viewer's time and the schedule's, the second only when the zones differ", () => {
    expect(nextFire(schedule(), 'America/New_York', 'en-US')).toEqual({ kind: 'due', at: '2026-01-05T00:00:00Z', viewer: 'Jan 4, 2026, 19:00 EST', local: 'Jan 5, 2026, 09:00 GMT+9' });
    expect(nextFire(schedule(), 'Asia/Tokyo', 'en-US')).toMatchObject({ kind: 'due', local: null });
    // Two names of one zone read alike.
    expect(nextFire(schedule({ timezone: 'Etc/UTC' }), 'UTC', 'en-US')).toMatchObject({ local: null });
  });

  it('says paused, or none, when there is no next fire', () => {
    expect(nextFire(schedule({ paused: true, next_fire_at: null }), 'UTC')).toEqual({ kind: 'paused' });
    expect(nextFire(schedule({ next_fire_at: null }), 'UTC')).toEqual({ kind: 'none' });
  });

  it('lists the zones with UTC and the ones asked for', () => {
    const zones = timeZones(['Europe/Paris']);
    expect(zones).toContain('UTC');
    expect(zones).toContain('Europe/Paris');
    expect([...zones].sort()).toEqual(zones);
  });
});

describe('the form', () => {
  const filled = { ...emptySchedule('Europe/Paris'), cron: ' 0 9 * * 1-5 ', message: 'Report', name: ' Daily ' };

  it('asks for an expression of five or six fields, a zone and a message', () => {
    expect(validateSchedule(emptySchedule(''))).toEqual({ cron: 'A cron expression is required.', timezone: 'A time zone is required.', message: 'A message is required.' });
    expect(validateSchedule({ ...filled, cron: '0 9 *' }).cron).toMatch(/Five fields/);
    expect(validateSchedule({ ...filled, cron: '* * * * * *' })).toEqual({});
    expect(validateSchedule(filled)).toEqual({});
  });

  it("checks the budget of new sessions only, keyed as the server's 422", () => {
    const bad = { ...filled, budget: { ...emptyBudget(), max_turns: '1.5' } };
    expect(validateSchedule(bad)).toEqual({ 'budget.max_turns': 'A whole number, 0 to 1,000,000.' });
    expect(validateSchedule({ ...bad, session: 'S1' })).toEqual({});
  });

  it('builds the create body: trimmed, a budget only for new sessions, paused only when asked', () => {
    expect(createBody(filled)).toEqual({ name: 'Daily', cron: '0 9 * * 1-5', timezone: 'Europe/Paris', message: 'Report', session: 'new', missed: 'skip', busy: 'skip' });
    const budgeted = { ...filled, budget: { ...emptyBudget(), max_cost_usd: '0.5' }, paused: true, missed: 'run_once' as const, busy: 'wait' as const };
    expect(createBody(budgeted)).toMatchObject({ budget: { max_cost_usd: 0.5 }, paused: true, missed: 'run_once', busy: 'wait' });
    expect(createBody({ ...budgeted, session: 'S1' })).not.toHaveProperty('budget');
  });

  it('builds the patch body from what changed, never the session', () => {
    const was = schedule();
    expect(patchBody(valuesOf(was), was)).toEqual({});
    expect(patchBody({ ...valuesOf(was), cron: '0 10 * * *', timezone: 'UTC', session: 'other' }, was)).toEqual({ cron: '0 10 * * *', timezone: 'UTC' });
    expect(patchBody({ ...valuesOf(was), budget: { ...emptyBudget(), max_turns: '5' } }, was)).toEqual({ budget: { max_turns: 5 } });
    const budgeted = schedule({ budget: { max_turns: 5 } });
    expect(patchBody({ ...valuesOf(budgeted), budget: emptyBudget() }, budgeted)).toEqual({ budget: null });
    // A continued session keeps its own budget: none is sent.
    const continued = schedule({ session: 'S1' });
    expect(patchBody({ ...valuesOf(continued), budget: { ...emptyBudget(), max_turns: '5' } }, continued)).toEqual({});
  });
});

describe("a 422's fields", () => {
  it('keys each message by the field of the form it names', () => {
    const e = unprocessable([
      { loc: ['body', 'cron'], msg: 'not a cron expression' },
      { loc: ['body', 'timezone'], msg: 'unknown time zone' },
      { loc: ['body', 'budget', 'max_turns'], msg: 'too large' },
      { loc: ['body', 'session'], msg: 'not a session of this agent' },
    ]);
    expect(scheduleFieldErrors(e)).toEqual({ cron: 'not a cron expression', timezone: 'unknown time zone', 'budget.max_turns': 'too large', session: 'not a session of this agent' });
  });

  it('says an archived agent (the path) and fields the form does not have apart', () => {
    expect(scheduleFieldErrors(unprocessable([{ loc: ['path', 'ref'], msg: 'the agent is archived' }]))).toEqual({ agent: 'the agent is archived' });
    expect(scheduleFieldErrors(unprocessable([{ loc: ['body', 'color'], msg: 'unknown field' }]))).toEqual({ form: 'color: unknown field' });
    expect(scheduleFieldErrors(unprocessable([{ loc: ['body', 'budget'], msg: 'not with a continued session' }]))).toEqual({ budget: 'not with a continued session' });
  });

  it('is empty for another error', () => {
    expect(scheduleFieldErrors(new ApiError(409, 'conflict', { detail: 'conflict' }))).toEqual({});
    expect(scheduleFieldErrors(new Error('x'))).toEqual({});
  });
});
