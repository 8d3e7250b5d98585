import { screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../api/client';
import { renderInApp } from '../test/render';
import { relativeTime } from '../lib/time';
import { EmptyState, ErrorAlert, ShownOnce } from './common';

const wrap = renderInApp;

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

  it('writes relative times', () => {
    const now = Date.parse('2026-01-01T12:00:00Z');
    expect(relativeTime('2026-01-01T11:57:00Z', now)).toBe('3 minutes ago');
    expect(relativeTime('2026-01-01T12:00:00Z', now)).toBe('just now');
  });
});
