import { Alert, Table, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api, ApiError, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { EmptyState, ErrorAlert, PageHeader } from '../../components/common';
import { formatNumber } from '../../lib/time';

export default function ModelsPage() {
  const models = useQuery({ queryKey: keys.models(), queryFn: () => unwrap(api.GET('/api/models')), retry: false });
  const upstream = models.error instanceof ApiError && models.error.status === 502;
  // The server's own sentence when it has no proxy at all (crates/api/src/routes/models.rs).
  const unconfigured = upstream && /no LiteLLM proxy is configured/.test((models.error as ApiError).detail);
  return (
    <>
      <PageHeader title="Models" description="The LiteLLM proxy's catalogue: names an agent's model takes with the proxy and litellm transports (openai takes any OpenAI model)." />
      {upstream ? (
        <Alert color="orange" data-testid="models-unavailable" title={unconfigured ? 'No model proxy is configured (502)' : 'The model proxy did not answer (502)'}>
          <Text size="sm" mb="xs">{(models.error as ApiError).detail}</Text>
          <Text size="sm">
            {unconfigured
              ? 'This list comes from a LiteLLM proxy, and this server was started without one: start it with LITELLM_PROXY_API_BASE (the proxy\'s address) and LITELLM_PROXY_API_KEY to list its models here.'
              : 'The server reads this list through to its LiteLLM proxy (LITELLM_PROXY_API_BASE) on every call: the proxy is down or unreachable from the server. Runs that use it fail until it is back.'}{' '}
            Agents can still be saved with any model name.
          </Text>
        </Alert>
      ) : (
        <ErrorAlert error={models.error} />
      )}
      {models.data && models.data.length === 0 && <EmptyState title="The proxy lists no models">Configure models in the LiteLLM proxy.</EmptyState>}
      {models.data && models.data.length > 0 && (
        <Table>
          <Table.Thead><Table.Tr><Table.Th>Model</Table.Th><Table.Th>Provider</Table.Th><Table.Th>Max input tokens</Table.Th><Table.Th>Max output tokens</Table.Th></Table.Tr></Table.Thead>
          <Table.Tbody>
            {models.data.map((m) => (
              <Table.Tr key={m.id}><Table.Td ff="monospace">{m.id}</Table.Td><Table.Td>{m.owned_by || '—'}</Table.Td><Table.Td>{formatNumber(m.max_input_tokens)}</Table.Td><Table.Td>{formatNumber(m.max_output_tokens)}</Table.Td></Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </>
  );
}
