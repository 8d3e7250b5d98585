import { Badge, Button, Checkbox, Group, PasswordInput, Stack, Switch, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert, PageHeader, ShownOnce } from '../../components/common';
import { RelTime } from '../../lib/time';
import { useAppContext } from '../../context';
import { Alert, Anchor } from '@mantine/core';

export default function UsersPage() {
  const qc = useQueryClient();
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [operator, setOperator] = useState(false);
  const [link, setLink] = useState<{ label: string; value: string } | null>(null);
  const { me } = useAppContext();
  const [closedBy, setClosedBy] = useState<string | null>(null);
  const users = useQuery({ queryKey: keys.users(), queryFn: () => unwrap(api.GET('/api/users')) });
  const refresh = () => qc.invalidateQueries({ queryKey: keys.users() });
  const recoveryLink = (url?: string | null, code?: string | null) => (url ? new URL(url, window.location.origin).toString() : (code ?? ''));
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/users', { body: { email, name, password: password || null, operator } })),
    onSuccess: (u) => {
      if (u.recovery_url || u.recovery_code) setLink({ label: `Recovery link for ${u.email} (valid 24 h, single use)`, value: recoveryLink(u.recovery_url, u.recovery_code) });
      setEmail(''); setName(''); setPassword(''); setOperator(false);
      // The first person closes an open deployment (and is its operator): from now on this
      // browser needs to sign in, so say so rather than refetch into a 401.
      if (me.auth_required) refresh();
      else setClosedBy(u.email);
    },
  });
  const recover = useMutation({
    mutationFn: (id: string) => unwrap(api.POST('/api/users/{identity_id}/recovery', { params: { path: { identity_id: id } } })),
    onSuccess: (r) => setLink({ label: 'New recovery link', value: recoveryLink((r as { recovery_url?: string }).recovery_url ?? (r as { recovery_link?: string }).recovery_link, (r as { recovery_code?: string }).recovery_code) }),
  });
  const promote = useMutation({ mutationFn: (v: { id: string; operator: boolean }) => unwrap(api.PATCH('/api/users/{identity_id}', { params: { path: { identity_id: v.id } }, body: { operator: v.operator } })), onSuccess: refresh });
  const remove = useMutation({ mutationFn: (id: string) => unwrap(api.DELETE('/api/users/{identity_id}', { params: { path: { identity_id: id } } })), onSuccess: refresh });
  const pwError = password && password.length < 10 ? 'At least 10 characters.' : undefined;
  return (
    <>
      <PageHeader title="Users" description="People who sign in to this UI. Operators manage people, keys and projects." />
      <form onSubmit={(e) => { e.preventDefault(); if (email && !pwError) create.mutate(); }}>
        <Group align="flex-end" mb="md">
          <TextInput label="Email" required value={email} onChange={(e) => setEmail(e.currentTarget.value)} type="email" />
          <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
          <PasswordInput label="Password" description="Empty: they get a recovery link" value={password} error={pwError} onChange={(e) => setPassword(e.currentTarget.value)} autoComplete="new-password" />
          <Checkbox label="Operator" checked={operator} onChange={(e) => setOperator(e.currentTarget.checked)} mb={8} />
          <Button type="submit" loading={create.isPending} disabled={!email || !!pwError}>Create user</Button>
        </Group>
      </form>
      <Stack>
        {link && <ShownOnce label={link.label} value={link.value} />}
        {closedBy && (
          <Alert color="orange" title="The deployment is closed now" data-testid="deployment-closed">
            {closedBy} is its first operator, and every request needs a credential from now on. <Anchor href={me.login_url ?? '/login'}>Sign in</Anchor> to go on.
          </Alert>
        )}
        <ErrorAlert error={create.error ?? recover.error ?? promote.error ?? remove.error ?? users.error} />
        {closedBy ? null : users.data && users.data.length === 0 ? (
          <EmptyState title="No users yet">Create an account; without a password the person gets a link to set one.</EmptyState>
        ) : (
          <Table.ScrollContainer minWidth={720}>
            <Table>
              <Table.Thead><Table.Tr><Table.Th>Person</Table.Th><Table.Th>State</Table.Th><Table.Th>Operator</Table.Th><Table.Th>Created</Table.Th><Table.Th /></Table.Tr></Table.Thead>
              <Table.Tbody>
                {(users.data ?? []).map((u) => (
                  <Table.Tr key={u.id}>
                    <Table.Td><Text size="sm" fw={600}>{u.email}</Text>{u.name && <Text size="xs" c="dimmed">{u.name}</Text>}</Table.Td>
                    <Table.Td><Badge variant="light" color={u.state === 'active' ? 'teal' : 'gray'}>{u.state}</Badge>{u.verified && <Badge variant="light" ml={4}>verified</Badge>}</Table.Td>
                    <Table.Td><Switch aria-label={`Operator: ${u.email}`} checked={u.operator} onChange={(e) => promote.mutate({ id: u.id, operator: e.currentTarget.checked })} /></Table.Td>
                    <Table.Td><RelTime value={u.created_at} size="sm" /></Table.Td>
                    <Table.Td>
                      <Group gap={4} justify="flex-end" wrap="nowrap">
                        <Button size="compact-xs" variant="subtle" onClick={() => recover.mutate(u.id)}>Recovery link</Button>
                        <ConfirmButton size="compact-xs" variant="subtle" color="red" message={`Delete ${u.email}?`} onConfirm={() => remove.mutate(u.id)} confirmLabel="Delete">Delete</ConfirmButton>
                      </Group>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Stack>
    </>
  );
}
