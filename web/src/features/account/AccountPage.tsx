import { Alert, Anchor, Button, Card, Code, List, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link } from 'react-router-dom';
import { api, unwrap, type Me } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ErrorAlert, PageHeader } from '../../components/common';
import { useAppContext } from '../../context';
import { PageFallback } from '../../components/PageFallback';

/** A profile belongs to a signed-in person; any other caller learns why there is none here. */
export default function AccountPage() {
  const { me } = useAppContext();
  if (!me.auth_required) return <OpenMode />;
  if (me.kind !== 'user') return <NotAPerson me={me} />;
  return <Profile />;
}

/** Open mode: no credential is checked, so there is nobody to have a profile. */
function OpenMode() {
  return (
    <Stack maw={720} data-testid="account-open-mode">
      <PageHeader title="Your account" description="This deployment is in open mode." />
      <Alert color="yellow" title="Open mode: nobody signs in">
        <Text size="sm" mb="xs">
          This server checks no credentials: it has no shared token, no API key and no person yet. Everyone who can reach it acts as an operator, so there is no account to show here.
        </Text>
        <Text size="sm" mb="xs">Any one of these closes it; from then on people sign in at /login and programs send a key:</Text>
        <List size="sm" spacing={4}>
          <List.Item>
            create a person on the <Anchor component={Link} to="/users">Users</Anchor> page (the first one is an operator, and can then sign in and see their account here),
          </List.Item>
          <List.Item>
            create an API key on the <Anchor component={Link} to="/keys">API keys</Anchor> page (make a person first if anyone is to use this UI afterwards: it signs people in, not keys),
          </List.Item>
          <List.Item>
            or restart the server with a shared token: <Code>--token</Code> or <Code>SANDBOX_AGENTS_TOKEN</Code>.
          </List.Item>
        </List>
      </Alert>
    </Stack>
  );
}

function NotAPerson({ me }: { me: Me }) {
  const what = me.kind === 'api_key' ? `the API key ${me.label ?? ''}`.trim() : 'the shared token';
  return (
    <Stack maw={720} data-testid="account-not-a-person">
      <PageHeader title="Your account" />
      <Alert color="blue" title="No profile for this credential">
        <Text size="sm">
          You are using {what}. A profile (name, password, projects) belongs to a person: sign in at <Anchor href={me.login_url || '/login'}>the sign-in page</Anchor> to see yours.
        </Text>
      </Alert>
    </Stack>
  );
}

function Profile() {
  const qc = useQueryClient();
  const profile = useQuery({ queryKey: keys.profile(), queryFn: () => unwrap(api.GET('/api/me/profile')) });
  const [name, setName] = useState('');
  useEffect(() => { if (profile.data) setName(profile.data.name); }, [profile.data]);
  const save = useMutation({ mutationFn: () => unwrap(api.PATCH('/api/me/profile', { body: { name } })), onSuccess: (p) => qc.setQueryData(keys.profile(), p) });
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
