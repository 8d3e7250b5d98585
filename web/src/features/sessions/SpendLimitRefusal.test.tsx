import { screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/client';
import { renderInApp } from '../../test/render';
import { isSpendLimitRefusal, SpendLimitRefusal } from './SpendLimitRefusal';

describe('a turn refused at the project’s monthly limit', () => {
  it('is a 402 and nothing else', () => {
    expect(isSpendLimitRefusal(new ApiError(402, 'x', null))).toBe(true);
    expect(isSpendLimitRefusal(new ApiError(409, 'x', null))).toBe(false);
    expect(isSpendLimitRefusal(new Error('x'))).toBe(false);
    expect(isSpendLimitRefusal(null)).toBe(false);
  });

  it('says the API’s sentence and who can lift it', () => {
    const detail = "The project's monthly spend limit of $0.50 is reached ($0.60 spent in 2026-12).";
    renderInApp(<SpendLimitRefusal detail={detail} projectPath="/projects/acme" />);
    expect(screen.getByRole('alert')).toHaveTextContent('The project’s monthly spend limit is reached');
    expect(screen.getByTestId('spend-limit-refusal-detail')).toHaveTextContent(detail);
    expect(screen.getByRole('link', { name: 'project’s page' })).toHaveAttribute('href', '/projects/acme');
  });
});
