import { describe, expect, it } from 'vitest';
import { e2bSnippets, e2bUrls } from './e2bConnect';

describe('e2bSnippets', () => {
  const signedIn = e2bSnippets({ origin: 'https://agents.example.com', authRequired: true });

  it('points the SDKs at the origin’s /e2b and /e2b-sandbox', () => {
    expect(e2bUrls('http://h:8000/')).toEqual({ apiUrl: 'http://h:8000/e2b', sandboxUrl: 'http://h:8000/e2b-sandbox' });
    expect(signedIn.apiUrl).toBe('https://agents.example.com/e2b');
    expect(signedIn.sandboxUrl).toBe('https://agents.example.com/e2b-sandbox');
  });

  it('sets the three variables, the key a placeholder for one of ours', () => {
    expect(signedIn.env).toBe(
      'export E2B_API_URL=https://agents.example.com/e2b\n' +
        'export E2B_SANDBOX_URL=https://agents.example.com/e2b-sandbox\n' +
        'export E2B_API_KEY=ak_…   # an API key of ours, from the API keys page',
    );
  });

  it('still sets a key in open mode (the SDKs want one), one the server does not read as a key', () => {
    const open = e2bSnippets({ origin: 'http://127.0.0.1:8000', authRequired: false });
    const lines = open.env.split('\n');
    expect(lines.slice(0, 2)).toEqual(['export E2B_API_URL=http://127.0.0.1:8000/e2b', 'export E2B_SANDBOX_URL=http://127.0.0.1:8000/e2b-sandbox']);
    expect(lines[2]).toMatch(/^export E2B_API_KEY=\S+/);
    expect(lines[2]).not.toContain('ak_');
  });

  it('writes the Python flow on the e2b SDK: create, run, write, kill, in order', () => {
    const py = signedIn.python;
    expect(py).toContain('from e2b import Sandbox');
    const steps = ['sbx = Sandbox.create()', 'print(sbx.commands.run("echo hello").stdout)', 'sbx.files.write("notes.txt", "hi")', 'sbx.kill()'];
    const at = steps.map((s) => py.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
    // The SDK reads the deployment from the environment: nothing in the code names it.
    expect(py).not.toContain('https://');
  });

  it('writes the same flow in JavaScript, awaited', () => {
    const js = signedIn.javascript;
    expect(js).toContain("import { Sandbox } from 'e2b'");
    const steps = ['const sbx = await Sandbox.create()', "(await sbx.commands.run('echo hello')).stdout", "await sbx.files.write('notes.txt', 'hi')", 'await sbx.kill()'];
    const at = steps.map((s) => js.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
    expect(js).not.toContain('https://');
  });

  it('runs code with the code interpreter SDK, state kept between runs', () => {
    const ci = signedIn.codeInterpreter;
    expect(ci).toContain('from e2b_code_interpreter import Sandbox');
    const steps = ['sbx = Sandbox.create()', 'sbx.run_code("x = 41")', 'print(sbx.run_code("x + 1").text)', 'sbx.kill()'];
    const at = steps.map((s) => ci.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
    expect(ci).toContain('code-interpreter-v1');
  });
});
