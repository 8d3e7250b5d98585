// The shape of the UI's sources: shared code (api/, components/, lib/) ← features ← the app
// (App.tsx, Layout.tsx, main.tsx, routes.ts). A feature does not reach into another: what two
// share lives in components/ or lib/, or is offered by the feature's index.ts (its public
// module). A page is imported by App.tsx alone, so no page grows on another's internals.
import { existsSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lineOf, readSource, SRC, sourceFiles, withoutComments } from '../test/sources';

/** The files of the app shell: they compose the features, and nothing imports them but each other. */
const APP = ['App.tsx', 'Layout.tsx', 'main.tsx', 'routes.ts'];

/** Each relative import of `text` (static, dynamic, or a re-export) and its line. */
function importsOf(text: string): { spec: string; line: number }[] {
  const code = withoutComments(text);
  const re = /\b(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;
  return [...code.matchAll(re)].map((m) => ({ spec: m[1], line: lineOf(code, m.index) }));
}

/** The file an import names, relative to src/ (`features/x/y.ts`, `features/x/index.ts`). */
function resolve(from: string, spec: string): string {
  const base = posix.normalize(posix.join(posix.dirname(from), spec));
  for (const candidate of [`${base}.ts`, `${base}.tsx`, `${base}.d.ts`, `${base}/index.ts`, `${base}/index.tsx`, base]) {
    if (existsSync(join(SRC, candidate)) && !statSync(join(SRC, candidate)).isDirectory()) return candidate;
  }
  return `${base} (no such file)`;
}

const featureOf = (file: string) => /^features\/([^/]+)\//.exec(file)?.[1] ?? null;
const isPage = (file: string) => /Page\.tsx$/.test(file);
const isTest = (file: string) => /\.test\.tsx?$/.test(file);

/** Why `from` may not import `target`, or null when it may. */
function offence(from: string, target: string): string | null {
  const mine = featureOf(from);
  const theirs = featureOf(target);
  if (APP.includes(target) && !APP.includes(from)) return 'imports the app shell (move what it needs to components/ or lib/)';
  if (theirs && !mine && !APP.includes(from)) return `shared code imports the ${theirs} feature (shared code comes first: move it into components/ or lib/)`;
  if (theirs && mine && theirs !== mine && !/^features\/[^/]+\/index\.tsx?$/.test(target)) {
    return `reaches into the ${theirs} feature (share through components/ or lib/, or export it from features/${theirs}/index.ts)`;
  }
  if (isPage(target) && from !== 'App.tsx' && !(isTest(from) && mine === theirs)) return 'imports a page (pages are routed by App.tsx; move what they share out of the page)';
  return null;
}

describe('features stay apart', () => {
  // This file's own examples are strings, not imports.
  const files = sourceFiles({ tests: true }).filter((f) => f !== 'features/boundaries.test.ts');

  it('finds the sources it checks', () => {
    expect(files).toContain('features/sessions/SessionDetailPage.tsx');
    expect(files).toContain('features/sessions/index.ts');
    expect(files.filter((f) => featureOf(f)).length).toBeGreaterThan(50);
  });

  it('no file reaches into another feature, the app shell or a page', () => {
    const found = files.flatMap((file) =>
      importsOf(readSource(file)).flatMap(({ spec, line }) => {
        const why = offence(file, resolve(file, spec));
        return why ? [`${file}:${line}: ${spec}: ${why}`] : [];
      }),
    );
    expect(found).toEqual([]);
  });

  it('every import it checks names a file that exists', () => {
    const missing = files.flatMap((file) => importsOf(readSource(file)).filter(({ spec }) => resolve(file, spec).endsWith('(no such file)')).map(({ spec }) => `${file}: ${spec}`));
    expect(missing).toEqual([]);
  });

  it('tells each kind of import apart', () => {
    expect(importsOf("import { a } from './x';\nexport { b } from '../y';\nconst P = lazy(() => import('./Page'));\n// import { c } from './z';\nimport x from 'react';")).toEqual([
      { spec: './x', line: 1 },
      { spec: '../y', line: 2 },
      { spec: './Page', line: 3 },
    ]);
    expect(offence('features/agents/AgentDetailPage.tsx', 'features/sessions/StartSessionModal.tsx')).toMatch(/reaches into the sessions feature/);
    expect(offence('features/agents/AgentDetailPage.tsx', 'features/sessions/index.ts')).toBeNull();
    expect(offence('features/sessions/SessionDetailPage.tsx', 'features/sessions/SessionsPage.tsx')).toMatch(/imports a page/);
    expect(offence('features/sessions/SessionsPage.test.tsx', 'features/sessions/SessionsPage.tsx')).toBeNull();
    expect(offence('components/common.tsx', 'features/sessions/Transcript.tsx')).toMatch(/shared code imports the sessions feature/);
    expect(offence('features/skills/SkillBundleDetailPage.tsx', 'Layout.tsx')).toMatch(/app shell/);
    expect(offence('App.tsx', 'features/agents/AgentsPage.tsx')).toBeNull();
    expect(offence('features/agents/model.ts', 'lib/rules.ts')).toBeNull();
  });
});
