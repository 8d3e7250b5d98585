import { lazy, type ReactElement } from 'react';
import { Navigate, Route, Routes } from 'react-router-dom';
import { EmptyState } from './components/common';
import { AppContextProvider } from './context';
import { Layout } from './Layout';
import { ROUTES, type RoutePath } from './routes';
import SessionsPage from './features/sessions/SessionsPage';

const AgentsPage = lazy(() => import('./features/agents/AgentsPage'));
const AgentDetailPage = lazy(() => import('./features/agents/AgentDetailPage'));
const AgentFormPage = lazy(() => import('./features/agents/AgentFormPage'));
const SessionDetailPage = lazy(() => import('./features/sessions/SessionDetailPage'));
const SchedulesPage = lazy(() => import('./features/schedules/SchedulesPage'));
const WebhooksPage = lazy(() => import('./features/webhooks/WebhooksPage'));
const WebhookDetailPage = lazy(() => import('./features/webhooks/WebhookDetailPage'));
const ApiKeysPage = lazy(() => import('./features/api-keys/ApiKeysPage'));
const SecretsPage = lazy(() => import('./features/secrets/SecretsPage'));
const GitKeysPage = lazy(() => import('./features/git-keys/GitKeysPage'));
const EnvironmentsPage = lazy(() => import('./features/environments/EnvironmentsPage'));
const EnvironmentDetailPage = lazy(() => import('./features/environments/EnvironmentDetailPage'));
const SkillBundlesPage = lazy(() => import('./features/skills/SkillBundlesPage'));
const SkillBundleDetailPage = lazy(() => import('./features/skills/SkillBundleDetailPage'));
const ProjectsPage = lazy(() => import('./features/projects/ProjectsPage'));
const ProjectDetailPage = lazy(() => import('./features/projects/ProjectDetailPage'));
const UsersPage = lazy(() => import('./features/users/UsersPage'));
const ModelsPage = lazy(() => import('./features/models/ModelsPage'));
const AccountPage = lazy(() => import('./features/account/AccountPage'));
const UsagePage = lazy(() => import('./features/usage/UsagePage'));
const DevelopersPage = lazy(() => import('./features/developers/DevelopersPage'));

/** The page of each route: typed by the list in routes.ts, so neither can miss an entry. */
const PAGES: Record<RoutePath, ReactElement> = {
  sessions: <SessionsPage />,
  'sessions/:id/:tab?': <SessionDetailPage />,
  agents: <AgentsPage />,
  'agents/new': <AgentFormPage />,
  'agents/:ref': <AgentDetailPage />,
  'agents/:ref/edit': <AgentFormPage />,
  schedules: <SchedulesPage />,
  webhooks: <WebhooksPage />,
  'webhooks/:id': <WebhookDetailPage />,
  keys: <ApiKeysPage />,
  secrets: <SecretsPage />,
  'git-keys': <GitKeysPage />,
  environments: <EnvironmentsPage />,
  'environments/:ref': <EnvironmentDetailPage />,
  'skill-bundles': <SkillBundlesPage />,
  'skill-bundles/:slug': <SkillBundleDetailPage />,
  projects: <ProjectsPage />,
  'projects/:ref': <ProjectDetailPage />,
  users: <UsersPage />,
  models: <ModelsPage />,
  usage: <UsagePage />,
  developers: <DevelopersPage />,
  account: <AccountPage />,
};

export function App() {
  return (
    <AppContextProvider>
      <Routes>
        <Route element={<Layout />}>
          <Route index element={<Navigate to="/sessions" replace />} />
          {ROUTES.map((path) => (
            <Route key={path} path={path} element={PAGES[path]} />
          ))}
          <Route path="*" element={<EmptyState title="Page not found">Pick a page from the navigation.</EmptyState>} />
        </Route>
      </Routes>
    </AppContextProvider>
  );
}
