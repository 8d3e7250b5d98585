import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../api/client';
import { isNoDaemon, parseServerMessage, terminalPath, terminalUrl } from './socket';

describe('the terminal socket', () => {
  it('names the size and the project in its query, since a browser sends no headers', () => {
    expect(terminalPath('sess_a/b', 30, 100, 'acme')).toBe('/api/sessions/sess_a%2Fb/terminal?rows=30&cols=100&project=acme');
    expect(terminalPath('sess_1', 24, 80, null)).toBe('/api/sessions/sess_1/terminal?rows=24&cols=80');
  });

  it('follows the page: ws beside http, wss beside https', () => {
    expect(terminalUrl('/api/x', { protocol: 'http:', host: '127.0.0.1:8000' })).toBe('ws://127.0.0.1:8000/api/x');
    expect(terminalUrl('/api/x', { protocol: 'https:', host: 'agents.example.com' })).toBe('wss://agents.example.com/api/x');
  });

  it('reads the exit message and nothing else', () => {
    expect(parseServerMessage('{"type":"exit","exit_code":3,"signal":null}')).toEqual({ type: 'exit', exit_code: 3, signal: null });
    expect(parseServerMessage('{"type":"other"}')).toBeNull();
    expect(parseServerMessage('not json')).toBeNull();
  });

  it('tells a sandbox without a daemon from other refusals', () => {
    expect(isNoDaemon(new ApiError(409, "this session's sandbox has no daemon (its image cannot run it)", null))).toBe(true);
    expect(isNoDaemon(new ApiError(409, 'the session is not running', null))).toBe(false);
    expect(isNoDaemon(null)).toBe(false);
  });
});
