import { Anchor, Button, Card, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api, unwrap } from '../../api/client';
import { ErrorAlert, PageHeader } from '../../components/common';
import { PageFallback } from '../../Layout';

export default function AccountPage() {
  const qc = useQueryClient();
  const profile = useQuery({ queryKey: ['profile'], queryFn: () => unwrap(api.GET('/api/me/profile')) });
  const [name, setName] = useState('');
  useEffect(() => { if (profile.data) setName(profile.data.name); }, [profile.data]);
  const save = useMutation({ mutationFn: () => unwrap(api.PATCH('/api/me/profile', { body: { name } })), onSuccess: (p) => qc.setQueryData(['profile'], p) });
  if (profile.isPending) return <PageFallback />;
  if (profile.error) return <ErrorAlert error={profile.error} />;
  const p = profile.data;
  return (
    <Stack maw={640}>
      <PageHeader title="Your account" description={p.email} />
      <Card withBorder>
        <form onSubmit={(e) => { e.preventDefault(); save.mutate(); }}>
          <Stack>
            <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
            <ErrorAlert error={save.error} />
            <Button type="submit" w="fit-content" loading={save.isPending}>Save</Button>
          </Stack>
        </form>
        {p.settings_url && <Text size="sm" mt="md"><Anchor href={p.settings_url}>Change your password</Anchor></Text>}
      </Card>
      <Card withBorder>
        <Text fw={600} mb="xs">Projects</Text>
        <Table><Table.Tbody>{p.projects.map((x) => <Table.Tr key={x.id}><Table.Td>{x.name}</Table.Td><Table.Td>{x.role}</Table.Td></Table.Tr>)}</Table.Tbody></Table>
      </Card>
    </Stack>
  );
}
