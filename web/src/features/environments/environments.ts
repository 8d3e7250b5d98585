// Environments: the create/edit form's values (packages one per line, per manager), their
// checks with the server's rules (EnvironmentCreate in openapi.json and the domain's package
// rules), the body they become, and how a build's state is shown. Kept apart from the pages
// so it is tested alone.
import { api, unwrap, type Schemas } from '../../api/client';
import { defaultPolicy, policyBody, policyOf, type NetworkPolicy } from '../../lib/network';

export type Environment = Schemas['Environment'];
export type EnvironmentConfig = Schemas['EnvironmentConfig'];
export type Packages = Schemas['Packages'];

/** The managers, in the order the server installs them. */
export const MANAGERS = ['apt', 'cargo', 'gem', 'go', 'npm', 'pip'] as const;
export type Manager = (typeof MANAGERS)[number];

export const EXAMPLES: Record<Manager, string> = {
  apt: 'jq',
  cargo: 'ripgrep@14.1.0',
  gem: 'rails:7.1.0',
  go: 'golang.org/x/tools/cmd/goimports@latest',
  npm: 'express@4.18.0',
  pip: 'sqlalchemy==2.0.30',
};

export const NAME_MAX = 128;
export const DESCRIPTION_MAX = 4000;

export type ConfigValues = { image: string; packages: Record<Manager, string>; network: NetworkPolicy; runtime_class: string };
export type EnvironmentValues = { name: string; description: string } & ConfigValues;
export type EnvironmentErrors = Partial<Record<'name' | 'description' | 'image' | Manager, string>>;

export function emptyValues(): EnvironmentValues {
  return { name: '', description: '', image: '', packages: { apt: '', cargo: '', gem: '', go: '', npm: '', pip: '' }, network: defaultPolicy(), runtime_class: '' };
}

/** A stored configuration as form values. */
export function configValues(c: EnvironmentConfig): ConfigValues {
  const p = c.packages ?? {};
  const lines = (m: Manager) => ((p as Record<Manager, string[] | undefined>)[m] ?? []).join('\n');
  return { image: c.image ?? '', packages: { apt: lines('apt'), cargo: lines('cargo'), gem: lines('gem'), go: lines('go'), npm: lines('npm'), pip: lines('pip') }, network: policyOf(c.network), runtime_class: c.runtime_class ?? '' };
}

/** One entry per line (or separated by spaces); blank lines dropped. */
export function entries(text: string): string[] {
  return text.split(/\s+/).map((s) => s.trim()).filter(Boolean);
}

const UNSAFE = /['"\\`$;&|]/;

/** The reason the server would refuse a package entry, or undefined. */
export function packageProblem(entry: string): string | undefined {
  if (entry.startsWith('-')) return `'${entry}' starts with '-': options are not accepted, only package names.`;
  if (UNSAFE.test(entry) || /[^\x21-\x7e]/.test(entry)) return `'${entry}' holds a character a package name cannot have (quotes, \\, $, ;, & or |).`;
  if (entry.length > 200) return `'${entry.slice(0, 20)}…' is longer than 200 characters.`;
  return undefined;
}

export function validateConfig(v: ConfigValues): EnvironmentErrors {
  const e: EnvironmentErrors = {};
  if (/\s/.test(v.image.trim()) || v.image.length > 255) e.image = 'An image reference such as python:3.12-slim, without spaces; leave empty for the server default.';
  for (const m of MANAGERS) {
    const list = entries(v.packages[m]);
    const problem = list.map(packageProblem).find(Boolean);
    if (problem) e[m] = problem;
    else if (list.length > 200) e[m] = `At most 200 ${m} packages.`;
  }
  return e;
}

export function validateEnvironment(v: EnvironmentValues): EnvironmentErrors {
  const e = validateConfig(v);
  if (!v.name.trim()) e.name = 'A name is required.';
  else if (v.name.length > NAME_MAX) e.name = `At most ${NAME_MAX} characters.`;
  else if (v.name.includes('/')) e.name = "A name cannot contain '/' (it appears in URLs).";
  if (v.description.length > DESCRIPTION_MAX) e.description = `At most ${DESCRIPTION_MAX} characters (${v.description.length} now).`;
  return e;
}

/** The configuration the form describes (the whole of it: an update replaces the stored one). */
export function toConfig(v: ConfigValues, keep?: EnvironmentConfig): EnvironmentConfig {
  const packages = Object.fromEntries(MANAGERS.map((m) => [m, entries(v.packages[m])])) as unknown as Packages;
  return {
    backend: keep?.backend ?? null,
    image: v.image.trim() || null,
    packages,
    networking: keep?.networking ?? { type: 'unrestricted' },
    network: policyBody(v.network),
    runtime_class: v.runtime_class || null,
  };
}

export function packageCount(c: EnvironmentConfig): number {
  const p = (c.packages ?? {}) as Record<Manager, string[] | undefined>;
  return MANAGERS.reduce((n, m) => n + (p[m]?.length ?? 0), 0);
}

/** How a build's state reads: its colour, and a sentence for people. */
export function buildLabel(b: Environment['build']): { color: string; text: string } {
  switch (b.status) {
    case 'building':
      return { color: 'blue', text: 'Building the image; sessions created now wait for it' };
    case 'ready':
      return { color: 'green', text: `Image ready: ${b.image ?? ''}` };
    case 'failed':
      return { color: 'red', text: `Build failed: ${b.error ?? 'no reason given'}` };
    default:
      return { color: 'gray', text: 'No packages: sessions boot the image as it is' };
  }
}

/** The last build's log, as text. */
export function buildLog(ref: string): Promise<string> {
  return unwrap(api.GET('/api/environments/{ref}/build-log', { params: { path: { ref } }, headers: { Accept: 'text/plain' }, parseAs: 'text' }));
}
