import { Badge, Button, Card, Code, Group, Modal, MultiSelect, Pagination, Select, Stack, Switch, Table, Text, TextInput, Title, Anchor } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Fragment, useState } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router-dom';
import { api, unwrap, unwrapPage, type Delivery, type Schemas } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert, PageHeader, ShownOnce } from '../../components/common';
import { PageFallback } from '../../components/PageFallback';
import { RelTime } from '../../lib/time';
import { useEventTypes, validateWebhook } from './webhooks';

/** What `GET …/deliveries?status=` filters by. */
const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

const PAGE = 25;

function Attempts({ webhookId, delivery }: { webhookId: string; delivery: Delivery }) {
  const q = useQuery({
    queryKey: keys.webhooks.attempts(delivery.id),
    queryFn: () => unwrap(api.GET('/api/webhooks/{webhook_id}/deliveries/{delivery_id}/attempts', { params: { path: { webhook_id: webhookId, delivery_id: delivery.id } } })),
  });
  if (q.error) return <ErrorAlert error={q.error} />;
  if (!q.data) return <Text size="sm">Loading…</Text>;
  if (!q.data.length) return <Text size="sm" c="dimmed">No attempt yet.</Text>;
  return (
    <Table data-testid="attempts">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>#</Table.Th>
          <Table.Th>Sent</Table.Th>
          <Table.Th>Status</Table.Th>
          <Table.Th>Took</Table.Th>
          <Table.Th>Error</Table.Th>
          <Table.Th>Next</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {q.data.map((a) => (
          <Table.Tr key={a.attempt}>
            <Table.Td>{a.attempt}</Table.Td>
            <Table.Td>
              <RelTime value={a.started_at} size="sm" />
            </Table.Td>
            <Table.Td>{a.status_code ?? '—'}</Table.Td>
            <Table.Td>{a.duration_ms} ms</Table.Td>
            <Table.Td>
              <Text size="sm" c="red">
                {a.error ?? ''}
              </Text>
            </Table.Td>
            <Table.Td>
              <RelTime value={a.next_attempt_at} size="sm" />
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

function EditWebhook({ hook, opened, onClose }: { hook: Schemas['Webhook']; opened: boolean; onClose: () => void }) {
  const qc = useQueryClient();
  const types = useEventTypes();
  const [name, setName] = useState(hook.name);
  const [url, setUrl] = useState(hook.url);
  const [eventTypes, setEventTypes] = useState<string[]>(hook.event_types);
  const [active, setActive] = useState(hook.active);
  const [agent, setAgent] = useState<string | null>(hook.agent_id ?? null);
  const agents = useQuery({ queryKey: keys.agents.list({ archived: true }), queryFn: () => unwrap(api.GET('/api/agents', { params: { query: { include_archived: true } } })) });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const save = useMutation({
    mutationFn: () => unwrap(api.PATCH('/api/webhooks/{webhook_id}', { params: { path: { webhook_id: hook.id } }, body: { name, url, event_types: eventTypes as Schemas['WebhookPatch']['event_types'], agent_id: agent, active } })),
    onSuccess: (w) => {
      qc.setQueryData(keys.webhooks.detail(hook.id), w);
      qc.invalidateQueries({ queryKey: keys.webhooks.all() });
      onClose();
    },
  });
  return (
    <Modal opened={opened} onClose={onClose} title={`Edit ${hook.name}`} size="lg">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const errs = validateWebhook({ name, url });
          setErrors(errs);
          if (!Object.keys(errs).length) save.mutate();
        }}
        noValidate
      >
        <Stack>
          <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={errors.name} />
          <TextInput label="URL" value={url} onChange={(e) => setUrl(e.currentTarget.value)} error={errors.url} />
          <MultiSelect label="Event types" description="None: every type." searchable data={(types.data ?? []).map((t) => t.type)} value={eventTypes} onChange={setEventTypes} />
          <Select label="Agent" description="Only this agent's sessions; none: every agent." clearable data={(agents.data ?? []).map((a) => ({ value: a.id, label: a.slug }))} value={agent} onChange={setAgent} />
          <Switch label="Active" checked={active} onChange={(e) => setActive(e.currentTarget.checked)} />
          <ErrorAlert error={save.error} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={save.isPending}>
              Save
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

export default function WebhookDetailPage() {
  const { id } = useParams();
  const webhookId = id!;
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [params, setParams] = useSearchParams();
  // Only a status the API takes: anything else in the URL lists every delivery (not a 422).
  const wanted = params.get('status');
  const status = DELIVERY_STATUSES.find((x) => x === wanted) ?? null;
  const page = Math.max(1, Number(params.get('page') ?? 1) || 1);
  const [open, setOpen] = useState<string | null>(null);
  const [editing, setEditing] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const hook = useQuery({ queryKey: keys.webhooks.detail(webhookId), queryFn: () => unwrap(api.GET('/api/webhooks/{webhook_id}', { params: { path: { webhook_id: webhookId } } })) });
  const deliveries = useQuery({
    queryKey: keys.webhooks.deliveriesPage(webhookId, { status, page }),
    queryFn: () => unwrapPage(api.GET('/api/webhooks/{webhook_id}/deliveries', { params: { path: { webhook_id: webhookId }, query: { ...(status ? { status } : {}), limit: PAGE, offset: (page - 1) * PAGE } } })),
    placeholderData: keepPreviousData,
    refetchInterval: 5000,
  });
  const path = { params: { path: { webhook_id: webhookId } } };
  const ping = useMutation({ mutationFn: () => unwrap(api.POST('/api/webhooks/{webhook_id}/ping', path)) });
  const rotate = useMutation({
    mutationFn: () => unwrap(api.POST('/api/webhooks/{webhook_id}/rotate-secret', path)),
    onSuccess: (w) => setSecret(w.secret),
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/webhooks/{webhook_id}', path)),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.webhooks.all() });
      notifications.show({ message: 'Webhook deleted' });
      navigate('/webhooks');
    },
  });
  const redeliver = useMutation({
    mutationFn: (d: string) => unwrap(api.POST('/api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', { params: { path: { webhook_id: webhookId, delivery_id: d } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.webhooks.deliveries(webhookId) }),
  });
  const setQ = (k: string, v: string | null) => {
    const n = new URLSearchParams(params);
    if (v) n.set(k, v);
    else n.delete(k);
    if (k !== 'page') n.delete('page');
    setParams(n, { replace: true });
  };

  if (hook.isPending) return <PageFallback />;
  if (hook.error) return <ErrorAlert error={hook.error} />;
  const w = hook.data;
  const total = deliveries.data?.total ?? 0;
  return (
    <Stack>
      <PageHeader
        title={w.name}
        description={<Code>{w.url}</Code>}
        actions={
          <>
            <Button variant="light" onClick={() => ping.mutate()} loading={ping.isPending}>
              Send a ping
            </Button>
            <Button variant="default" onClick={() => setEditing(true)}>
              Edit
            </Button>
            <ConfirmButton variant="default" color="orange" message="Make a new signing secret? The old one stops working at once." onConfirm={() => rotate.mutate()} confirmLabel="Rotate">
              Rotate secret
            </ConfirmButton>
            <ConfirmButton variant="subtle" color="red" message="Delete this webhook and its delivery log?" onConfirm={() => remove.mutate()} confirmLabel="Delete">
              Delete
            </ConfirmButton>
          </>
        }
      />
      <EditWebhook key={w.updated_at} hook={w} opened={editing} onClose={() => setEditing(false)} />
      {secret && <ShownOnce label="New signing secret" value={secret} />}
      {ping.data && (
        <Text size="sm" c={ping.data.delivered ? 'teal' : 'red'} data-testid="ping-result">
          Ping {ping.data.delivered ? 'delivered' : 'not delivered'}: {ping.data.status_code ?? 'no response'} in {ping.data.duration_ms} ms{ping.data.error ? ` — ${ping.data.error}` : ''}
        </Text>
      )}
      <ErrorAlert error={ping.error ?? rotate.error ?? remove.error ?? redeliver.error} />
      <Card withBorder>
        <Group gap="lg">
          <Text size="sm">
            <b>State:</b> {w.active ? 'active' : `inactive${w.deactivated_reason ? ` (${w.deactivated_reason})` : ''}`}
          </Text>
          <Text size="sm">
            <b>Events:</b> {w.event_types.length ? w.event_types.join(', ') : 'every type'}
          </Text>
          <Text size="sm">
            <b>Agent:</b> {w.agent_id ?? 'every agent'}
          </Text>
          <Text size="sm">
            <b>Failures in a row:</b> {w.consecutive_failures}
          </Text>
        </Group>
      </Card>
      <Group justify="space-between">
        <Title order={4}>Deliveries</Title>
        <Select aria-label="Filter deliveries by status" placeholder="Any status" clearable data={[...DELIVERY_STATUSES]} value={status} onChange={(v) => setQ('status', v)} w={180} />
      </Group>
      <ErrorAlert error={deliveries.error} />
      {deliveries.data && deliveries.data.items.length === 0 ? (
        <EmptyState title="No deliveries yet">Deliveries appear here as subscribed events happen in this project's sessions.</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={720}>
          <Table data-testid="deliveries">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Event</Table.Th>
                <Table.Th>Session</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Attempts</Table.Th>
                <Table.Th>Created</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(deliveries.data?.items ?? []).map((d) => (
                <Fragment key={d.id}>
                  <Table.Tr data-testid="delivery">
                    <Table.Td>
                      <Text size="sm" ff="monospace">
                        {d.event_type}
                      </Text>
                      <Text size="xs" c="dimmed">seq {d.event_seq}</Text>
                    </Table.Td>
                    <Table.Td>
                      <Anchor component={Link} to={`/sessions/${d.session_id}`} size="sm" ff="monospace">
                        {d.session_id.slice(0, 8)}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>
                      <Badge color={d.status === 'delivered' ? 'teal' : d.status === 'failed' ? 'red' : 'yellow'} variant="light">
                        {d.status}
                      </Badge>
                      {d.status_code != null && <Text span size="xs" ml={4}>{d.status_code}</Text>}
                    </Table.Td>
                    <Table.Td>{d.attempt}</Table.Td>
                    <Table.Td>
                      <RelTime value={d.created_at} size="sm" />
                    </Table.Td>
                    <Table.Td>
                      <Group gap={4} justify="flex-end" wrap="nowrap">
                        <Button size="compact-xs" variant="subtle" onClick={() => setOpen(open === d.id ? null : d.id)} aria-expanded={open === d.id}>
                          Attempts
                        </Button>
                        <Button size="compact-xs" variant="subtle" onClick={() => redeliver.mutate(d.id)} loading={redeliver.isPending && redeliver.variables === d.id}>
                          Redeliver
                        </Button>
                      </Group>
                    </Table.Td>
                  </Table.Tr>
                  {open === d.id && (
                    <Table.Tr>
                      <Table.Td colSpan={6}>
                        {d.error && <Text size="sm" c="red">{d.error}</Text>}
                        <Attempts webhookId={webhookId} delivery={d} />
                      </Table.Td>
                    </Table.Tr>
                  )}
                </Fragment>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {total > PAGE && <Pagination total={Math.ceil(total / PAGE)} value={page} onChange={(p) => setQ('page', String(p))} />}
    </Stack>
  );
}
