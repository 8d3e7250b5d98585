import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp as wrap } from '../../test/render';
import { RequiresActionBanner } from './Transcript';

afterEach(() => vi.restoreAllMocks());

describe('RequiresActionBanner', () => {
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
});
