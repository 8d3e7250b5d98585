import { Button, Group, Modal, PasswordInput, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type Schemas } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { ENV_RE } from '../../lib/rules';
import { RelTime } from '../../lib/time';

function RotateModal({ secret, onClose }: { secret: Schemas['Secret'] | null; onClose: () => void }) {
  const qc = useQueryClient();
  const [value, setValue] = useState('');
  const [description, setDescription] = useState(secret?.description ?? '');
  const save = useMutation({
    mutationFn: () => unwrap(api.PUT('/api/secrets/{secret_id}', { params: { path: { secret_id: secret!.id } }, body: { ...(value ? { value } : {}), description } })),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.secrets() });
      setValue('');
      onClose();
    },
  });
  return (
    <Modal opened={!!secret} onClose={onClose} title={`Update ${secret?.name}`}>
      <form onSubmit={(e) => { e.preventDefault(); save.mutate(); }}>
        <Stack>
          <PasswordInput label="New value" description="Leave empty to keep the current value. Reaches sessions at their next boot." value={value} onChange={(e) => setValue(e.currentTarget.value)} autoComplete="new-password" />
          <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} maxLength={2000} />
          <ErrorAlert error={save.error} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>Cancel</Button>
            <Button type="submit" loading={save.isPending}>Save</Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

export default function SecretsPage() {
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [description, setDescription] = useState('');
  const [rotating, setRotating] = useState<Schemas['Secret'] | null>(null);
  const secrets = useQuery({ queryKey: keys.secrets(), queryFn: () => unwrap(api.GET('/api/secrets')) });
  const nameError = name && (!ENV_RE.test(name) || name.length > 128) ? 'Letters, digits and _, not starting with a digit; at most 128.' : undefined;
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/secrets', { body: { name, value, description } })),
    onSuccess: () => {
      setName('');
      setValue('');
      setDescription('');
      qc.invalidateQueries({ queryKey: keys.secrets() });
    },
  });
  const remove = useMutation({ mutationFn: (id: string) => unwrap(api.DELETE('/api/secrets/{secret_id}', { params: { path: { secret_id: id } } })), onSuccess: () => qc.invalidateQueries({ queryKey: keys.secrets() }) });
  return (
    <>
      <PageHeader title="Secrets" description="Write-only values that agents and sessions bind as environment variables. No page, response or log ever shows a value." />
      <form onSubmit={(e) => { e.preventDefault(); if (name && value && !nameError) create.mutate(); }}>
        <Group align="flex-end" mb="md">
          <TextInput label="Name" required value={name} error={nameError} onChange={(e) => setName(e.currentTarget.value)} placeholder="GITHUB_TOKEN" />
          <PasswordInput label="Value" required value={value} onChange={(e) => setValue(e.currentTarget.value)} autoComplete="new-password" w={240} />
          <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} />
          <Button type="submit" loading={create.isPending} disabled={!name || !value || !!nameError}>Add secret</Button>
        </Group>
      </form>
      <ErrorAlert error={create.error ?? remove.error ?? secrets.error} />
      <RotateModal key={rotating?.id ?? 'none'} secret={rotating} onClose={() => setRotating(null)} />
      {secrets.data && secrets.data.length === 0 ? (
        <EmptyState title="No secrets yet">Add a secret, then bind it to an agent (its Secrets tab) as an environment variable.</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Description</Table.Th>
                <Table.Th>Updated</Table.Th>
                <Table.Th>Last used</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(secrets.data ?? []).map((s) => (
                <Table.Tr key={s.id}>
                  <Table.Td ff="monospace">{s.name}</Table.Td>
                  <Table.Td><Text size="sm">{s.description}</Text></Table.Td>
                  <Table.Td><RelTime value={s.updated_at} size="sm" /></Table.Td>
                  <Table.Td><RelTime value={s.last_used_at} size="sm" /></Table.Td>
                  <Table.Td>
                    <Group gap={4} justify="flex-end" wrap="nowrap">
                      <Button size="compact-xs" variant="subtle" onClick={() => setRotating(s)}>Rotate</Button>
                      <ConfirmButton size="compact-xs" variant="subtle" color="red" message="Delete the secret? Refused while an agent or session binds it." onConfirm={() => remove.mutate(s.id)} confirmLabel="Delete">Delete</ConfirmButton>
                    </Group>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </>
  );
}
