// The query keys are built in queryKeys.ts alone, and their shapes say what one invalidation
// refetches: these tests read the sources for keys written elsewhere, and run the invalidations
// the pages make against a real QueryClient.
import { QueryClient, type QueryKey } from '@tanstack/react-query';
import { describe, expect, it } from 'vitest';
import { lineOf, readSource, sourceFiles, withoutComments } from '../test/sources';
import { isProjectScoped, keys } from './queryKeys';

const MODULE = 'api/queryKeys.ts';

/**
 * Each place in `text` that builds a query key itself: a literal array after `queryKey:`, or as
 * the first argument of `setQueryData`/`getQueryData`, or any `queryKey:` whose value is not a
 * call into the module (`keys.…`, imported under another name as `queryKeys.…`).
 */
function keysBuiltHere(text: string): number[] {
  const code = withoutComments(text);
  const rules = [/\bqueryKey\s*:(?!\s*(?:keys|queryKeys)\s*\.)/g, /\b(?:set|get)QueryData\s*(?:<[^>]*>)?\s*\((?!\s*(?:keys|queryKeys)\s*\.)/g];
  return rules.flatMap((re) => [...code.matchAll(re)].map((m) => lineOf(code, m.index))).sort((a, b) => a - b);
}

describe('query keys come from api/queryKeys.ts', () => {
  const files = sourceFiles();

  it('finds the sources it checks', () => {
    expect(files).toContain(MODULE);
    expect(files.length).toBeGreaterThan(50);
  });

  it('no other file writes a key of its own', () => {
    const offences = files
      .filter((f) => f !== MODULE)
      .flatMap((f) => keysBuiltHere(readSource(f)).map((line) => `${f}:${line}: a query key not built by api/queryKeys.ts (add a factory there)`));
    expect(offences).toEqual([]);
  });

  it('catches a literal key, a local key function and a literal in setQueryData, and lets the module’s keys and prose be', () => {
    expect(keysBuiltHere("useQuery({ queryKey: ['agents'], queryFn });")).toEqual([1]);
    expect(keysBuiltHere('const k = (id) => [1];\nqc.invalidateQueries({ queryKey: listKey(id), exact: true });')).toEqual([2]);
    expect(keysBuiltHere("qc.setQueryData(['agent', a.slug], a);")).toEqual([1]);
    expect(keysBuiltHere("qc.setQueryData<Agent>(['agent', a.slug], a);")).toEqual([1]);
    expect(
      keysBuiltHere("useQuery({ queryKey: keys.agents.all() });\nqc.setQueryData(keys.agents.detail(s), a);\nuseQuery({ queryKey: queryKeys.apiKeys() });\n// queryKey: ['x']\nq.queryKey[0];"),
    ).toEqual([]);
  });
});

/** The keys of `cached` that `invalidate` marks stale, as the pages call it. */
function invalidated(cached: QueryKey[], invalidate: QueryKey, exact = false): QueryKey[] {
  const qc = new QueryClient();
  for (const k of cached) qc.setQueryData(k, 'data');
  void qc.invalidateQueries({ queryKey: invalidate, exact, refetchType: 'none' });
  return cached.filter((k) => qc.getQueryState(k)?.isInvalidated);
}

describe('what an invalidation refetches', () => {
  it('a session change refetches every session list, not the open sessions', () => {
    const list = keys.sessions.list({ agent: 'a', environment: null, status: 'running', page: 2 });
    const ofAgent = keys.sessions.ofAgent('a', 10);
    expect(invalidated([list, ofAgent, keys.sessions.detail('s1')], keys.sessions.all())).toEqual([list, ofAgent]);
  });

  it('an agent change refetches every agent list, filtered or not, not the agents or their memory', () => {
    const lists = [keys.agents.all(), keys.agents.list({ archived: true }), keys.agents.list({ archived: false })];
    expect(invalidated([...lists, keys.agents.detail('a'), keys.agents.memory('a')], keys.agents.all())).toEqual(lists);
  });

  it("an agent edit or restore refetches every page of its history, not its versions read whole nor another agent's history", () => {
    const pages = [keys.agents.versionsPage('a', { limit: 20, offset: 0 }), keys.agents.versionsPage('a', { limit: 100, offset: 0 })];
    const cached = [...pages, keys.agents.versionsPage('b', { limit: 20, offset: 0 }), keys.agents.version('a', 1), keys.agents.detail('a'), keys.agents.all()];
    expect(invalidated(cached, keys.agents.versions('a'))).toEqual(pages);
    expect(invalidated(cached, keys.agents.all())).toEqual([keys.agents.all()]);
  });

  it('an environment change refetches every environment list, not its detail or build log', () => {
    const lists = [keys.environments.list({ archived: true }), keys.environments.list({ archived: false })];
    expect(invalidated([...lists, keys.environments.detail('e'), keys.environments.buildLog('e', 'ready')], keys.environments.all())).toEqual(lists);
  });

  it('a skill bundle or webhook list change leaves the detail pages alone', () => {
    expect(invalidated([keys.skillBundles.all(), keys.skillBundles.detail('b'), keys.skillBundles.versions('b')], keys.skillBundles.all())).toEqual([keys.skillBundles.all()]);
    expect(invalidated([keys.webhooks.all(), keys.webhooks.detail('w'), keys.webhooks.deliveries('w')], keys.webhooks.all())).toEqual([keys.webhooks.all()]);
  });

  it("a redelivery refetches every page of that webhook's deliveries and no other webhook's", () => {
    const pages = [keys.webhooks.deliveriesPage('w', { status: null, page: 1 }), keys.webhooks.deliveriesPage('w', { status: 'failed', page: 3 })];
    const other = keys.webhooks.deliveriesPage('v', { status: null, page: 1 });
    expect(invalidated([...pages, other, keys.webhooks.attempts('d')], keys.webhooks.deliveries('w'))).toEqual(pages);
  });

  it("an uploaded file refetches the session's directories, not file contents or another session's", () => {
    const dirs = [keys.sessions.directory('s', ''), keys.sessions.directory('s', 'src')];
    const cached = [...dirs, keys.sessions.directory('t', ''), keys.sessions.fileContent('s', 'a.txt', 3)];
    expect(invalidated(cached, keys.sessions.files('s'))).toEqual(dirs);
  });

  it('the process list is refetched alone, exactly (each process is a key under it)', () => {
    const list = keys.sessions.processes('s');
    const detail = keys.sessions.process('s', 'p');
    expect(detail.slice(0, list.length)).toEqual(list);
    expect(invalidated([list, detail], list, true)).toEqual([list]);
  });

  it("usage refetches the page's reports and the agents' figures together, and no session", () => {
    const reports = [keys.usage.report({ from: 'a', to: 'b', groupBy: 'day', agent: null }), keys.usage.report({ from: 'a', to: 'b', groupBy: 'model', agent: 'x' }), keys.usage.ofAgent('x')];
    expect(invalidated([...reports, keys.sessions.detail('s'), keys.agents.detail('x')], keys.usage.all())).toEqual(reports);
  });

  it('a change of project keeps only what no project owns', () => {
    const kept = [keys.me(), keys.projects.all(), keys.webhooks.eventTypes(), keys.models(), keys.backends()];
    expect(kept.filter(isProjectScoped)).toEqual([]);
    const scoped = [keys.agents.all(), keys.sessions.detail('s'), keys.secrets(), keys.projects.detail('p'), keys.usage.report({ from: 'a', to: 'b', groupBy: 'model', agent: null }), keys.usage.ofAgent('a')];
    expect(scoped.every(isProjectScoped)).toBe(true);
  });
});
