import { Anchor, Badge, Button, Group, Modal, MultiSelect, Select, Stack, Switch, Table, Text, TextInput } from '@mantine/core';
import { IconPlus } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router-dom';
import { api, unwrap, type Schemas } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader, ShownOnce } from '../../components/common';
import { RelTime } from '../../lib/time';
import { useEventTypes, validateWebhook } from './webhooks';

function CreateWebhook({ opened, onClose, onCreated }: { opened: boolean; onClose: () => void; onCreated: (w: Schemas['WebhookCreated']) => void }) {
  const qc = useQueryClient();
  const types = useEventTypes();
  const agents = useQuery({ queryKey: keys.agents.list({ archived: false }), queryFn: () => unwrap(api.GET('/api/agents', { params: { query: { include_archived: false } } })) });
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [eventTypes, setEventTypes] = useState<string[]>([]);
  const [agent, setAgent] = useState<string | null>(null);
  const [active, setActive] = useState(true);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/webhooks', { body: { name, url, agent_id: agent, active, ...(eventTypes.length ? { event_types: eventTypes as Schemas['WebhookCreate']['event_types'] } : {}) } })),
    onSuccess: (w) => {
      qc.invalidateQueries({ queryKey: keys.webhooks.all() });
      onCreated(w);
      setName('');
      setUrl('');
      setEventTypes([]);
    },
  });
  return (
    <Modal opened={opened} onClose={onClose} title="New webhook" size="lg">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const errs = validateWebhook({ name, url });
          setErrors(errs);
          if (!Object.keys(errs).length) create.mutate();
        }}
        noValidate
      >
        <Stack>
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={errors.name} data-autofocus />
          <TextInput label="URL" required placeholder="https://example.com/hooks/agents" value={url} onChange={(e) => setUrl(e.currentTarget.value)} error={errors.url} />
          <MultiSelect
            label="Event types"
            description="None picked: every type."
            searchable
            data={Object.entries(
              (types.data ?? []).reduce<Record<string, { value: string; label: string }[]>>((acc, t) => {
                (acc[t.group] ??= []).push({ value: t.type, label: t.type });
                return acc;
              }, {}),
            ).map(([group, items]) => ({ group, items }))}
            value={eventTypes}
            onChange={setEventTypes}
          />
          <Select label="Agent" description="Only this agent's sessions; none: every agent." clearable data={(agents.data ?? []).map((a) => ({ value: a.id, label: a.slug }))} value={agent} onChange={setAgent} />
          <Switch label="Active" checked={active} onChange={(e) => setActive(e.currentTarget.checked)} />
          <ErrorAlert error={create.error} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={create.isPending}>
              Create webhook
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

export default function WebhooksPage() {
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<Schemas['WebhookCreated'] | null>(null);
  const hooks = useQuery({ queryKey: keys.webhooks.all(), queryFn: () => unwrap(api.GET('/api/webhooks')) });
  return (
    <>
      <PageHeader
        title="Webhooks"
        description="The server POSTs the events you subscribe to, signed with the webhook's secret."
        actions={
          <Button leftSection={<IconPlus size={16} />} onClick={() => setCreating(true)}>
            New webhook
          </Button>
        }
      />
      <CreateWebhook opened={creating} onClose={() => setCreating(false)} onCreated={(w) => { setCreating(false); setCreated(w); }} />
      {created && (
        <Stack mb="md">
          <ShownOnce label={`Signing secret of ${created.name}`} value={created.secret} />
          <Anchor component={Link} to={`/webhooks/${created.id}`}>
            Open {created.name}
          </Anchor>
        </Stack>
      )}
      <ErrorAlert error={hooks.error} />
      {hooks.data && hooks.data.length === 0 ? (
        <EmptyState title="No webhooks yet" action={<Button variant="light" onClick={() => setCreating(true)}>Create a webhook</Button>}>
          Subscribe an endpoint of yours to session events (a run finished, a tool call waits for an answer, …).
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table highlightOnHover>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>URL</Table.Th>
                <Table.Th>Events</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th>Created</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(hooks.data ?? []).map((w) => (
                <Table.Tr key={w.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/webhooks/${w.id}`} fw={600}>
                      {w.name}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>
                    <Text size="sm" ff="monospace" lineClamp={1}>
                      {w.url}
                    </Text>
                  </Table.Td>
                  <Table.Td>{w.event_types.length ? w.event_types.length : 'all'}</Table.Td>
                  <Table.Td>
                    <Badge color={w.active ? 'teal' : 'gray'} variant="light">
                      {w.active ? 'active' : 'inactive'}
                    </Badge>
                    {w.consecutive_failures > 0 && (
                      <Badge color="red" variant="light" ml={4}>
                        {w.consecutive_failures} failing
                      </Badge>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <RelTime value={w.created_at} size="sm" />
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
