import { Button, Card, Group, Select, Stack, Table, TextInput, Textarea, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { useNavigate, useParams } from 'react-router-dom';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { PageFallback } from '../../components/PageFallback';
import { useOptionalAppContext } from '../../context';
import { RelTime } from '../../lib/time';
import { ProjectCapacityCard } from './ProjectCapacityCard';
import { ProjectLimitsCard } from './ProjectLimitsCard';

export default function ProjectDetailPage() {
  const { ref } = useParams();
  const qc = useQueryClient();
  const navigate = useNavigate();
  // Outside the app's context (a test rendering the page alone) the server's 403 says who may.
  const operator = useOptionalAppContext()?.operator ?? true;
  const path = { params: { path: { ref: ref! } } };
  const project = useQuery({ queryKey: keys.projects.detail(ref!), queryFn: () => unwrap(api.GET('/api/projects/{ref}', path)) });
  const members = useQuery({ queryKey: keys.projects.members(ref!), queryFn: () => unwrap(api.GET('/api/projects/{ref}/members', path)) });
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [email, setEmail] = useState('');
  const [role, setRole] = useState('member');
  useEffect(() => { if (project.data) { setName(project.data.name); setDescription(project.data.description); } }, [project.data]);
  const save = useMutation({ mutationFn: () => unwrap(api.PATCH('/api/projects/{ref}', { ...path, body: { name, description } })), onSuccess: () => { qc.invalidateQueries({ queryKey: keys.projects.all() }); qc.invalidateQueries({ queryKey: keys.projects.detail(ref!) }); notifications.show({ message: 'Saved' }); } });
  const remove = useMutation({ mutationFn: () => unwrap(api.DELETE('/api/projects/{ref}', path)), onSuccess: () => { qc.invalidateQueries({ queryKey: keys.projects.all() }); navigate('/projects'); } });
  const add = useMutation({ mutationFn: () => unwrap(api.POST('/api/projects/{ref}/members', { ...path, body: { email, role } })), onSuccess: () => { setEmail(''); qc.invalidateQueries({ queryKey: keys.projects.members(ref!) }); } });
  const drop = useMutation({ mutationFn: (id: string) => unwrap(api.DELETE('/api/projects/{ref}/members/{member_id}', { params: { path: { ref: ref!, member_id: id } } })), onSuccess: () => qc.invalidateQueries({ queryKey: keys.projects.members(ref!) }) });
  if (project.isPending) return <PageFallback />;
  if (project.error) return <ErrorAlert error={project.error} />;
  return (
    <Stack>
      <PageHeader title={project.data.name} description={`Slug ${project.data.slug} (immutable)`} actions={<ConfirmButton variant="subtle" color="red" message="Delete the project and everything in it? Refused while one of its sessions has a sandbox." onConfirm={() => remove.mutate()} confirmLabel="Delete">Delete project</ConfirmButton>} />
      <ErrorAlert error={remove.error} />
      <Card withBorder>
        <form onSubmit={(e) => { e.preventDefault(); save.mutate(); }}>
          <Stack maw={520}>
            <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
            <Textarea label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} autosize />
            <ErrorAlert error={save.error} />
            <Button type="submit" w="fit-content" loading={save.isPending}>Save</Button>
          </Stack>
        </form>
      </Card>
      <ProjectLimitsCard project={project.data} operator={operator} />
      <ProjectCapacityCard project={project.data} operator={operator} />
      <Card withBorder>
        <Title order={4} mb="xs">Members</Title>
        <form onSubmit={(e) => { e.preventDefault(); if (email) add.mutate(); }}>
          <Group align="flex-end" mb="sm">
            <TextInput label="Email of an existing user" value={email} onChange={(e) => setEmail(e.currentTarget.value)} />
            <Select label="Role" data={['member', 'admin']} value={role} onChange={(v) => setRole(v ?? 'member')} allowDeselect={false} w={130} />
            <Button type="submit" loading={add.isPending} disabled={!email}>Add member</Button>
          </Group>
        </form>
        <ErrorAlert error={add.error ?? drop.error ?? members.error} />
        {members.data && members.data.length === 0 ? (
          <EmptyState title="No members">Add people by the email they sign in with; admins manage the project and its members.</EmptyState>
        ) : (
          <Table>
            <Table.Tbody>
              {(members.data ?? []).map((m) => (
                <Table.Tr key={m.id}>
                  <Table.Td>{m.label}</Table.Td>
                  <Table.Td>{m.role}</Table.Td>
                  <Table.Td><RelTime value={m.created_at} size="sm" /></Table.Td>
                  <Table.Td><ConfirmButton size="compact-xs" variant="subtle" color="red" message={`Remove ${m.label}?`} onConfirm={() => drop.mutate(m.id)} confirmLabel="Remove">Remove</ConfirmButton></Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
      </Card>
    </Stack>
  );
}
