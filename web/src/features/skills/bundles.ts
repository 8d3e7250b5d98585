// Skill bundles: the create form's validation with the server's rules (SkillBundleCreate in
// openapi.json, and the domain's "never shaped like a UUID"), the multipart push, how a refused
// push is titled, and the "push from code" lines. Kept apart from the pages so it is tested alone.
import { api, ApiError, formBody, unwrap, type Schemas } from '../../api/client';
import { SLUG_RE } from '../../lib/rules';

export type SkillBundle = Schemas['SkillBundle'];
export type SkillBundleVersion = Schemas['SkillBundleVersion'];

export const DESCRIPTION_MAX = 4000;

/** What `uuid::Uuid::try_parse` takes among slug-shaped strings: 32 hex digits, or 8-4-4-4-12. */
export const UUID_SHAPED_RE = /^(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

export function validateBundle(v: { slug: string; description: string }): { slug?: string; description?: string } {
  const e: { slug?: string; description?: string } = {};
  if (!SLUG_RE.test(v.slug)) e.slug = 'Lowercase letters, digits and -, starting with a letter or digit; at most 63 characters.';
  else if (UUID_SHAPED_RE.test(v.slug)) e.slug = 'This looks like an id: a slug must not be shaped like a UUID.';
  if (v.description.length > DESCRIPTION_MAX) e.description = `At most ${DESCRIPTION_MAX} characters (${v.description.length} now).`;
  return e;
}

/** POST …/versions with the one part the server takes, `file`. */
export function pushVersion(slug: string, file: File): Promise<SkillBundleVersion> {
  return unwrap(
    api.POST('/api/skill-bundles/{slug}/versions', {
      params: { path: { slug } },
      body: formBody({ file: [file, file.name || 'bundle.tar.gz'] }),
    }),
  );
}

/** The heading of a failed push: what kind of refusal it was (the alert shows the detail). */
export function pushErrorTitle(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.status === 400) return 'The archive was refused; nothing was stored';
    if (error.status === 413) return 'The archive is too large (at most 200 MiB as uploaded)';
    if (error.status === 404) return 'The bundle no longer exists';
    return `The push failed (${error.status})`;
  }
  return 'The push failed';
}

/** The first characters of a sha256, enough to tell versions apart at a glance. */
export const shortDigest = (digest: string, n = 12) => digest.slice(0, n);

/** The versions, newest first (the server already sends them so; this keeps it true after edits). */
export const newestFirst = (versions: SkillBundleVersion[]) => [...versions].sort((a, b) => b.version - a.version);

/** The file of a drop: the first file dragged in, or null when none was (text, a link). */
export function droppedFile(dt: Pick<DataTransfer, 'files'> | null): File | null {
  return dt && dt.files && dt.files.length > 0 ? dt.files[0] : null;
}

/** curl and Python lines that create the bundle and push a version from CI. */
export function bundleSnippets(o: { base: string; slug: string; project?: string | null; authRequired: boolean; description?: string }) {
  const q = (s: string) => JSON.stringify(s);
  const headers = [
    ...(o.authRequired ? ['-H "Authorization: Bearer $SANDBOX_AGENTS_API_KEY"'] : []),
    ...(o.project ? [`-H "X-Project: ${o.project}"`] : []),
  ];
  const h = headers.map((x) => `  ${x} \\\n`).join('');
  const curl = `# Once: register the bundle
curl -fsS -X POST ${o.base}/api/skill-bundles \\
${h}  -H "Content-Type: application/json" \\
  -d '${JSON.stringify({ slug: o.slug, description: o.description ?? '' })}'

# From CI, on every change: archive the skills tree and push it as the next version
tar -czf bundle.tgz -C skills .
curl -fsS -X POST ${o.base}/api/skill-bundles/${encodeURIComponent(o.slug)}/versions \\
${h}  -F file=@bundle.tgz`;
  const python = `from sandbox_agents import Client

client = Client()  # reads SANDBOX_AGENTS_BASE_URL, SANDBOX_AGENTS_API_KEY, SANDBOX_AGENTS_PROJECT

client.skill_bundles.create(${q(o.slug)}${o.description ? `, description=${q(o.description)}` : ''})  # once

pushed = client.skill_bundles.push(${q(o.slug)}, "bundle.tgz")
print(pushed.version, pushed.file_count, pushed.skills)

for version in client.skill_bundles.versions(${q(o.slug)}):
    print(version.version, version.digest[:12], version.skills)`;
  return { curl, python };
}
