// How E2B's SDKs connect to this deployment (crates/api/src/e2b, docs/e2b.md): the snippets the
// Developers page shows. The control plane is served under `/e2b` (E2B_API_URL), the sandbox's
// data plane (envd: commands, files; the code interpreter: run_code) under `/e2b-sandbox`
// (E2B_SANDBOX_URL), and the SDKs send
// E2B_API_KEY as `X-API-KEY`, which the server reads as one of our API keys. The SDKs refuse to
// run with no key set, so an open deployment (which takes any non-`ak_` value) still gets one.
// Pure (no React), so the unit test reads the very text the page shows.

export type E2bConnectOptions = {
  /** The deployment's origin, as the browser sees it (window.location.origin). */
  origin: string;
  /** False in open mode: no key exists, and any value that is not an `ak_` key is let in. */
  authRequired: boolean;
};

/** The key's placeholder when the deployment asks for one: a key from the API keys page. */
export const E2B_KEY_PLACEHOLDER = 'ak_…';
/** The value an open deployment is given: the SDKs want a key set, the server needs none. */
export const E2B_OPEN_KEY = 'open';

export function e2bUrls(origin: string) {
  const base = origin.replace(/\/+$/, '');
  return { apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b-sandbox` };
}

export function e2bSnippets(o: E2bConnectOptions) {
  const { apiUrl, sandboxUrl } = e2bUrls(o.origin);
  const env = [
    `export E2B_API_URL=${apiUrl}`,
    `export E2B_SANDBOX_URL=${sandboxUrl}`,
    o.authRequired
      ? `export E2B_API_KEY=${E2B_KEY_PLACEHOLDER}   # an API key of ours, from the API keys page`
      : `export E2B_API_KEY=${E2B_OPEN_KEY}   # any value: this deployment is open, but the SDKs want one set`,
  ].join('\n');

  const python = `from e2b import Sandbox

sbx = Sandbox.create()  # template "base"; reads E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY
print(sbx.commands.run("echo hello").stdout)
sbx.files.write("notes.txt", "hi")
print(sbx.files.read("notes.txt"))
sbx.kill()`;

  const javascript = `import { Sandbox } from 'e2b'

const sbx = await Sandbox.create() // template 'base'; reads E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY
console.log((await sbx.commands.run('echo hello')).stdout)
await sbx.files.write('notes.txt', 'hi')
console.log(await sbx.files.read('notes.txt'))
await sbx.kill()`;

  const codeInterpreter = `from e2b_code_interpreter import Sandbox

sbx = Sandbox.create()  # template "code-interpreter-v1": the built-in analysis environment
sbx.run_code("x = 41")
print(sbx.run_code("x + 1").text)  # 42: state is kept between runs
sbx.kill()`;

  return { apiUrl, sandboxUrl, env, python, javascript, codeInterpreter };
}
