// Every query key of the UI, built here and nowhere else (`queryKeys.test.ts` fails on a
// literal `queryKey: [` outside this file), so an invalidation names exactly the queries it
// means and cannot drift from them.
//
// TanStack Query matches an invalidation by prefix: `all()` of a resource is the first
// element(s) of every key of that resource's lists, so invalidating it refetches each list
// whatever its filter or page. A detail key (`detail(id)`) starts with another word on
// purpose: a change to one item does not refetch every list, and a list's invalidation does not
// refetch every open detail. What is invalidated together is said by the keys' shapes below,
// and checked by the test.

/** Filters of the agent and environment lists (archived ones included or not). */
export type ArchivedFilter = { archived: boolean };

export const keys = {
  /** The signed-in caller (GET /api/me). */
  me: () => ['me'] as const,
  /** The caller's own profile (GET /api/me/profile). */
  profile: () => ['profile'] as const,
  /** The model catalogue. */
  models: () => ['models'] as const,
  /** The sandbox backends the server runs (GET /api/backends): configured at its start, the same for every project. */
  backends: () => ['backends'] as const,
  secrets: () => ['secrets'] as const,
  users: () => ['users'] as const,
  apiKeys: () => ['api-keys'] as const,
  gitKeys: () => ['git-keys'] as const,

  projects: {
    /** The projects the caller sees. */
    all: () => ['projects'] as const,
    detail: (ref: string) => ['project', ref] as const,
    members: (ref: string) => ['members', ref] as const,
    /** Its spend this calendar month against its limits (GET /api/projects/{ref}/spend): read
     * again after a change of its limits, and after a turn ends. */
    spend: (ref: string) => ['project-spend', ref] as const,
  },

  agents: {
    /** Every agent list, whatever its filter, and the unfiltered list itself. */
    all: () => ['agents'] as const,
    list: (filter: ArchivedFilter) => ['agents', filter] as const,
    detail: (ref: string) => ['agent', ref] as const,
    memory: (slug: string) => ['agent-memory', slug] as const,
    /** Every page of an agent's history (its versions, newest first): read again after an
     * edit or a restore. */
    versions: (slug: string) => ['agent-versions', slug] as const,
    versionsPage: (slug: string, page: { limit: number; offset: number }) => ['agent-versions', slug, page] as const,
    /** One version read whole: a version never changes, so no edit refetches it. */
    version: (slug: string, version: number) => ['agent-version', slug, version] as const,
    /** Its MCP servers as the control plane reaches them now (GET …/mcp-servers): read again
     * after an edit of them, and when a person asks. */
    mcpServers: (slug: string) => ['agent-mcp-servers', slug] as const,
  },

  sessions: {
    /** Every session list, whatever its filter or page (an agent's recent ones included). */
    all: () => ['sessions'] as const,
    list: (filter: { agent: string | null; environment: string | null; status: string | null; page: number }) => ['sessions', filter] as const,
    /** The newest sessions of one agent (its page's table). */
    ofAgent: (agent: string, limit: number) => ['sessions', { agent, limit }] as const,
    detail: (id: string) => ['session', id] as const,
    toolCalls: (id: string) => ['tool-calls', id] as const,
    /** The calls that wait for a person's approval (GET …/tool-confirmations). */
    toolConfirmations: (id: string) => ['tool-confirmations', id] as const,
    snapshots: (id: string) => ['snapshots', id] as const,
    /** The session's egress log (hosts, connections, bytes, refusals). */
    egress: (id: string) => ['egress', id] as const,
    notebook: (id: string) => ['notebook', id] as const,
    /** Every directory listing of a session's workspace. */
    files: (id: string) => ['files', id] as const,
    directory: (id: string, path: string) => ['files', id, path] as const,
    /** A file's content; its size is part of the key, so a file that changed size is read again. */
    fileContent: (id: string, path: string, size: number | null | undefined) => ['file-content', id, path, size] as const,
    /** The session's process list, and the prefix of each process's detail. */
    processes: (id: string) => ['processes', id] as const,
    process: (id: string, processId: string) => ['processes', id, processId] as const,
  },

  schedules: {
    /** Every schedule list: the project's page (one list per agent) and each agent's tab. */
    all: () => ['schedules'] as const,
    ofAgent: (agent: string) => ['schedules', agent] as const,
    /** Every page of a schedule's fires. */
    fires: (agent: string, id: string) => ['schedule-fires', agent, id] as const,
    firesPage: (agent: string, id: string, page: number) => ['schedule-fires', agent, id, page] as const,
  },

  environments: {
    /** Every environment list, whatever its filter. */
    all: () => ['environments'] as const,
    list: (filter: ArchivedFilter) => ['environments', filter] as const,
    detail: (ref: string) => ['environment', ref] as const,
    /** The build log, read again when the build's status changes. */
    buildLog: (ref: string, status: string | undefined) => ['environment-build-log', ref, status] as const,
  },

  skillBundles: {
    all: () => ['skill-bundles'] as const,
    detail: (slug: string) => ['skill-bundle', slug] as const,
    versions: (slug: string) => ['skill-bundle-versions', slug] as const,
  },

  webhooks: {
    all: () => ['webhooks'] as const,
    detail: (id: string) => ['webhook', id] as const,
    /** Every page of a webhook's deliveries, whatever the filter. */
    deliveries: (id: string) => ['deliveries', id] as const,
    deliveriesPage: (id: string, filter: { status: string | null; page: number }) => ['deliveries', id, filter] as const,
    attempts: (deliveryId: string) => ['attempts', deliveryId] as const,
    /** The catalogue of event types: the server's, the same for every project. */
    eventTypes: () => ['event-types'] as const,
  },

  usage: {
    /** Every usage report, whatever its window, grouping or agent. */
    all: () => ['usage'] as const,
    /** The usage page's report: a window of whole days, grouped, of the project or of one agent. */
    report: (filter: { from: string; to: string; groupBy: string; agent: string | null }) => ['usage', filter] as const,
    /** One agent's usage over the API's default window (the last 30 days), for its page. */
    ofAgent: (agent: string) => ['usage', { agent, window: 'default' }] as const,
  },
};

/**
 * The roots of the keys whose data does not depend on the project picked: kept when the project
 * changes, while every other query is reset (context.tsx).
 */
const PROJECT_FREE: readonly string[] = [keys.me()[0], keys.projects.all()[0], keys.webhooks.eventTypes()[0], keys.models()[0], keys.backends()[0]];

/** Whether a cached query's data belongs to the project it was fetched for. */
export function isProjectScoped(queryKey: readonly unknown[]): boolean {
  return !PROJECT_FREE.includes(String(queryKey[0]));
}
