import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/client';
import { renderInApp } from '../test/render';
import { relativeTime } from '../lib/time';
import { RequiresActionBanner } from '../pages/sessions/Transcript';
import { EmptyState, ErrorAlert, ShownOnce } from './common';

const wrap = renderInApp;

afterEach(() => vi.restoreAllMocks());

describe('components', () => {
  it('shows the API detail of an error', () => {
    wrap(<ErrorAlert error={new ApiError(409, 'a secret still bound cannot be deleted', null)} />);
    expect(screen.getByRole('alert')).toHaveTextContent('a secret still bound cannot be deleted');
    expect(screen.getByRole('alert')).toHaveTextContent('409');
  });

  it('renders empty states and one-time secrets', () => {
    wrap(
      <>
        <EmptyState title="No agents yet">Create one.</EmptyState>
        <ShownOnce label="API key" value="ak_secret" />
      </>,
    );
    expect(screen.getByText('No agents yet')).toBeInTheDocument();
    expect(screen.getByTestId('shown-once-value')).toHaveTextContent('ak_secret');
  });

  it('answers a parked client tool call with tool-results', async () => {
    const bodies: unknown[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      const req = input as Request;
      expect(req.url).toContain('/api/sessions/S/tool-results');
      expect(req.headers.get('X-Requested-With')).toBe('XMLHttpRequest');
      bodies.push(await req.json());
      return new Response(null, { status: 204 });
    });
    const onAnswered = vi.fn();
    wrap(<RequiresActionBanner sessionId="S" onAnswered={onAnswered} pending={[{ call_id: 'c1', tool: 'ask_user', arguments: '{"q":"ok?"}', seq: 4, deferrable: true, run_id: 'R' }]} />);
    expect(screen.getByTestId('requires-action')).toHaveTextContent('Requires action');
    await userEvent.type(screen.getByLabelText('Answer to ask_user'), 'yes');
    await userEvent.click(screen.getByLabelText('Report as an error'));
    await userEvent.click(screen.getByRole('button', { name: 'Send answer' }));
    await waitFor(() => expect(onAnswered).toHaveBeenCalled());
    expect(bodies).toEqual([{ call_id: 'c1', output: 'yes', is_error: true }]);
  });

  it('writes relative times', () => {
    const now = Date.parse('2026-01-01T12:00:00Z');
    expect(relativeTime('2026-01-01T11:57:00Z', now)).toBe('3 minutes ago');
    expect(relativeTime('2026-01-01T12:00:00Z', now)).toBe('just now');
  });
});
