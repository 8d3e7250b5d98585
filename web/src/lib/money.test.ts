import { describe, expect, it } from 'vitest';
import { describeCost, formatUsd } from './money';

describe('formatUsd', () => {
  it('shows cents from a dollar up, with thousands grouped', () => {
    expect(formatUsd(12.345)).toBe('$12.35');
    expect(formatUsd(1)).toBe('$1.00');
    expect(formatUsd(1234.5)).toBe('$1,234.50');
  });

  it('shows up to four significant digits below a dollar, and at least two decimals', () => {
    expect(formatUsd(0.0042)).toBe('$0.0042');
    expect(formatUsd(0.25)).toBe('$0.25');
    expect(formatUsd(0.5)).toBe('$0.50');
    expect(formatUsd(0.253)).toBe('$0.253');
    expect(formatUsd(0.123456)).toBe('$0.1235');
    expect(formatUsd(0.003)).toBe('$0.003');
    expect(formatUsd(0.00002)).toBe('$0.00002');
    expect(formatUsd(0.000012345)).toBe('$0.00001235');
    // Rounding up to a dollar shows as one.
    expect(formatUsd(0.99996)).toBe('$1.00');
  });

  it('never rounds a cost that is there down to zero', () => {
    expect(formatUsd(1e-9)).toBe('< $0.000001');
    expect(formatUsd(0.000001)).toBe('$0.000001');
    expect(formatUsd(0)).toBe('$0.00');
  });

  it('shows a dash for no figure', () => {
    expect(formatUsd(undefined)).toBe('—');
    expect(formatUsd(null)).toBe('—');
    expect(formatUsd(Number.NaN)).toBe('—');
  });
});

describe('describeCost', () => {
  it('gives the amount when every call is priced', () => {
    expect(describeCost({ cost_usd: 0.0123, unpriced_requests: 0, requests: 4 })).toEqual({ text: '$0.0123', note: null, unpriced: 0 });
    // A model an operator prices at 0 (a local one) does cost nothing.
    expect(describeCost({ cost_usd: 0, unpriced_requests: 0, requests: 4 })).toEqual({ text: '$0.00', note: null, unpriced: 0 });
  });

  it('never shows $0.00 for calls that had no price', () => {
    expect(describeCost({ cost_usd: 0, unpriced_requests: 3, requests: 3 })).toEqual({ text: 'Unpriced', note: '3 calls unpriced', unpriced: 3 });
    expect(describeCost({ cost_usd: 0, unpriced_requests: 1, requests: 1 })).toEqual({ text: 'Unpriced', note: '1 call unpriced', unpriced: 1 });
  });

  it('says the amount is a floor when some calls had no price', () => {
    expect(describeCost({ cost_usd: 0.0123, unpriced_requests: 3, requests: 5 })).toEqual({ text: '≥ $0.0123', note: '+ 3 unpriced calls', unpriced: 3 });
    expect(describeCost({ cost_usd: 2.5, unpriced_requests: 1, requests: 5 })).toEqual({ text: '≥ $2.50', note: '+ 1 unpriced call', unpriced: 1 });
  });

  it('counts every call of usage recorded before calls were priced as unpriced, as GET /api/usage does', () => {
    expect(describeCost({ requests: 2 })).toEqual({ text: 'Unpriced', note: '2 calls unpriced', unpriced: 2 });
  });

  it('shows a dash for no calls and no figure', () => {
    expect(describeCost({})).toEqual({ text: '—', note: null, unpriced: 0 });
    expect(describeCost(undefined)).toEqual({ text: '—', note: null, unpriced: 0 });
    expect(describeCost({ cost_usd: 0, unpriced_requests: 0, requests: 0 })).toEqual({ text: '$0.00', note: null, unpriced: 0 });
  });
});
