import { Badge, Card, Code, Group, Stack, Table, Tabs, Text, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useNavigate, useParams } from 'react-router-dom';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { CodeBlock, ConfirmButton, CopyButton, EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { useAppContext } from '../../context';
import { PageFallback } from '../../components/PageFallback';
import { formatBytes, formatNumber, RelTime } from '../../lib/time';
import { bundleSnippets, newestFirst, pushErrorTitle, pushVersion, shortDigest } from './bundles';
import { PushZone } from './PushZone';


export default function SkillBundleDetailPage() {
  const { slug: param } = useParams();
  const slug = param!;
  const qc = useQueryClient();
  const navigate = useNavigate();
  const { me, project } = useAppContext();
  const path = { params: { path: { slug } } };
  const bundle = useQuery({ queryKey: keys.skillBundles.detail(slug), queryFn: () => unwrap(api.GET('/api/skill-bundles/{slug}', path)) });
  const versions = useQuery({ queryKey: keys.skillBundles.versions(slug), queryFn: () => unwrap(api.GET('/api/skill-bundles/{slug}/versions', path)) });
  const refresh = () => {
    qc.invalidateQueries({ queryKey: keys.skillBundles.detail(slug) });
    qc.invalidateQueries({ queryKey: keys.skillBundles.versions(slug) });
    qc.invalidateQueries({ queryKey: keys.skillBundles.all() });
  };
  const push = useMutation({
    mutationFn: (file: File) => pushVersion(slug, file),
    onSuccess: (v) => {
      refresh();
      notifications.show({ message: `Version ${v.version} pushed: ${v.file_count} files, ${v.skills.length} skills` });
    },
  });
  const retire = useMutation({
    mutationFn: (version: number) => unwrap(api.DELETE('/api/skill-bundles/{slug}/versions/{version}', { params: { path: { slug, version } } })),
    onSuccess: (_, version) => {
      refresh();
      notifications.show({ message: `Version ${version} retired` });
    },
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/skill-bundles/{slug}', path)),
    onSuccess: () => {
      qc.removeQueries({ queryKey: keys.skillBundles.detail(slug) });
      qc.invalidateQueries({ queryKey: keys.skillBundles.all() });
      notifications.show({ message: 'Skill bundle deleted' });
      navigate('/skill-bundles');
    },
  });

  if (bundle.isPending) return <PageFallback />;
  if (bundle.error) return <ErrorAlert error={bundle.error} />;
  const b = bundle.data;
  const list = newestFirst(versions.data ?? []);
  const snippets = bundleSnippets({ base: window.location.origin, slug: b.slug, project: project?.slug, authRequired: me.auth_required, description: b.description });
  return (
    <Stack>
      <PageHeader
        title={<Text span inherit ff="monospace">{b.slug}</Text>}
        description={
          <>
            {b.description || 'No description.'} · {b.latest_version == null ? 'nothing pushed yet: an agent on it cannot boot' : `latest version ${b.latest_version}`} · updated <RelTime value={b.updated_at} />
          </>
        }
        actions={
          <ConfirmButton variant="default" color="red" message="Delete the bundle and every version? Refused while an agent's skills source names it." onConfirm={() => remove.mutate()} confirmLabel="Delete">
            Delete bundle
          </ConfirmButton>
        }
      />
      <ErrorAlert error={remove.error} title={remove.error ? 'The bundle was not deleted' : undefined} />
      <PushZone onFile={(f) => push.mutate(f)} pending={push.isPending} />
      {push.error && (
        <div data-testid="push-error">
          <ErrorAlert error={push.error} title={pushErrorTitle(push.error)} />
        </div>
      )}
      <ErrorAlert error={retire.error ?? versions.error} />
      <Title order={4}>Versions</Title>
      {versions.data && list.length === 0 ? (
        <EmptyState title="No versions yet">Push one above, or from CI with the lines below. Numbers are never reused: a retired version's number stays taken.</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={760}>
          <Table data-testid="bundle-versions">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Version</Table.Th>
                <Table.Th>Size</Table.Th>
                <Table.Th>Files</Table.Th>
                <Table.Th>Digest</Table.Th>
                <Table.Th>Skills</Table.Th>
                <Table.Th>Pushed</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {list.map((v) => (
                <Table.Tr key={v.version} data-testid="bundle-version">
                  <Table.Td>
                    <Group gap={4} wrap="nowrap">
                      <Text fw={600}>v{v.version}</Text>
                      {v.version === b.latest_version && <Badge size="xs" variant="light" color="teal">latest</Badge>}
                    </Group>
                  </Table.Td>
                  <Table.Td><Text size="sm" title={`${formatNumber(v.size_bytes)} bytes`}>{formatBytes(v.size_bytes)}</Text></Table.Td>
                  <Table.Td>{formatNumber(v.file_count)}</Table.Td>
                  <Table.Td>
                    <Group gap={2} wrap="nowrap">
                      <Code title={v.digest}>{shortDigest(v.digest)}</Code>
                      <CopyButton value={v.digest} label="Copy sha256" />
                    </Group>
                  </Table.Td>
                  <Table.Td>
                    <Group gap={4}>
                      {v.skills.length ? v.skills.map((s) => <Badge key={s} variant="outline" tt="none" data-testid="bundle-skill">{s}</Badge>) : <Text size="sm" c="dimmed">no SKILL.md</Text>}
                    </Group>
                  </Table.Td>
                  <Table.Td><RelTime value={v.created_at} size="sm" /></Table.Td>
                  <Table.Td>
                    <Group justify="flex-end">
                      <ConfirmButton size="compact-xs" variant="subtle" color="red" message={`Retire version ${v.version}? Its number is never issued again; an agent pinned to it fails at boot saying so.`} onConfirm={() => retire.mutate(v.version)} confirmLabel="Retire">
                        Retire
                      </ConfirmButton>
                    </Group>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      <Card withBorder data-testid="push-from-code">
        <Title order={5} mb="xs">Push from code</Title>
        <Tabs defaultValue="curl">
          <Tabs.List>
            <Tabs.Tab value="curl">curl</Tabs.Tab>
            <Tabs.Tab value="python">Python</Tabs.Tab>
          </Tabs.List>
          <Tabs.Panel value="curl" pt="xs"><CodeBlock code={snippets.curl} /></Tabs.Panel>
          <Tabs.Panel value="python" pt="xs"><CodeBlock code={snippets.python} /></Tabs.Panel>
        </Tabs>
      </Card>
    </Stack>
  );
}
