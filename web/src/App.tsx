import { lazy, type ReactElement } from 'react';
import { Navigate, Route, Routes } from 'react-router-dom';
import { EmptyState } from './components/common';
import { AppContextProvider } from './context';
import { Layout } from './Layout';
import { ROUTES, type RoutePath } from './routes';
import SessionsPage from './pages/sessions/SessionsPage';

const AgentsPage = lazy(() => import('./pages/agents/AgentsPage'));
const AgentDetailPage = lazy(() => import('./pages/agents/AgentDetailPage'));
const AgentFormPage = lazy(() => import('./pages/agents/AgentFormPage'));
const SessionDetailPage = lazy(() => import('./pages/sessions/SessionDetailPage'));
const WebhooksPage = lazy(() => import('./pages/webhooks/WebhooksPage'));
const WebhookDetailPage = lazy(() => import('./pages/webhooks/WebhookDetailPage'));
const ApiKeysPage = lazy(() => import('./pages/admin/ApiKeysPage'));
const SecretsPage = lazy(() => import('./pages/admin/SecretsPage'));
const GitKeysPage = lazy(() => import('./pages/admin/GitKeysPage'));
const EnvironmentsPage = lazy(() => import('./pages/environments/EnvironmentsPage'));
const EnvironmentDetailPage = lazy(() => import('./pages/environments/EnvironmentDetailPage'));
const SkillBundlesPage = lazy(() => import('./pages/skills/SkillBundlesPage'));
const SkillBundleDetailPage = lazy(() => import('./pages/skills/SkillBundleDetailPage'));
const ProjectsPage = lazy(() => import('./pages/admin/ProjectsPage'));
const ProjectDetailPage = lazy(() => import('./pages/admin/ProjectDetailPage'));
const UsersPage = lazy(() => import('./pages/admin/UsersPage'));
const ModelsPage = lazy(() => import('./pages/admin/ModelsPage'));
const AccountPage = lazy(() => import('./pages/admin/AccountPage'));
const UsagePage = lazy(() => import('./pages/usage/UsagePage'));
const DevelopersPage = lazy(() => import('./pages/DevelopersPage'));

/** The page of each route: typed by the list in routes.ts, so neither can miss an entry. */
const PAGES: Record<RoutePath, ReactElement> = {
  sessions: <SessionsPage />,
  'sessions/:id/:tab?': <SessionDetailPage />,
  agents: <AgentsPage />,
  'agents/new': <AgentFormPage />,
  'agents/:ref': <AgentDetailPage />,
  'agents/:ref/edit': <AgentFormPage />,
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
