import { screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../../test/render';
import { MonthlyLimitCard } from './MonthlyLimitCard';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown) => new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });

function serve(limits: Record<string, number>) {
  const asked: string[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    asked.push(new URL((input as Request).url).pathname);
    return json({ month: '2026-12', cost_usd: 0.25, requests: 3, unpriced_requests: 0, limits, warned_at: null });
  });
  return asked;
}

describe('the usage page’s monthly limit card', () => {
  it('shows the month’s spend against the project’s limit, with a way to the project', async () => {
    const asked = serve({ monthly_cost_usd: 1 });
    renderInApp(<MonthlyLimitCard projectSlug="acme" />);
    expect(await screen.findByTestId('spend-meter-text')).toHaveTextContent('$0.25 of $1.00 this month (2026-12)');
    expect(screen.getByTestId('spend-meter-percent')).toHaveTextContent('25 %');
    expect(screen.getByRole('link', { name: 'Project’s limits' })).toHaveAttribute('href', '/projects/acme');
    expect(asked).toEqual(['/api/projects/acme/spend']);
  });

  it('shows nothing for a project without a limit, and asks nothing without a project', async () => {
    const asked = serve({});
    const { container, unmount } = renderInApp(<MonthlyLimitCard projectSlug="acme" />);
    await vi.waitFor(() => expect(asked).toHaveLength(1));
    expect(container.querySelector('[data-testid="usage-monthly-limit"]')).toBeNull();
    unmount();
    renderInApp(<MonthlyLimitCard projectSlug={null} />);
    expect(asked).toHaveLength(1);
  });
});
