// Secret bindings (an agent's, a session's) as a form holds them: one row per binding with a kind
// (a variable, a header the egress proxy injects, or a placeholder the proxy swaps), their
// conversion to and from openapi.json's SecretBinding, the checks the form can make before
// the server does, and the one line a page shows for each.
import type { Schemas } from '../api/client';
import { ENV_RE } from './rules';

export type SecretBinding = Schemas['SecretBinding'];
export type BindingKind = 'env' | 'inject' | 'placeholder';

export const BINDING_KINDS: { value: BindingKind; label: string }[] = [
  { value: 'env', label: 'Variable' },
  { value: 'inject', label: 'Header (inject)' },
  { value: 'placeholder', label: 'Placeholder' },
];

/** What each kind does, for the row's help text. */
export const BINDING_HELP: Record<BindingKind, string> = {
  env: 'The secret’s value is an environment variable of every command the sandbox runs.',
  inject:
    'The egress proxy adds the header to HTTPS requests to the host; the secret never enters the sandbox (whatever the sandbox sends in that header is replaced).',
  placeholder:
    'The variable holds a placeholder (sa-ph-…), not the secret; the egress proxy swaps it for the secret in request headers to the listed hosts only, so tools that read a token from their environment work unchanged.',
};

/**
 * One binding in the form. Every kind's fields are kept while the kind is switched, so a
 * switch back loses nothing; only the chosen kind's are sent. `env` is the variable of both
 * the env and the placeholder kinds (the API shows a placeholder's `env` equal to
 * `placeholder.env`); `hosts` is the placeholder's hosts as typed, comma or space separated.
 */
export type BindingRow = {
  kind: BindingKind;
  secret: string;
  env: string;
  host: string;
  header: string;
  format: string;
  hosts: string;
};

export const DEFAULT_FORMAT = '{value}';
export const MAX_PLACEHOLDER_HOSTS = 16;

export function emptyBindingRow(): BindingRow {
  return { kind: 'env', secret: '', env: '', host: '', header: '', format: DEFAULT_FORMAT, hosts: '' };
}

export function bindingRowOf(b: SecretBinding): BindingRow {
  const row = { ...emptyBindingRow(), secret: b.secret };
  if (b.inject) return { ...row, kind: 'inject', host: b.inject.host, header: b.inject.header, format: b.inject.format ?? DEFAULT_FORMAT };
  if (b.placeholder) return { ...row, kind: 'placeholder', env: b.placeholder.env, hosts: b.placeholder.hosts.join(', ') };
  return { ...row, env: b.env };
}

export const hostsOf = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/** The binding as the API takes it: env as it always was; inject and placeholder with `env`
 * left out (the server derives it). */
export function bindingBody(r: BindingRow): SecretBinding {
  const secret = r.secret.trim();
  switch (r.kind) {
    case 'inject':
      return { secret, inject: { host: r.host.trim(), header: r.header.trim(), format: r.format } } as SecretBinding;
    case 'placeholder':
      return { secret, placeholder: { env: r.env, hosts: hostsOf(r.hosts) } } as SecretBinding;
    default:
      return { secret, env: r.env };
  }
}

/** A host name as the proxy matches it: labels of letters, digits and -, no scheme, port,
 * path or wildcard. The server has the last word (its 422 names the field). */
const HOST_RE = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$/;
/** An HTTP header name: RFC 9110 token characters. Which names the proxy refuses (Host and
 * hop-by-hop ones) is the server's to say. */
const HEADER_RE = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,256}$/;

const HOST_MSG = 'A host name such as api.github.com: no scheme, port, path or wildcard.';

/**
 * Every binding's field errors, keyed like the server's 422s (`secret_bindings.0.inject.header`),
 * except that a placeholder's variable is checked as `secret_bindings.N.env`, the field the
 * form shows for it. Variables must differ between env and placeholder bindings alike: both
 * set one variable of the sandbox.
 */
export function bindingErrors(rows: BindingRow[], at = 'secret_bindings'): Record<string, string> {
  const e: Record<string, string> = {};
  const bound = new Set<string>();
  rows.forEach((b, i) => {
    const k = (f: string) => `${at}.${i}.${f}`;
    if (b.secret.trim() === '') e[k('secret')] = 'Name a secret.';
    if (b.kind === 'inject') {
      if (!HOST_RE.test(b.host.trim())) e[k('inject.host')] = HOST_MSG;
      if (!HEADER_RE.test(b.header.trim())) e[k('inject.header')] = 'A header name such as Authorization: letters, digits and - (no spaces or colon).';
      if (b.format.length > 1024) e[k('inject.format')] = 'At most 1024 characters.';
      else if (b.format.split('{value}').length !== 2) e[k('inject.format')] = 'Put {value} exactly once where the secret goes, e.g. Bearer {value}.';
      return;
    }
    if (!ENV_RE.test(b.env)) e[k('env')] = 'Letters, digits and _, not starting with a digit.';
    else if (bound.has(b.env)) e[k('env')] = 'Duplicate variable.';
    bound.add(b.env);
    if (b.kind === 'placeholder') {
      const hosts = hostsOf(b.hosts);
      const bad = hosts.filter((h) => !HOST_RE.test(h));
      if (hosts.length === 0 || hosts.length > MAX_PLACEHOLDER_HOSTS) e[k('placeholder.hosts')] = `1 to ${MAX_PLACEHOLDER_HOSTS} host names, separated by commas.`;
      else if (bad.length) e[k('placeholder.hosts')] = `Not host names: ${bad.join(', ')}. ${HOST_MSG}`;
    }
  });
  return e;
}

/**
 * The server's 422 messages for one row, each under the form's field it concerns: a
 * placeholder's `placeholder.env` shows at the variable, a host's index (`placeholder.hosts.1`)
 * at the hosts, and a message on the row as a whole at the secret.
 */
export function serverBindingErrors(server: Record<string, string>, at = 'secret_bindings'): Record<string, string> {
  const out: Record<string, string> = {};
  const add = (k: string, msg: string) => (out[k] = out[k] ? `${out[k]} ${msg}` : msg);
  for (const [key, msg] of Object.entries(server)) {
    const m = key.match(new RegExp(`^${at}\\.(\\d+)(?:\\.(.*))?$`));
    if (!m) continue;
    const [, i, rest = ''] = m;
    const field = rest === 'placeholder.env' ? 'env' : rest.startsWith('placeholder.hosts') ? 'placeholder.hosts' : rest === '' ? 'secret' : rest;
    add(`${at}.${i}.${field}`, msg);
  }
  return out;
}

/** One line on the agent's page: where the secret goes, never its value. */
export function describeBinding(b: SecretBinding): string {
  if (b.inject) return `${b.secret} → header ${b.inject.header}: ${b.inject.format ?? DEFAULT_FORMAT} on ${b.inject.host} (injected by the egress proxy)`;
  if (b.placeholder) return `${b.placeholder.env} ← placeholder for ${b.secret}, swapped on ${b.placeholder.hosts.join(', ')}`;
  return `${b.env} ← ${b.secret}`;
}
