import { AppShell, Burger, Group, NavLink, ScrollArea, Select, Text, Anchor, Divider } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import {
  IconApi,
  IconBook,
  IconBrandPython,
  IconChartBar,
  IconCpu,
  IconFolders,
  IconKey,
  IconLock,
  IconMessages,
  IconRobot,
  IconUsers,
  IconWebhook,
  IconGitBranch,
  IconBox,
  IconClock,
  IconPackage,
  IconUserCircle,
} from '@tabler/icons-react';
import { Suspense, type ReactNode } from 'react';
import { NavLink as RouterNavLink, Outlet, useLocation } from 'react-router-dom';
import { PageFallback } from './components/PageFallback';
import { useAppContext } from './context';

type Item = { to: string; label: string; icon: ReactNode; operator?: boolean };

const groups: { label: string; items: Item[] }[] = [
  {
    label: 'Run',
    items: [
      { to: '/sessions', label: 'Sessions', icon: <IconMessages size={18} /> },
      { to: '/agents', label: 'Agents', icon: <IconRobot size={18} /> },
      { to: '/schedules', label: 'Schedules', icon: <IconClock size={18} /> },
      { to: '/usage', label: 'Usage', icon: <IconChartBar size={18} /> },
    ],
  },
  {
    label: 'Configure',
    items: [
      { to: '/webhooks', label: 'Webhooks', icon: <IconWebhook size={18} /> },
      { to: '/secrets', label: 'Secrets', icon: <IconLock size={18} /> },
      { to: '/git-keys', label: 'Git keys', icon: <IconGitBranch size={18} /> },
      { to: '/environments', label: 'Environments', icon: <IconBox size={18} /> },
      { to: '/skill-bundles', label: 'Skill bundles', icon: <IconPackage size={18} /> },
      { to: '/models', label: 'Models', icon: <IconCpu size={18} /> },
    ],
  },
  {
    label: 'Administer',
    items: [
      { to: '/projects', label: 'Projects', icon: <IconFolders size={18} /> },
      { to: '/keys', label: 'API keys', icon: <IconKey size={18} />, operator: true },
      { to: '/users', label: 'Users', icon: <IconUsers size={18} />, operator: true },
    ],
  },
  {
    label: 'Build',
    items: [
      { to: '/developers', label: 'Developers', icon: <IconBrandPython size={18} /> },
    ],
  },
];

export function Layout() {
  const [opened, { toggle, close }] = useDisclosure();
  const { me, operator, projects, project, setProject } = useAppContext();
  const location = useLocation();

  return (
    <AppShell
      header={{ height: 56 }}
      navbar={{ width: 230, breakpoint: 'sm', collapsed: { mobile: !opened } }}
      padding="md"
    >
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Anchor component={RouterNavLink} to="/sessions" underline="never" c="inherit">
              <Group gap={6} wrap="nowrap">
                <img src="/favicon.svg" alt="" width={24} height={24} />
                <Text fw={700} visibleFrom="xs">
                  Sandbox Agents
                </Text>
              </Group>
            </Anchor>
          </Group>
          <Group gap="sm" wrap="nowrap">
            <Select
              aria-label="Project"
              data-testid="project-switcher"
              size="xs"
              w={180}
              allowDeselect={false}
              data={projects.map((p) => ({ value: p.slug, label: p.name }))}
              value={project?.slug ?? null}
              placeholder={projects.length ? 'Project' : 'No project'}
              onChange={(v) => v && setProject(v)}
              comboboxProps={{ withinPortal: true }}
            />
            <Text size="sm" c="dimmed" visibleFrom="md" data-testid="me-label">
              {me.auth_required ? (me.label ?? me.kind ?? '') : 'open mode'}
            </Text>
            {me.auth_required && me.kind === 'user' && me.logout_url && (
              <Anchor href={me.logout_url} size="sm">
                Sign out
              </Anchor>
            )}
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Main navigation">
        <AppShell.Section grow component={ScrollArea}>
          {groups.map((g) => (
            <div key={g.label}>
              <Text size="xs" c="dimmed" fw={600} tt="uppercase" px="sm" pt="sm" pb={4}>
                {g.label}
              </Text>
              {g.items
                .filter((i) => !i.operator || operator)
                .map((i) => (
                  <NavLink
                    key={i.to}
                    component={RouterNavLink}
                    to={i.to}
                    label={i.label}
                    leftSection={i.icon}
                    active={location.pathname === i.to || location.pathname.startsWith(i.to + '/')}
                    onClick={close}
                  />
                ))}
            </div>
          ))}
        </AppShell.Section>
        <AppShell.Section>
          <Divider my="xs" />
          {me.kind === 'user' && (
            <NavLink component={RouterNavLink} to="/account" label="Account" leftSection={<IconUserCircle size={18} />} onClick={close} />
          )}
          <NavLink href="/docs" component="a" label="API reference" leftSection={<IconApi size={18} />} />
          <NavLink href="/openapi.json" component="a" label="OpenAPI" leftSection={<IconBook size={18} />} />
        </AppShell.Section>
      </AppShell.Navbar>
      <AppShell.Main>
        <Suspense fallback={<PageFallback />}>
          <Outlet />
        </Suspense>
      </AppShell.Main>
    </AppShell>
  );
}
