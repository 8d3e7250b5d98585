// Who the person is (`GET /api/me`) and which project they act in (`X-Project`).
import { Button, Center, Loader, Stack, Text } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { createContext, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { api, setApiProject, unwrap, type Me, type Project } from './api/client';
import { isProjectScoped, keys } from './api/queryKeys';
import { ErrorAlert } from './components/common';

const STORAGE_KEY = 'sandbox-agents.project';

export type Context = {
  me: Me;
  /** May manage users and API keys: an operator, the shared token, or open mode. */
  operator: boolean;
  projects: Project[];
  project: Project | null;
  setProject: (slug: string) => void;
};

const Ctx = createContext<Context | null>(null);

export function useAppContext(): Context {
  const c = useContext(Ctx);
  if (!c) throw new Error('useAppContext outside AppContextProvider');
  return c;
}

/** The context, or null outside its provider (a component rendered alone, as in its tests). */
export function useOptionalAppContext(): Context | null {
  return useContext(Ctx);
}

export function loginRedirect(me: Me): string | null {
  if (!me.auth_required || me.authenticated) return null;
  const base = me.login_url || '/login';
  const next = window.location.pathname + window.location.search;
  return `${base}${base.includes('?') ? '&' : '?'}next=${encodeURIComponent(next)}`;
}

function isOperator(me: Me): boolean {
  const flag = (me as Me & { operator?: boolean }).operator;
  if (typeof flag === 'boolean') return flag;
  // A server that does not report `operator` yet: show the operator pages to people and the
  // shared token (the server answers a 403 with its reason to anyone else), not to API keys.
  return !me.auth_required || me.kind !== 'api_key';
}

export function pickProject(projects: Project[], wanted: string | null): Project | null {
  if (wanted) {
    const p = projects.find((x) => x.slug === wanted || x.id === wanted);
    if (p) return p;
  }
  return projects[0] ?? null;
}

export function AppContextProvider({ children }: { children: ReactNode }) {
  const qc = useQueryClient();
  const meQ = useQuery({ queryKey: keys.me(), queryFn: () => unwrap(api.GET('/api/me')), staleTime: 60_000 });
  const me = meQ.data;
  const redirect = me ? loginRedirect(me) : null;
  useEffect(() => {
    if (redirect) window.location.assign(redirect);
  }, [redirect]);

  const projectsQ = useQuery({
    queryKey: keys.projects.all(),
    queryFn: () => unwrap(api.GET('/api/projects')),
    enabled: !!me && !redirect,
  });

  const [wanted, setWanted] = useState<string | null>(() => {
    const fromUrl = new URLSearchParams(window.location.search).get('project');
    return fromUrl || localStorage.getItem(STORAGE_KEY);
  });

  const projects = projectsQ.data ?? [];
  const project = pickProject(projects, wanted);
  // Set before children render, so their first requests already name the project.
  setApiProject(project?.slug ?? null);

  // A change of project (picked, or the first one appearing) invalidates everything cached
  // for the old one; mounted pages refetch for the new one.
  const projectId = project?.id ?? null;
  const seenProject = useRef<string | null | undefined>(undefined);
  useEffect(() => {
    if (seenProject.current !== undefined && seenProject.current !== projectId) {
      qc.resetQueries({ predicate: (q) => isProjectScoped(q.queryKey) });
    }
    seenProject.current = projectId;
  }, [projectId, qc]);

  const value = useMemo<Context | null>(
    () =>
      me
        ? {
            me,
            operator: isOperator(me),
            projects,
            project,
            setProject: (slug: string) => {
              localStorage.setItem(STORAGE_KEY, slug);
              setApiProject(slug);
              setWanted(slug);
              // Everything cached belongs to the old project (the effect below refetches).
            },
          }
        : null,
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [me, projectsQ.data, project?.id],
  );

  if (meQ.error || projectsQ.error) {
    return (
      <Center h="100vh" p="md">
        <Stack maw={520}>
          <ErrorAlert error={meQ.error ?? projectsQ.error} title="The server could not be reached" />
          <Button onClick={() => window.location.reload()}>Try again</Button>
        </Stack>
      </Center>
    );
  }
  if (!value || redirect || projectsQ.isPending) {
    return (
      <Center h="100vh">
        <Stack align="center">
          <Loader />
          {redirect && <Text size="sm">Taking you to sign in…</Text>}
        </Stack>
      </Center>
    );
  }
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}
