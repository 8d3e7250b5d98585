import { Alert, Badge, Button, Card, Code, Group, Stack, Text, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { api, ApiError, fieldErrors, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { CodeBlock, ConfirmButton, ErrorAlert, PageHeader } from '../../components/common';
import { PageFallback } from '../../components/PageFallback';
import { networkErrorsOf } from '../../lib/network';
import { RelTime } from '../../lib/time';
import { ConfigFields } from './ConfigFields';
import { BuildBadge } from './BuildBadge';
import { buildLabel, buildLog, configValues, toConfig, validateConfig, type ConfigValues } from './environments';

export default function EnvironmentDetailPage() {
  const ref = useParams().ref!;
  const qc = useQueryClient();
  const navigate = useNavigate();
  const path = { params: { path: { ref } } };
  const env = useQuery({
    queryKey: keys.environments.detail(ref),
    queryFn: () => unwrap(api.GET('/api/environments/{ref}', path)),
    refetchInterval: (q) => (q.state.data?.build.status === 'building' ? 2000 : false),
  });
  const status = env.data?.build.status;
  const log = useQuery({
    queryKey: keys.environments.buildLog(ref, status),
    queryFn: () => buildLog(ref),
    enabled: status === 'ready' || status === 'failed',
    retry: false,
  });
  const [values, setValues] = useState<ConfigValues | null>(null);
  useEffect(() => {
    if (env.data && values === null) setValues(configValues(env.data.config));
  }, [env.data, values]);
  const done = (message: string) => {
    qc.invalidateQueries({ queryKey: keys.environments.all() });
    qc.invalidateQueries({ queryKey: keys.environments.detail(ref) });
    notifications.show({ message });
  };
  const save = useMutation({
    mutationFn: (v: ConfigValues) => unwrap(api.PATCH('/api/environments/{ref}', { ...path, body: { config: toConfig(v, env.data?.config) } })),
    onSuccess: (e) => {
      qc.setQueryData(keys.environments.detail(ref), e);
      setValues(configValues(e.config));
      done(e.build.status === 'building' ? 'Saved; the image is building' : 'Saved');
    },
  });
  const archive = useMutation({
    mutationFn: () => unwrap(api.POST('/api/environments/{ref}/archive', path)),
    onSuccess: () => done('Environment archived: new sessions in it are refused'),
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/environments/{ref}', path)),
    onSuccess: () => {
      qc.removeQueries({ queryKey: keys.environments.detail(ref) });
      qc.invalidateQueries({ queryKey: keys.environments.all() });
      notifications.show({ message: 'Environment deleted' });
      navigate('/environments');
    },
  });

  if (env.isPending) return <PageFallback />;
  if (env.error) return <ErrorAlert error={env.error} />;
  const e = env.data;
  const archived = e.archived_at != null;
  const errors = values ? validateConfig(values) : {};
  const label = buildLabel(e.build);
  return (
    <Stack>
      <PageHeader
        title={e.name}
        description={
          <>
            {e.description || 'No description.'} · <Code>{e.id}</Code> · updated <RelTime value={e.updated_at} />
            {archived && <Badge ml="xs" color="gray" variant="outline">archived</Badge>}
          </>
        }
        actions={
          <Group>
            <Button component={Link} to={`/sessions?environment=${encodeURIComponent(e.name)}`} variant="default" data-testid="environment-sessions">
              Its sessions
            </Button>
            {!archived && (
              <ConfirmButton variant="default" message="Archive it? New sessions in it are refused from now on, running ones go on. There is no unarchive." onConfirm={() => archive.mutate()} confirmLabel="Archive">
                Archive
              </ConfirmButton>
            )}
            <ConfirmButton variant="default" color="red" message="Delete the environment? Refused while an agent defaults to it or a session ran in it; archive it instead." onConfirm={() => remove.mutate()} confirmLabel="Delete">
              Delete
            </ConfirmButton>
          </Group>
        }
      />
      <ErrorAlert error={remove.error ?? archive.error} title={remove.error ? 'The environment was not deleted' : undefined} />
      <Alert color={label.color} title={<Group gap="xs">Build <BuildBadge env={e} /></Group>} data-testid="build-summary">
        <Text size="sm" style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-word' }}>{label.text}</Text>
      </Alert>
      <Card withBorder>
        <Title order={4} mb="sm">Configuration</Title>
        {values && (
          <form
            onSubmit={(ev) => {
              ev.preventDefault();
              if (Object.keys(errors).length === 0) save.mutate(values);
            }}
            noValidate
          >
            <fieldset disabled={archived} style={{ border: 0, padding: 0, margin: 0 }}>
              <ConfigFields values={values} errors={errors} networkErrors={networkErrorsOf(fieldErrors(save.error), 'config.network', save.variables?.network, values.network)} runtimeClassError={fieldErrors(save.error)['config.runtime_class']} onChange={setValues} />
              <Group mt="sm">
                <Button type="submit" loading={save.isPending} disabled={archived}>Save configuration</Button>
                <Text size="xs" c="dimmed">{archived ? 'Archived environments are read-only.' : 'Saving replaces the whole configuration; a changed one builds again (sessions created before keep their image).'}</Text>
              </Group>
            </fieldset>
          </form>
        )}
        <ErrorAlert error={save.error} title={save.error ? 'The configuration was not saved' : undefined} />
      </Card>
      <Card withBorder>
        <Title order={4} mb="sm">Build log</Title>
        {status === 'none' && <Text size="sm" c="dimmed">Nothing to build: no packages.</Text>}
        {status === 'building' && <Text size="sm" c="dimmed">The build is running; its log appears here when it ends.</Text>}
        {log.error && !(log.error instanceof ApiError && log.error.status === 404) && <ErrorAlert error={log.error} />}
        {log.data !== undefined && (
          <div data-testid="build-log">
            <CodeBlock code={log.data} maxHeight={480} />
          </div>
        )}
      </Card>
    </Stack>
  );
}
