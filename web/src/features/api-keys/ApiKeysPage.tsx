import { Badge, Button, Group, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type Schemas } from '../../api/client';
import { keys as queryKeys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert, PageHeader, ShownOnce } from '../../components/common';
import { useAppContext } from '../../context';
import { RelTime } from '../../lib/time';

export function keyState(k: Schemas['ApiKey'], now = Date.now()): 'revoked' | 'expired' | 'active' {
  if (k.revoked_at) return 'revoked';
  if (k.expires_at && Date.parse(k.expires_at) <= now) return 'expired';
  return 'active';
}

export default function ApiKeysPage() {
  const qc = useQueryClient();
  const { me, project } = useAppContext();
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [expires, setExpires] = useState('');
  const [created, setCreated] = useState<Schemas['ApiKeyCreated'] | null>(null);
  const [closed, setClosed] = useState(false);
  const keys = useQuery({ queryKey: queryKeys.apiKeys(), queryFn: () => unwrap(api.GET('/api/api-keys')) });
  const refresh = () => qc.invalidateQueries({ queryKey: queryKeys.apiKeys() });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/api-keys', { body: { name, description, expires_at: expires.trim() || null } })),
    onSuccess: (k) => {
      setCreated(k);
      setName('');
      setDescription('');
      setExpires('');
      // The first key closes an open deployment: from now on this browser has no credential,
      // so leave the page as it is (the key stays on screen) rather than refetch into a 401.
      if (me.auth_required) refresh();
      else setClosed(true);
    },
  });
  const revoke = useMutation({ mutationFn: (id: string) => unwrap(api.POST('/api/api-keys/{key_id}/revoke', { params: { path: { key_id: id } } })), onSuccess: refresh });
  const remove = useMutation({ mutationFn: (id: string) => unwrap(api.DELETE('/api/api-keys/{key_id}', { params: { path: { key_id: id } } })), onSuccess: refresh });
  return (
    <>
      <PageHeader title="API keys" description={`Credentials for services (Authorization: Bearer ak_…). A key made here is bound to ${project ? `the project ${project.slug}` : 'the current project'}.`} />
      {!me.auth_required && (
        <Text size="sm" c="orange" mb="sm">
          The deployment is open: the first key closes it, and from then on every caller needs a credential.
        </Text>
      )}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (name.trim()) create.mutate();
        }}
      >
        <Group align="flex-end" mb="md">
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} />
          <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} />
          <TextInput label="Expires" placeholder="2030-01-01 (optional)" value={expires} onChange={(e) => setExpires(e.currentTarget.value)} />
          <Button type="submit" loading={create.isPending} disabled={!name.trim()}>
            Create key
          </Button>
        </Group>
      </form>
      <Stack>
        {created && <ShownOnce label={`API key ${created.name}`} value={created.key} />}
        {closed && (
          <Text size="sm" c="orange" data-testid="deployment-closed">
            The deployment is closed now: API calls need this key (or the shared token), and people sign in at the next page load.
          </Text>
        )}
        <ErrorAlert error={create.error ?? revoke.error ?? remove.error ?? keys.error} />
        {keys.data && keys.data.length === 0 ? (
          <EmptyState title="No API keys">Create one for each service that calls the API; revoke it when the service goes away.</EmptyState>
        ) : (
          <Table.ScrollContainer minWidth={720}>
            <Table data-testid="api-keys">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Prefix</Table.Th>
                  <Table.Th>State</Table.Th>
                  <Table.Th>Last used</Table.Th>
                  <Table.Th>Expires</Table.Th>
                  <Table.Th />
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {(keys.data ?? []).map((k) => {
                  const state = keyState(k);
                  return (
                    <Table.Tr key={k.id}>
                      <Table.Td>
                        <Text fw={600} size="sm">{k.name}</Text>
                        {k.description && <Text size="xs" c="dimmed">{k.description}</Text>}
                      </Table.Td>
                      <Table.Td ff="monospace">{k.prefix}…</Table.Td>
                      <Table.Td>
                        <Badge color={state === 'active' ? 'teal' : 'gray'} variant="light">{state}</Badge>
                      </Table.Td>
                      <Table.Td><RelTime value={k.last_used_at} size="sm" /></Table.Td>
                      <Table.Td>{k.expires_at ? <RelTime value={k.expires_at} size="sm" /> : 'never'}</Table.Td>
                      <Table.Td>
                        <Group gap={4} justify="flex-end" wrap="nowrap">
                          {state === 'active' && (
                            <ConfirmButton size="compact-xs" variant="subtle" color="orange" message="Revoke the key? Callers using it get 401 from now on." onConfirm={() => revoke.mutate(k.id)} confirmLabel="Revoke">
                              Revoke
                            </ConfirmButton>
                          )}
                          <ConfirmButton size="compact-xs" variant="subtle" color="red" message="Delete the key and its record?" onConfirm={() => remove.mutate(k.id)} confirmLabel="Delete">
                            Delete
                          </ConfirmButton>
                        </Group>
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Stack>
    </>
  );
}
