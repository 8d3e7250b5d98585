import { Anchor, Badge, Button, Card, Group, Switch, Table, Text, TextInput, Textarea } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate } from 'react-router-dom';
import { api, fieldErrors, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { networkErrorsOf } from '../../lib/network';
import { RelTime } from '../../lib/time';
import { BuildBadge } from './BuildBadge';
import { ConfigFields } from './ConfigFields';
import { emptyValues, packageCount, toConfig, validateEnvironment, type EnvironmentValues } from './environments';

export default function EnvironmentsPage() {
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [archived, setArchived] = useState(false);
  const [values, setValues] = useState(emptyValues());
  const [touched, setTouched] = useState(false);
  const list = useQuery({
    queryKey: keys.environments.list({ archived }),
    queryFn: () => unwrap(api.GET('/api/environments', { params: { query: { include_archived: archived } } })),
    // Builds finish on their own: look again while one runs.
    refetchInterval: (q) => ((q.state.data ?? []).some((e) => e.build.status === 'building') ? 2000 : false),
  });
  const errors = validateEnvironment(values);
  const create = useMutation({
    mutationFn: (v: EnvironmentValues) => unwrap(api.POST('/api/environments', { body: { name: v.name.trim(), description: v.description, config: toConfig(v) } })),
    onSuccess: (e) => {
      qc.invalidateQueries({ queryKey: keys.environments.all() });
      qc.setQueryData(keys.environments.detail(e.id), e);
      navigate(`/environments/${encodeURIComponent(e.id)}`);
    },
  });
  return (
    <>
      <PageHeader
        title="Environments"
        description="Named sandbox configurations: a base image and packages per manager. On Docker the packages are baked into an image when you save; sessions (or agents, as their default) name an environment to start in it."
      />
      <Card withBorder mb="md">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setTouched(true);
            if (Object.keys(errors).length === 0) create.mutate(values);
          }}
          noValidate
        >
          <Group align="flex-start" mb="sm">
            <TextInput label="Name" required value={values.name} error={(touched || values.name) && errors.name} onChange={(e) => setValues({ ...values, name: e.currentTarget.value })} placeholder="data-tools" w={240} />
            <Textarea label="Description" value={values.description} error={errors.description} onChange={(e) => setValues({ ...values, description: e.currentTarget.value })} autosize minRows={1} maxRows={4} w={360} />
          </Group>
          <ConfigFields values={values} errors={errors} networkErrors={networkErrorsOf(fieldErrors(create.error), 'config.network', create.variables?.network, values.network)} runtimeClassError={fieldErrors(create.error)['config.runtime_class']} onChange={(c) => setValues({ ...values, ...c })} />
          <Group mt="sm">
            <Button type="submit" loading={create.isPending}>Create environment</Button>
          </Group>
        </form>
      </Card>
      <ErrorAlert error={create.error ?? list.error} title={create.error ? 'The environment was not created' : undefined} />
      <Group justify="flex-end" mb="xs">
        <Switch label="Show archived" checked={archived} onChange={(e) => setArchived(e.currentTarget.checked)} />
      </Group>
      {list.data && list.data.length === 0 ? (
        <EmptyState title="No environments yet">Create one above: sessions in it boot its image with its packages installed.</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table highlightOnHover data-testid="environments">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Image</Table.Th>
                <Table.Th>Packages</Table.Th>
                <Table.Th>Build</Table.Th>
                <Table.Th>Updated</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(list.data ?? []).map((e) => (
                <Table.Tr key={e.id} data-testid="environment-row">
                  <Table.Td>
                    <Anchor component={Link} to={`/environments/${encodeURIComponent(e.id)}`} fw={600}>{e.name}</Anchor>
                    {e.archived_at && <Badge ml="xs" color="gray" variant="outline">archived</Badge>}
                    {e.description && <Text size="xs" c="dimmed" lineClamp={1}>{e.description}</Text>}
                  </Table.Td>
                  <Table.Td><Text size="sm" ff="monospace">{e.config.image ?? 'default'}</Text></Table.Td>
                  <Table.Td>{packageCount(e.config)}</Table.Td>
                  <Table.Td><BuildBadge env={e} /></Table.Td>
                  <Table.Td><RelTime value={e.updated_at} size="sm" /></Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </>
  );
}
