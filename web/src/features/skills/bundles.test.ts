import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/client';
import { bundleSnippets, droppedFile, newestFirst, pushErrorTitle, shortDigest, validateBundle, type SkillBundleVersion } from './bundles';

describe('validateBundle', () => {
  it('takes the slugs the server takes', () => {
    for (const slug of ['a', '0', 'voc-runtime', '0-a', 'a'.repeat(63), 'a-', 'deadbeef']) expect(validateBundle({ slug, description: '' })).toEqual({});
  });
  it('refuses the pattern’s outsiders', () => {
    for (const slug of ['', 'Voc', '-a', 'a_b', 'a b', 'a/b', 'ä', 'a'.repeat(64)]) expect(validateBundle({ slug, description: '' }).slug).toMatch(/Lowercase/);
  });
  it('refuses UUID-shaped slugs, hyphenated or simple', () => {
    expect(validateBundle({ slug: '0195f3a2-7b1c-7d00-8a3e-0123456789ab', description: '' }).slug).toMatch(/UUID/);
    expect(validateBundle({ slug: '0195f3a27b1c7d008a3e0123456789ab', description: '' }).slug).toMatch(/UUID/);
    // One character off is a slug again.
    expect(validateBundle({ slug: '0195f3a2-7b1c-7d00-8a3e-0123456789ag', description: '' })).toEqual({});
    expect(validateBundle({ slug: '0195f3a27b1c7d008a3e0123456789a', description: '' })).toEqual({});
  });
  it('holds the description to 4000 characters', () => {
    expect(validateBundle({ slug: 'a', description: 'x'.repeat(4000) })).toEqual({});
    expect(validateBundle({ slug: 'a', description: 'x'.repeat(4001) }).description).toMatch(/4000/);
  });
});

describe('pushes and versions', () => {
  it('titles a refusal by its status', () => {
    expect(pushErrorTitle(new ApiError(400, "member \"../x\" has a '..' component", null))).toMatch(/refused/);
    expect(pushErrorTitle(new ApiError(413, 'too large', null))).toMatch(/200 MiB/);
    expect(pushErrorTitle(new ApiError(500, 'boom', null))).toMatch(/500/);
    expect(pushErrorTitle(new TypeError('Failed to fetch'))).toBe('The push failed');
  });
  it('orders versions newest first and shortens digests', () => {
    const v = (version: number) => ({ version, size_bytes: 1, file_count: 1, digest: 'ab'.repeat(32), skills: [], created_at: '' }) as SkillBundleVersion;
    expect(newestFirst([v(1), v(3), v(2)]).map((x) => x.version)).toEqual([3, 2, 1]);
    expect(shortDigest('0123456789abcdef')).toBe('0123456789ab');
  });
  it('takes the first dropped file, or none', () => {
    const f = new File(['x'], 'bundle.tgz');
    expect(droppedFile({ files: [f] as unknown as FileList })).toBe(f);
    expect(droppedFile({ files: [] as unknown as FileList })).toBeNull();
    expect(droppedFile(null)).toBeNull();
  });
});

describe('bundleSnippets', () => {
  it('writes curl with -F file=@bundle.tgz and the published client’s calls', () => {
    const { curl, python } = bundleSnippets({ base: 'http://h', slug: 'voc', project: 'team', authRequired: true });
    expect(curl).toContain('-F file=@bundle.tgz');
    expect(curl).toContain('http://h/api/skill-bundles/voc/versions');
    expect(curl).toContain('X-Project: team');
    expect(curl).toContain('Authorization: Bearer $SANDBOX_AGENTS_API_KEY');
    expect(python).toContain('client.skill_bundles.create("voc")');
    expect(python).toContain('client.skill_bundles.push("voc", "bundle.tgz")');
    expect(python).toContain('client.skill_bundles.versions("voc")');
  });
  it('sends no key in open mode', () => {
    expect(bundleSnippets({ base: 'http://h', slug: 'voc', authRequired: false }).curl).not.toContain('Authorization');
  });
});
