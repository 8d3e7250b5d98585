import { describe, expect, it } from 'vitest';
import type { Agent } from '../api/client';
import {
  changedByLabel,
  changedByParts,
  changesText,
  defaultComparison,
  definitionText,
  differingFields,
  historyPath,
  pageOfVersion,
  parseVersion,
  pinLabel,
  sessionVersionChoices,
  versionChoiceBody,
  versionChoices,
  type AgentVersionSummary,
} from './agentVersions';

const agent = (over: Partial<Agent> = {}) =>
  ({
    id: 'A1',
    slug: 'analyst',
    name: 'Analyst',
    instructions: 'Be brief.',
    model: 'fake-model',
    subagents: [],
    version: 1,
    archived_at: null,
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
    ...over,
  }) as Agent;

const summary = (version: number, over: Partial<AgentVersionSummary> = {}): AgentVersionSummary => ({ version, created_at: '2026-01-01T00:00:00Z', changed_by: null, changed: [], restored_from: null, ...over });

describe('definitionText', () => {
  it('is the definition as pretty JSON, without the fields that are not the definition', () => {
    const text = definitionText(agent({ version: 3, updated_at: '2026-02-02T00:00:00Z', archived_at: '2026-03-03T00:00:00Z' }));
    expect(text).toBe('{\n  "slug": "analyst",\n  "name": "Analyst",\n  "instructions": "Be brief.",\n  "model": "fake-model",\n  "subagents": []\n}\n');
    expect(text).not.toMatch(/updated_at|"version"|archived_at|created_at|"id"/);
  });

  it('is the same text for two versions that differ only in bookkeeping', () => {
    expect(definitionText(agent({ version: 1 }))).toBe(definitionText(agent({ version: 4, updated_at: '2027-01-01T00:00:00Z' })));
  });

  it('puts a changed field on its own line, so a diff shows old and new', () => {
    const a = definitionText(agent({ instructions: 'Old words.' })).split('\n');
    const b = definitionText(agent({ instructions: 'New words.' })).split('\n');
    expect(a.filter((l, i) => l !== b[i])).toEqual(['  "instructions": "Old words.",']);
  });
});

describe('differingFields', () => {
  it('lists the top-level fields that differ, sorted, ignoring bookkeeping', () => {
    expect(differingFields(agent(), agent({ version: 9, updated_at: 'x' }))).toEqual([]);
    expect(differingFields(agent(), agent({ model: 'm2', instructions: 'x', subagents: [{ agent: 'helper' }] as Agent['subagents'] }))).toEqual(['instructions', 'model', 'subagents']);
  });

  it('counts a field absent on one side and null on the other as the same', () => {
    const a = agent();
    const b = { ...agent(), budget: null } as Agent;
    expect(differingFields(a, b)).toEqual([]);
    expect(differingFields(a, { ...agent(), budget: { max_turns: 3 } } as Agent)).toEqual(['budget']);
  });
});

describe('who made a version', () => {
  it('says the kind of credential and its name', () => {
    expect(changedByParts({ kind: 'user', id: 'u1', name: 'ada@example.com' })).toEqual({ kind: 'person', name: 'ada@example.com' });
    expect(changedByLabel({ kind: 'user', id: 'u1', name: 'ada@example.com' })).toBe('person ada@example.com');
    expect(changedByLabel({ kind: 'api_key', id: 'k1', name: 'ci' })).toBe('API key ci');
    expect(changedByLabel({ kind: 'token', id: null, name: null })).toBe('deployment token');
    expect(changedByLabel({ kind: 'open', id: null, name: null })).toBe('open mode');
  });

  it('falls back on the id, and says unknown when nobody is on record', () => {
    expect(changedByLabel({ kind: 'api_key', id: 'k1', name: null })).toBe('API key k1');
    expect(changedByLabel(null)).toBe('unknown');
    expect(changedByLabel(undefined)).toBe('unknown');
    expect(changedByLabel({ kind: 'robot', name: 'r2' })).toBe('robot r2');
  });
});

describe('changesText', () => {
  it('says creation, the fields changed, a no-op edit and a restore', () => {
    expect(changesText(summary(1))).toBe('created');
    expect(changesText(summary(2, { changed: ['instructions', 'model'] }))).toBe('instructions, model');
    expect(changesText(summary(3))).toBe('no changes');
    expect(changesText(summary(4, { changed: ['instructions'], restored_from: 1 }))).toBe('restored from v1: instructions');
  });
});

describe('pins and links', () => {
  it('says a pinned version and latest', () => {
    expect(pinLabel(3)).toBe('agent v3');
    expect(pinLabel('latest')).toBe('agent latest');
    expect(pinLabel(null)).toBeNull();
  });

  it('links to the History tab, at a version', () => {
    expect(historyPath('analyst', 3)).toBe('/agents/analyst?tab=history&version=3');
    expect(historyPath('analyst')).toBe('/agents/analyst?tab=history');
  });

  it('reads a version from the URL only when the agent has it', () => {
    expect(parseVersion('3', 5)).toBe(3);
    expect(parseVersion(' 5 ', 5)).toBe(5);
    for (const bad of ['0', '6', '-1', '2.5', 'latest', '', null, undefined]) expect(parseVersion(bad, 5)).toBeNull();
  });

  it('finds the page a version is on, newest first', () => {
    expect(pageOfVersion(45, 45, 20)).toBe(1);
    expect(pageOfVersion(26, 45, 20)).toBe(1);
    expect(pageOfVersion(25, 45, 20)).toBe(2);
    expect(pageOfVersion(1, 45, 20)).toBe(3);
    expect(pageOfVersion(99, 45, 20)).toBe(1);
  });
});

describe('defaultComparison', () => {
  it('compares the version before the current with it, or a focused one with the current', () => {
    expect(defaultComparison(1)).toBeNull();
    expect(defaultComparison(4)).toEqual({ from: 3, to: 4 });
    expect(defaultComparison(4, 2)).toEqual({ from: 2, to: 4 });
    expect(defaultComparison(4, 4)).toEqual({ from: 3, to: 4 });
    expect(defaultComparison(1, 1)).toBeNull();
  });
});

describe('the session’s agent version choice', () => {
  it('sends nothing for the current version, "latest", or an older number', () => {
    expect(versionChoiceBody('current')).toBeUndefined();
    expect(versionChoiceBody('')).toBeUndefined();
    expect(versionChoiceBody(null)).toBeUndefined();
    expect(versionChoiceBody('latest')).toBe('latest');
    expect(versionChoiceBody('2')).toBe(2);
    expect(versionChoiceBody('0')).toBeUndefined();
    expect(versionChoiceBody('x')).toBeUndefined();
  });

  it('offers the current (pinned), latest, then the older versions newest first', () => {
    const versions = [summary(3, { changed: ['model'] }), summary(1), summary(2, { changed: ['instructions'] })];
    expect(versionChoices(3, versions)).toEqual([
      { value: 'current', label: 'Current: v3 (pinned)' },
      { value: 'latest', label: 'Latest (follows every edit)' },
      { value: '2', label: 'v2 (instructions)' },
      { value: '1', label: 'v1 (created)' },
    ]);
    expect(versionChoices(null, []).map((o) => o.value)).toEqual(['current', 'latest']);
  });
});

describe('moving a session to another version', () => {
  it('offers latest and each version, the newest marked current, and keeps an older pin', () => {
    const versions = [summary(2, { changed: ['instructions'] }), summary(3, { changed: ['model'] })];
    expect(sessionVersionChoices(2, versions)).toEqual([
      { value: 'latest', label: 'Latest (follows every edit)' },
      { value: '3', label: 'v3 (current)' },
      { value: '2', label: 'v2 (instructions)' },
    ]);
    expect(sessionVersionChoices(1, versions).map((o) => o.value)).toEqual(['latest', '3', '2', '1']);
    expect(sessionVersionChoices('latest', []).map((o) => o.value)).toEqual(['latest']);
  });
});
