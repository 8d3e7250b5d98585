import { Button, Card, Code, Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap, type Schemas } from '../../api/client';
import { keys as queryKeys } from '../../api/queryKeys';
import { ConfirmButton, CopyButton, EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { RelTime } from '../../lib/time';

function TestKey({ gitKey }: { gitKey: Schemas['GitKey'] }) {
  const [repo, setRepo] = useState('');
  const [host, setHost] = useState('github.com');
  const test = useMutation({ mutationFn: () => unwrap(api.POST('/api/git-keys/{key_id}/test', { params: { path: { key_id: gitKey.id } }, body: { repo, host } })) });
  return (
    <form onSubmit={(e) => { e.preventDefault(); if (repo) test.mutate(); }}>
      <Group align="flex-end" gap="xs">
        <TextInput size="xs" label="Repository" placeholder="owner/name" value={repo} onChange={(e) => setRepo(e.currentTarget.value)} />
        <TextInput size="xs" label="Host" value={host} onChange={(e) => setHost(e.currentTarget.value)} />
        <Button size="xs" type="submit" variant="light" loading={test.isPending} disabled={!repo}>Test access</Button>
      </Group>
      {test.isPending && <Text size="xs" c="dimmed">Cloning can take up to two minutes…</Text>}
      {test.data && <Text size="sm" c={test.data.ok ? 'teal' : 'red'} mt={4}>{test.data.ok ? 'The key can read the repository.' : 'Refused'}{test.data.detail ? `: ${test.data.detail}` : ''}</Text>}
      <ErrorAlert error={test.error} />
    </form>
  );
}

export default function GitKeysPage() {
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const keys = useQuery({ queryKey: queryKeys.gitKeys(), queryFn: () => unwrap(api.GET('/api/git-keys')) });
  const create = useMutation({ mutationFn: () => unwrap(api.POST('/api/git-keys', { body: { name } })), onSuccess: () => { setName(''); qc.invalidateQueries({ queryKey: queryKeys.gitKeys() }); } });
  const remove = useMutation({ mutationFn: (id: string) => unwrap(api.DELETE('/api/git-keys/{key_id}', { params: { path: { key_id: id } } })), onSuccess: () => qc.invalidateQueries({ queryKey: queryKeys.gitKeys() }) });
  return (
    <>
      <PageHeader title="Git keys" description="ed25519 deploy keys generated on the server: register the public key read-only with your git host. The private half never leaves the server." />
      <form onSubmit={(e) => { e.preventDefault(); if (name.trim()) create.mutate(); }}>
        <Group align="flex-end" mb="md">
          <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} placeholder="skills-repo" />
          <Button type="submit" loading={create.isPending} disabled={!name.trim()}>Generate key</Button>
        </Group>
      </form>
      <ErrorAlert error={create.error ?? remove.error ?? keys.error} />
      {keys.data && keys.data.length === 0 ? (
        <EmptyState title="No git keys">Generate one to let agents clone a private skills repository.</EmptyState>
      ) : (
        <Stack>
          {(keys.data ?? []).map((k) => (
            <Card withBorder key={k.id}>
              <Group justify="space-between" mb="xs">
                <Title order={5}>{k.name}</Title>
                <ConfirmButton size="compact-xs" variant="subtle" color="red" message="Delete the key? Refused while an agent uses it." onConfirm={() => remove.mutate(k.id)} confirmLabel="Delete">Delete</ConfirmButton>
              </Group>
              <Group gap="xs" wrap="nowrap" align="flex-start">
                <Code block style={{ flex: 1, wordBreak: 'break-all', whiteSpace: 'pre-wrap' }}>{k.public_key}</Code>
                <CopyButton value={k.public_key} label="Copy public key" />
              </Group>
              <Text size="xs" c="dimmed" mt={4}>{k.fingerprint} · created <RelTime value={k.created_at} /> · last used <RelTime value={k.last_used_at} /></Text>
              <TestKey gitKey={k} />
            </Card>
          ))}
        </Stack>
      )}
    </>
  );
}
