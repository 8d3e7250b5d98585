import { Badge, Button, Card, Code, Group, Stack, Table, Text, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, fieldErrors, unwrap, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, ErrorAlert } from '../../components/common';
import { NetworkPolicyEditor } from '../../components/NetworkPolicyEditor';
import { defaultPolicy, LAYERS_HELP, networkErrorsOf, policyBody, policyOf, samePolicy, type Egress, type NetworkLayer, type NetworkPolicy } from '../../lib/network';
import { EgressLog } from './EgressLog';

/** The session's network as the API has it: its own policy (null: none) and every layer that applies. */
export function sessionNetwork(s: SessionDetail): { own: NetworkPolicy | null; layers: NetworkLayer[] } {
  return {
    own: s.network ? policyOf(s.network) : null,
    layers: (s.network_layers ?? []).map((l) => ({ from: l.from, policy: policyOf(l.policy) })),
  };
}

const EGRESS_COLOR: Record<Egress, string> = { open: 'teal', allowlist: 'blue', none: 'red' };

/** Every policy that applies to the sandbox, one line each: read-only. */
function Layers({ layers }: { layers: NetworkLayer[] }) {
  if (layers.length === 0) {
    return (
      <Text size="sm" c="dimmed" data-testid="network-layers-empty">
        No policy applies: the sandbox has the internet (open), never private, host or cloud-metadata addresses.
      </Text>
    );
  }
  return (
    <Table fz="sm" withRowBorders={false} verticalSpacing={4} data-testid="network-layers">
      <Table.Tbody>
        {layers.map((l, i) => (
          <Table.Tr key={i} data-testid="network-layer">
            <Table.Td w={110}>
              <Text size="sm" fw={600}>
                {l.from}
              </Text>
            </Table.Td>
            <Table.Td w={130} style={{ whiteSpace: 'nowrap' }}>
              {/* Whole on a phone too: the hosts beside it wrap instead. */}
              <Badge size="sm" variant="light" color={EGRESS_COLOR[l.policy.egress]} styles={{ root: { overflow: 'visible' }, label: { overflow: 'visible' } }}>
                {l.policy.egress}
              </Badge>
            </Table.Td>
            <Table.Td>
              {l.policy.egress !== 'allowlist' ? (
                <Text size="sm" c="dimmed">
                  {l.policy.egress === 'open' ? 'the internet' : 'no network at all'}
                </Text>
              ) : l.policy.allow.length + l.policy.presets.length === 0 ? (
                <Text size="sm" c="dimmed">
                  nothing listed: allows nothing
                </Text>
              ) : (
                <Group gap={4}>
                  {l.policy.presets.map((p) => (
                    <Badge key={`p-${p}`} size="sm" variant="outline" color="gray" tt="none">
                      {p} preset
                    </Badge>
                  ))}
                  {l.policy.allow.map((e) => (
                    <Code key={`a-${e}`}>{e}</Code>
                  ))}
                </Group>
              )}
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

/** The session's own policy: set, changed (PATCH, from the next connection on) or removed. */
function OwnPolicy({ session, own, layers }: { session: SessionDetail; own: NetworkPolicy | null; layers: NetworkLayer[] }) {
  const qc = useQueryClient();
  const [draft, setDraft] = useState<NetworkPolicy | null>(own);
  const save = useMutation({
    mutationFn: (network: NetworkPolicy | null) =>
      unwrap(api.PATCH('/api/sessions/{session_id}', { params: { path: { session_id: session.id } }, body: { network: network && policyBody(network) } })),
    onSuccess: (_s, network) => {
      qc.invalidateQueries({ queryKey: keys.sessions.detail(session.id) });
      notifications.show({ color: 'teal', message: network ? 'Saved: the sandbox’s next connection follows it.' : 'Its own policy is removed: the agent’s and the environment’s still apply.' });
    },
  });
  const changed = draft !== null && (own === null || !samePolicy(draft, own));
  const errors = networkErrorsOf(fieldErrors(save.error), 'network', save.variables ?? undefined, draft ?? undefined);
  if (draft === null) {
    return (
      <Stack gap="xs" align="flex-start">
        <Text size="sm" c="dimmed" data-testid="network-own-none">
          None of its own: the agent’s and the environment’s policies apply.
        </Text>
        {/* A start from the agent's policy: narrowing it is what a session's own policy is for. */}
        <Button size="xs" variant="light" onClick={() => setDraft(layers.find((l) => l.from === 'agent')?.policy ?? defaultPolicy())}>
          Give it a policy of its own
        </Button>
        <ErrorAlert error={save.error} title="The policy was not changed" />
      </Stack>
    );
  }
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate(draft);
      }}
      noValidate
    >
      <Stack gap="sm">
        <NetworkPolicyEditor label="Its own policy" description="It can only narrow the agent’s and the environment’s. A change applies from the sandbox’s next connection, without a restart; open connections go on." value={draft} onChange={setDraft} errors={errors} />
        <ErrorAlert error={save.error} title="The policy was not changed" />
        <Group gap="xs">
          <Button type="submit" disabled={!changed} loading={save.isPending && save.variables !== null}>
            Save policy
          </Button>
          {changed && (
            <Button variant="default" onClick={() => { setDraft(own); save.reset(); }}>
              Discard changes
            </Button>
          )}
          {own && (
            <ConfirmButton variant="subtle" color="red" message="Remove the session’s own policy? The agent’s and the environment’s still apply, from the next connection on." onConfirm={() => save.mutate(null)} confirmLabel="Remove">
              Remove its own policy
            </ConfirmButton>
          )}
        </Group>
      </Stack>
    </form>
  );
}

/** A session's network: the layers that apply, its own policy, and its egress log. */
export default function NetworkTab({ session }: { session: SessionDetail }) {
  const { own, layers } = sessionNetwork(session);
  return (
    <Stack maw={900}>
      <Card withBorder>
        <Title order={4} mb={4}>
          Policies that apply
        </Title>
        <Text size="sm" c="dimmed" mb="xs">
          {LAYERS_HELP} The agent’s and the environment’s are copied when the session is created.
        </Text>
        <Layers layers={layers} />
      </Card>
      <Card withBorder>
        <Title order={4} mb="xs">
          This session’s policy
        </Title>
        {/* Keyed by what is stored, so a saved change (or one made elsewhere) starts the form again. */}
        <OwnPolicy key={JSON.stringify(own)} session={session} own={own} layers={layers} />
      </Card>
      <Card withBorder data-testid="egress-log">
        <Title order={4} mb="xs">
          Egress
        </Title>
        <EgressLog session={session} />
      </Card>
    </Stack>
  );
}
