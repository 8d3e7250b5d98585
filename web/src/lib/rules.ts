// The server's input rules that more than one form checks before sending (the patterns of
// openapi.json and the domain's path rules), written once so the forms cannot disagree.

/** An agent's or a skill bundle's slug (a subagent's reference too). */
export const SLUG_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const TOOL_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
/** An environment variable's name: what a secret is bound to. */
export const ENV_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The tools the control plane runs itself (the server's BUILTIN_TOOLS): no client tool may take these names. */
export const SANDBOX_TOOLS = ['shell', 'read_file', 'write_file', 'edit_file', 'list_files', 'load_skill'];

/** What is wrong with a manifest entry's path (relative to the workspace, inside it); null when nothing. */
export function validateEntryPath(path: string): string | null {
  if (path === '' || path === '.' || path === './') return 'names the workspace itself';
  if (path.startsWith('/')) return 'must be relative to the workspace (no leading /)';
  if (path.includes('\0')) return 'contains NUL';
  if (path.split('/').includes('..')) return 'must not contain ..';
  return null;
}
