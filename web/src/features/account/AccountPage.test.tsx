import { screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AppContextProvider } from '../../context';
import { renderInApp } from '../../test/render';
import AccountPage from './AccountPage';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

/** Serves `/api/me` as given and an empty project list; records every path asked for. */
function serve(me: Record<string, unknown>): string[] {
  const paths: string[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const path = new URL((input as Request).url).pathname;
    paths.push(path);
    if (path === '/api/me') return json(me);
    if (path === '/api/projects') return json([]);
    return json({ detail: 'a profile belongs to a person; this credential is an API key or a token' }, 409);
  });
  return paths;
}

describe('the account page', () => {
  it('in open mode says what open mode is and how to close it, asking for no profile', async () => {
    const paths = serve({ auth_required: false, authenticated: false, operator: true, kind: null });
    renderInApp(<AppContextProvider><AccountPage /></AppContextProvider>);
    const note = await screen.findByTestId('account-open-mode');
    expect(note).toHaveTextContent('checks no credentials');
    expect(note).toHaveTextContent('SANDBOX_AGENTS_TOKEN');
    expect(screen.queryByText(/Error 409/)).toBeNull();
    expect(paths).not.toContain('/api/me/profile');
  });

  it('with an API key says a profile belongs to a person, asking for none', async () => {
    const paths = serve({ auth_required: true, authenticated: true, operator: true, kind: 'api_key', label: 'ci', login_url: '/login' });
    renderInApp(<AppContextProvider><AccountPage /></AppContextProvider>);
    expect(await screen.findByTestId('account-not-a-person')).toHaveTextContent('the API key ci');
    expect(paths).not.toContain('/api/me/profile');
  });
});
