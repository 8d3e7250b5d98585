import { afterEach, describe, expect, it, vi } from 'vitest';
import { api, ApiError, detailOf, fieldErrors, setApiProject, unwrap } from './client';

afterEach(() => vi.restoreAllMocks());

describe('the API client', () => {
  it('sends the CSRF header on changes, JSON content type and X-Project', async () => {
    const seen: Request[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
      seen.push(input as Request);
      return new Response(JSON.stringify({ id: 'x' }), { status: 201, headers: { 'Content-Type': 'application/json' } });
    });
    setApiProject('alpha');
    await unwrap(api.POST('/api/secrets', { body: { name: 'A', value: 'v', description: '' } }));
    await unwrap(api.GET('/api/secrets'));
    expect(seen[0].headers.get('X-Requested-With')).toBe('XMLHttpRequest');
    expect(seen[0].headers.get('Content-Type')).toBe('application/json');
    expect(seen[0].headers.get('X-Project')).toBe('alpha');
    expect(seen[0].credentials).toBe('same-origin');
    expect(seen[1].headers.get('X-Requested-With')).toBeNull();
    setApiProject(null);
  });

  it('raises the API detail', async () => {
    vi.spyOn(globalThis, 'fetch').mockResolvedValue(new Response(JSON.stringify({ detail: 'agent was modified (version 7 is stale; current is 8)' }), { status: 409, headers: { 'Content-Type': 'application/json' } }));
    const err = await unwrap(api.GET('/api/agents')).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(409);
    expect(err.detail).toMatch(/stale/);
  });

  it('reads 422 field lists and non-JSON bodies', () => {
    expect(detailOf({ detail: [{ loc: ['body', 'slug'], msg: 'bad slug' }, { loc: ['body'], msg: 'x' }] }, 422)).toBe('slug: bad slug; x');
    expect(detailOf('<html>Bad gateway</html>', 502)).toBe('<html>Bad gateway</html>');
    expect(detailOf(undefined, 500, 'Internal Server Error')).toBe('500 Internal Server Error');
  });

  it('keys a 422’s messages by the field they name', () => {
    const body = { detail: [{ loc: ['body', 'network', 'allow', '1'], msg: 'not an entry' }, { loc: ['body', 'network', 'allow', 1], msg: 'again' }, { loc: ['body'], msg: 'whole body' }] };
    expect(fieldErrors(new ApiError(422, 'x', body))).toEqual({ 'network.allow.1': 'not an entry again' });
    expect(fieldErrors(new ApiError(400, 'x', body))).toEqual({});
    expect(fieldErrors(new Error('x'))).toEqual({});
  });
});
