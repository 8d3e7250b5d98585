import { lazy } from 'react';
import { Navigate, Route, Routes } from 'react-router-dom';
import { EmptyState } from './components/common';
import { AppContextProvider } from './context';
import { Layout } from './Layout';
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

export function App() {
  return (
    <AppContextProvider>
      <Routes>
        <Route element={<Layout />}>
          <Route index element={<Navigate to="/sessions" replace />} />
          <Route path="sessions" element={<SessionsPage />} />
          <Route path="sessions/:id/:tab?" element={<SessionDetailPage />} />
          <Route path="agents" element={<AgentsPage />} />
          <Route path="agents/new" element={<AgentFormPage />} />
          <Route path="agents/:ref" element={<AgentDetailPage />} />
          <Route path="agents/:ref/edit" element={<AgentFormPage />} />
          <Route path="webhooks" element={<WebhooksPage />} />
          <Route path="webhooks/:id" element={<WebhookDetailPage />} />
          <Route path="keys" element={<ApiKeysPage />} />
          <Route path="secrets" element={<SecretsPage />} />
          <Route path="git-keys" element={<GitKeysPage />} />
          <Route path="environments" element={<EnvironmentsPage />} />
          <Route path="environments/:ref" element={<EnvironmentDetailPage />} />
          <Route path="skill-bundles" element={<SkillBundlesPage />} />
          <Route path="skill-bundles/:slug" element={<SkillBundleDetailPage />} />
          <Route path="projects" element={<ProjectsPage />} />
          <Route path="projects/:ref" element={<ProjectDetailPage />} />
          <Route path="users" element={<UsersPage />} />
          <Route path="models" element={<ModelsPage />} />
          <Route path="usage" element={<UsagePage />} />
          <Route path="developers" element={<DevelopersPage />} />
          <Route path="account" element={<AccountPage />} />
          <Route path="*" element={<EmptyState title="Page not found">Pick a page from the navigation.</EmptyState>} />
        </Route>
      </Routes>
    </AppContextProvider>
  );
}
