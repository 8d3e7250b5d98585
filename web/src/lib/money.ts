// What model calls cost, as the UI says it. The API gives `cost_usd` (the priced calls, in US
// dollars) and `unpriced_requests` (calls no price was found for, not in `cost_usd`); a cost is
// never shown as a plain $0.00 when calls were unpriced.

/** Below this an amount is shown as "< $0.000001" rather than as a string of zeros. */
const SMALLEST = 0.000001;

/**
 * US dollars for people: cents from $1 up ("$12.34", "$1,234.50"), below $1 up to four
 * significant digits with at least two decimals ("$0.25", "$0.0042", "$0.1235"), and "$0.00"
 * only for an amount that is zero.
 */
export function formatUsd(usd: number | null | undefined): string {
  if (usd == null || !Number.isFinite(usd)) return '—';
  // Costs are never negative; a negative figure is shown as the amount it is.
  const sign = usd < 0 ? '-' : '';
  const abs = Math.abs(usd);
  const fmt = (n: number, decimals: number) => `${sign}$${new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: decimals }).format(n)}`;
  if (abs === 0) return fmt(0, 2);
  if (abs < SMALLEST) return `< ${fmt(SMALLEST, 6)}`;
  if (abs >= 1) return fmt(abs, 2);
  // The first significant digit is at decimal -floor(log10): keep it and three more.
  return fmt(abs, Math.max(2, 3 - Math.floor(Math.log10(abs))));
}

/** A usage object as the API gives it (a session's, a run's, a split's or a report's totals). */
export type Costed = { cost_usd?: number | null; unpriced_requests?: number | null; requests?: number | null };

export type Cost = {
  /** "$0.25", "≥ $0.25" when some calls were unpriced, "Unpriced" when none was priced, "—" for no calls. */
  text: string;
  /** "+ 3 unpriced calls" or "3 calls unpriced", when some calls were unpriced. */
  note: string | null;
  /** The calls without a price. */
  unpriced: number;
};

const calls = (n: number) => `${n} call${n === 1 ? '' : 's'}`;

/**
 * What `u` cost, in words. Usage recorded before calls were priced has no `cost_usd`: each of
 * its calls counts as unpriced, as `GET /api/usage` counts them.
 */
export function describeCost(u: Costed | null | undefined): Cost {
  const requests = u?.requests ?? 0;
  const priced = typeof u?.cost_usd === 'number' && Number.isFinite(u.cost_usd);
  const cost = priced ? (u!.cost_usd as number) : 0;
  const unpriced = u?.unpriced_requests ?? (priced ? 0 : requests);
  if (unpriced > 0) {
    if (cost > 0) return { text: `≥ ${formatUsd(cost)}`, note: `+ ${unpriced} unpriced ${unpriced === 1 ? 'call' : 'calls'}`, unpriced };
    return { text: 'Unpriced', note: `${calls(unpriced)} unpriced`, unpriced };
  }
  if (!priced && requests === 0) return { text: '—', note: null, unpriced: 0 };
  return { text: formatUsd(cost), note: null, unpriced: 0 };
}
