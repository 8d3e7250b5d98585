import { Anchor, Badge, Button, Group, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router-dom';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { useAppContext } from '../../context';
import { RelTime } from '../../lib/time';

export default function ProjectsPage() {
  const qc = useQueryClient();
  const { projects, project, setProject } = useAppContext();
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const slugError = slug && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(slug) ? 'Lowercase letters, digits and -; at most 63.' : undefined;
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/projects', { body: { name, slug, description: '' } })),
    onSuccess: () => { setName(''); setSlug(''); qc.invalidateQueries({ queryKey: keys.projects.all() }); },
  });
  return (
    <>
      <PageHeader title="Projects" description="The unit of tenancy: agents, sessions, secrets, keys and webhooks belong to one project." />
      <form onSubmit={(e) => { e.preventDefault(); if (name.trim() && !slugError) create.mutate(); }}>
        <Group align="flex-end" mb="md">
          <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
          <TextInput label="Slug" placeholder="from the name" value={slug} error={slugError} onChange={(e) => setSlug(e.currentTarget.value)} />
          <Button type="submit" loading={create.isPending} disabled={!name.trim() || !!slugError}>Create project</Button>
        </Group>
      </form>
      <ErrorAlert error={create.error} />
      {projects.length === 0 ? (
        <EmptyState title="You are in no project yet">Create one, or ask a project admin to add you.</EmptyState>
      ) : (
        <Table>
          <Table.Thead><Table.Tr><Table.Th>Project</Table.Th><Table.Th>Your role</Table.Th><Table.Th>Created</Table.Th><Table.Th /></Table.Tr></Table.Thead>
          <Table.Tbody>
            {projects.map((p) => (
              <Table.Tr key={p.id}>
                <Table.Td>
                  <Anchor component={Link} to={`/projects/${p.slug}`} fw={600}>{p.name}</Anchor> <Text span size="sm" c="dimmed" ff="monospace">{p.slug}</Text>
                  {p.description && <Text size="xs" c="dimmed">{p.description}</Text>}
                </Table.Td>
                <Table.Td>{p.role ?? '—'}</Table.Td>
                <Table.Td><RelTime value={p.created_at} size="sm" /></Table.Td>
                <Table.Td>{project?.id === p.id ? <Badge variant="light">current</Badge> : <Button size="compact-xs" variant="subtle" onClick={() => setProject(p.slug)}>Switch to it</Button>}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </>
  );
}
