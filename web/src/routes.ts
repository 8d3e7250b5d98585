// Every page of the UI, as the router matches them (under the layout). App.tsx renders a page
// for each entry (its table is typed by this list, so a path cannot be routed without being
// listed here), and the end-to-end sweep (e2e/all-routes.spec.ts) opens every entry against
// the real server, so a new page cannot be left out of it.
export const ROUTES = [
  'sessions',
  'sessions/:id/:tab?',
  'agents',
  'agents/new',
  'agents/:ref',
  'agents/:ref/edit',
  'schedules',
  'webhooks',
  'webhooks/:id',
  'keys',
  'secrets',
  'git-keys',
  'environments',
  'environments/:ref',
  'skill-bundles',
  'skill-bundles/:slug',
  'projects',
  'projects/:ref',
  'users',
  'models',
  'usage',
  'developers',
  'account',
] as const;

export type RoutePath = (typeof ROUTES)[number];
