import { Anchor, Badge, Button, Code, Group, Stack, Table, Text, TextInput, Textarea } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate } from 'react-router-dom';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { CodeBlock, EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { useAppContext } from '../../context';
import { RelTime } from '../../lib/time';
import { bundleSnippets, DESCRIPTION_MAX, validateBundle } from './bundles';

export default function SkillBundlesPage() {
  const qc = useQueryClient();
  const navigate = useNavigate();
  const { me, project } = useAppContext();
  const [slug, setSlug] = useState('');
  const [description, setDescription] = useState('');
  const [touched, setTouched] = useState(false);
  const bundles = useQuery({ queryKey: keys.skillBundles.all(), queryFn: () => unwrap(api.GET('/api/skill-bundles')) });
  const errors = validateBundle({ slug, description });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/skill-bundles', { body: { slug, description } })),
    onSuccess: (b) => {
      qc.invalidateQueries({ queryKey: keys.skillBundles.all() });
      qc.setQueryData(keys.skillBundles.detail(b.slug), b);
      navigate(`/skill-bundles/${encodeURIComponent(b.slug)}`);
    },
  });
  const example = bundleSnippets({ base: window.location.origin, slug: 'my-skills', project: project?.slug, authRequired: me.auth_required });
  return (
    <>
      <PageHeader
        title="Skill bundles"
        description={<>Named skills trees that CI pushes as numbered versions, instead of a repository cloned at boot. An agent names one in its skills source: <Code>{'{"kind":"bundle","bundle":"<slug>","version":"latest"}'}</Code>.</>}
      />
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setTouched(true);
          if (!errors.slug && !errors.description) create.mutate();
        }}
        noValidate
      >
        <Group align="flex-start" mb="md">
          <TextInput label="Slug" required value={slug} error={(touched || slug) && errors.slug} onChange={(e) => setSlug(e.currentTarget.value)} placeholder="voc-runtime" w={240} />
          <Textarea label="Description" value={description} error={errors.description} onChange={(e) => setDescription(e.currentTarget.value)} autosize minRows={1} maxRows={4} w={360} description={description.length > DESCRIPTION_MAX * 0.9 ? `${description.length} / ${DESCRIPTION_MAX}` : undefined} />
          <Button type="submit" mt={25} loading={create.isPending}>Create bundle</Button>
        </Group>
      </form>
      <ErrorAlert error={create.error ?? bundles.error} />
      {bundles.data && bundles.data.length === 0 ? (
        <EmptyState title="No skill bundles yet">
          Create one above, then push versions to it from CI (a tar or tar.gz of the skills tree), or drop an archive on its page.
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table highlightOnHover data-testid="skill-bundles">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Slug</Table.Th>
                <Table.Th>Description</Table.Th>
                <Table.Th>Latest version</Table.Th>
                <Table.Th>Updated</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(bundles.data ?? []).map((b) => (
                <Table.Tr key={b.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/skill-bundles/${encodeURIComponent(b.slug)}`} ff="monospace" fw={600}>{b.slug}</Anchor>
                  </Table.Td>
                  <Table.Td><Text size="sm" lineClamp={2}>{b.description}</Text></Table.Td>
                  <Table.Td>{b.latest_version == null ? <Badge color="gray" variant="light">nothing pushed</Badge> : <Badge variant="light">v{b.latest_version}</Badge>}</Table.Td>
                  <Table.Td><RelTime value={b.updated_at} size="sm" /></Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {bundles.data && bundles.data.length === 0 && (
        <Stack gap="xs" maw={820} mx="auto" data-testid="push-from-code">
          <Text size="sm" fw={600}>From CI, with curl</Text>
          <CodeBlock code={example.curl} />
          <Text size="sm" fw={600}>With the Python client</Text>
          <CodeBlock code={example.python} />
        </Stack>
      )}
    </>
  );
}
