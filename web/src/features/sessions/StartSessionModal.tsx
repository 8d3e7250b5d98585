import { Accordion, ActionIcon, Alert, Autocomplete, Button, Group, Input, Modal, NumberInput, type NumberInputProps, SegmentedControl, Select, SimpleGrid, Stack, Switch, Text, TextInput, Textarea } from '@mantine/core';
import { IconPlayerPlay, IconPlus, IconTrash } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router-dom';
import { api, unwrap, unwrapPage, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { BudgetFields } from '../../components/BudgetFields';
import { ErrorAlert } from '../../components/common';
import { isSpendLimitRefusal, SpendLimitRefusal } from './SpendLimitRefusal';
import { budgetSummary, budgetValuesOf, hasLimits } from '../../lib/budget';
import { LazyCodeEditor } from '../../components/LazyCodeEditor';
import { MAX_SESSION_SECONDS, MIN_DISK_MB } from './limits';
import { SecretBindingsEditor } from '../../components/SecretBindingsEditor';
import { versionChoices } from '../../lib/agentVersions';
import { McpServersField } from './McpServersField';
import { emptyStartSession, fieldErrorsOf, mcpServersError, sectionsWithErrors, startSessionBody, validateStartSession, type BudgetMode, type Errors, type StartSessionValues } from './startSession';

const MANIFEST_PLACEHOLDER = '{\n  "entries": {"notes.md": {"kind": "file", "content": "# Notes"}},\n  "environment": {"MODE": "review"}\n}';

/**
 * "Start a session": with an agent (from its page) or a picker (from the sessions list), and
 * under "Advanced", "Limits" and "Budget" everything else POST /api/sessions takes. Checked as the
 * server checks; a 422's field errors land next to their fields, their section unfolded.
 */
export function StartSessionModal({ agent, defaultAgent, opened, onClose }: { agent?: Agent; defaultAgent?: string; opened: boolean; onClose: () => void }) {
  const navigate = useNavigate();
  const qc = useQueryClient();
  const [v, setV] = useState<StartSessionValues>(() => emptyStartSession(agent?.slug ?? defaultAgent ?? ''));
  const [errors, setErrors] = useState<Errors>({});
  const [open, setOpen] = useState<string[]>([]);
  const unfold = (e: Errors) => setOpen((o) => [...new Set([...o, ...sectionsWithErrors(e)])]);
  const set = <K extends keyof StartSessionValues>(k: K, value: StartSessionValues[K]) => setV((old) => ({ ...old, [k]: value }));
  const agents = useQuery({
    queryKey: keys.agents.list({ archived: false }),
    queryFn: () => unwrap(api.GET('/api/agents', { params: { query: { include_archived: false } } })),
    enabled: opened && !agent,
  });
  const models = useQuery({ queryKey: keys.models(), queryFn: () => unwrap(api.GET('/api/models')), enabled: opened, retry: false });
  const environments = useQuery({
    queryKey: keys.environments.list({ archived: false }),
    queryFn: () => unwrap(api.GET('/api/environments', { params: { query: { include_archived: false } } })),
    enabled: opened,
    retry: false,
  });
  const secrets = useQuery({ queryKey: keys.secrets(), queryFn: () => unwrap(api.GET('/api/secrets')), enabled: opened, retry: false });
  const picked = agent ?? agents.data?.find((a) => a.slug === v.agent);
  // The older versions to pin to: the newest hundred (any version can be pinned through the API).
  const versionsOf = agent?.slug ?? picked?.slug ?? '';
  const versionsPage = { limit: 100, offset: 0 };
  const versions = useQuery({
    queryKey: keys.agents.versionsPage(versionsOf, versionsPage),
    queryFn: () => unwrapPage(api.GET('/api/agents/{ref}/versions', { params: { path: { ref: versionsOf }, query: versionsPage } })),
    enabled: opened && !!versionsOf,
    retry: false,
  });
  const currentVersion = picked?.version ?? null;
  const start = useMutation({
    mutationFn: (values: StartSessionValues) => unwrap(api.POST('/api/sessions', { body: startSessionBody(values) })),
    onSuccess: (s) => {
      qc.invalidateQueries({ queryKey: keys.sessions.all() });
      onClose();
      navigate(`/sessions/${s.id}`);
    },
    onError: (e, values) => {
      const fields = fieldErrorsOf(e, values);
      setErrors(fields);
      unfold(fields);
    },
  });
  const err = (k: string) => errors[k];
  const submit = () => {
    const e = validateStartSession(v);
    setErrors(e);
    if (Object.keys(e).length) {
      unfold(e);
      return;
    }
    start.mutate(v);
  };

  return (
    <Modal opened={opened} onClose={onClose} title={agent ? `Start a session with ${agent.name}` : 'Start a session'} size="lg">
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <Stack>
          {!agent && (
            <Select
              label="Agent"
              placeholder="Pick an agent"
              searchable
              data={(agents.data ?? []).map((a) => ({ value: a.slug, label: `${a.name} (${a.slug})` }))}
              value={v.agent || null}
              onChange={(x) => setV((old) => ({ ...old, agent: x ?? '', agentVersion: 'current', mcpServers: null }))}
              error={err('agent_id')}
              data-autofocus
            />
          )}
          <TextInput label="Title" placeholder="optional" value={v.title} onChange={(e) => set('title', e.currentTarget.value)} error={err('title')} data-autofocus={agent ? true : undefined} />
          <Select
            label="Agent version"
            description={
              v.agentVersion === 'latest'
                ? 'Every turn runs the agent as it is then: later edits apply to this session too.'
                : v.agentVersion === 'current'
                  ? `Pinned: it runs ${currentVersion != null ? `v${currentVersion}` : 'the agent’s current version'} whatever edits follow.`
                  : `Pinned: it runs v${v.agentVersion} of the agent as it was, whatever edits follow.`
            }
            data={versionChoices(currentVersion, versions.data?.items ?? [])}
            value={v.agentVersion}
            onChange={(x) => set('agentVersion', x ?? 'current')}
            allowDeselect={false}
            error={err('agent_version')}
            data-testid="agent-version"
          />
          {!!picked?.mcp_servers?.length && <McpServersField servers={picked.mcp_servers} value={v.mcpServers} onChange={(x) => set('mcpServers', x)} error={mcpServersError(errors)} />}
          <Textarea label="First prompt" description="Optional: the first turn starts as soon as the sandbox is up." autosize minRows={3} value={v.prompt} onChange={(e) => set('prompt', e.currentTarget.value)} error={err('prompt')} />
          <Accordion variant="contained" multiple value={open} onChange={setOpen}>
            <Accordion.Item value="advanced">
              <Accordion.Control>Advanced: model, instructions, manifest, secrets, metadata</Accordion.Control>
              <Accordion.Panel>
                <Stack>
                  <Autocomplete
                    label="Model"
                    description={picked?.model ? `Empty: the agent’s (${picked.model}).` : 'Empty: the agent’s model.'}
                    placeholder={picked?.model ?? 'the agent’s'}
                    data={(models.data ?? []).map((m) => m.id)}
                    value={v.model}
                    onChange={(x) => set('model', x)}
                    error={err('model')}
                  />
                  <Select
                    label="Environment"
                    description="Empty: the agent’s environment (or the server’s default image). A session waits while its image builds."
                    placeholder="the agent’s"
                    clearable
                    data={(environments.data ?? []).map((e) => ({ value: e.id, label: `${e.name} (${e.build.status})` }))}
                    value={v.environment || null}
                    onChange={(x) => set('environment', x ?? '')}
                    error={err('environment_id')}
                  />
                  <Stack gap={4}>
                    <Switch label="Replace the agent’s instructions" checked={v.overrideInstructions} onChange={(e) => set('overrideInstructions', e.currentTarget.checked)} />
                    {v.overrideInstructions && (
                      <Input.Wrapper label="Instructions" description="For this session only, instead of the agent’s." error={err('instructions')}>
                        <LazyCodeEditor language="markdown" value={v.instructions} onChange={(x) => set('instructions', x)} minHeight={100} ariaLabel="Instructions override" />
                      </Input.Wrapper>
                    )}
                  </Stack>
                  <Input.Wrapper
                    label="Manifest"
                    description="Optional: merged into the agent’s manifest, entry by entry and variable by variable (this session wins)."
                    error={err('manifest') ?? Object.entries(errors).find(([k]) => k.startsWith('manifest.'))?.[1]}
                  >
                    <LazyCodeEditor language="json" value={v.manifest} onChange={(x) => set('manifest', x)} minHeight={80} placeholder={MANIFEST_PLACEHOLDER} ariaLabel="Manifest override" />
                  </Input.Wrapper>
                  <Input.Wrapper label="Secret bindings" error={err('secret_bindings')}>
                    <SecretBindingsEditor
                      rows={v.secret_bindings}
                      onChange={(rows) => set('secret_bindings', rows)}
                      error={err}
                      secretNames={(secrets.data ?? []).map((s) => s.name)}
                      intro={
                        <Text size="xs" c="dimmed">
                          Project secrets, besides the agent’s (this session wins per variable).{' '}
                          {secrets.error ? 'The project’s secrets could not be listed; type a secret’s name. ' : ''}
                          With a header (inject) or a placeholder the secret never enters the sandbox; those work only when the server runs an egress proxy (the session’s Network tab says whether it does).
                        </Text>
                      }
                    />
                  </Input.Wrapper>
                  <Input.Wrapper label="Metadata" description="Your own values, kept with the session; a value that reads as JSON (42, true, {…}) is stored as JSON." error={err('metadata')}>
                    <Stack gap="xs" mt={4}>
                      {v.metadata.map((r, i) => (
                        <Group key={i} gap="xs" wrap="nowrap" align="flex-start">
                          <TextInput
                            placeholder="key"
                            value={r.key}
                            error={err(`metadata.${i}.key`) ?? err(`metadata.${r.key}`)}
                            aria-label={`Metadata key ${i + 1}`}
                            onChange={(e) => {
                              const key = e.currentTarget.value;
                              set('metadata', v.metadata.map((x, j) => (j === i ? { ...x, key } : x)));
                            }}
                          />
                          <TextInput
                            placeholder="value"
                            value={r.value}
                            aria-label={`Metadata value ${i + 1}`}
                            onChange={(e) => {
                              const value = e.currentTarget.value;
                              set('metadata', v.metadata.map((x, j) => (j === i ? { ...x, value } : x)));
                            }}
                          />
                          <ActionIcon variant="subtle" color="red" aria-label={`Remove metadata ${i + 1}`} mt={6} onClick={() => set('metadata', v.metadata.filter((_, j) => j !== i))}>
                            <IconTrash size={16} />
                          </ActionIcon>
                        </Group>
                      ))}
                      <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => set('metadata', [...v.metadata, { key: '', value: '' }])}>
                        Add metadata
                      </Button>
                    </Stack>
                  </Input.Wrapper>
                </Stack>
              </Accordion.Panel>
            </Accordion.Item>
            <Accordion.Item value="limits">
              <Accordion.Control>Limits: idle time, lifetime, CPUs, memory, disk</Accordion.Control>
              <Accordion.Panel>
                <SimpleGrid cols={{ base: 1, sm: 2 }}>
                  <LimitInput
                    label="Idle TTL (seconds)"
                    description="Unused this long, the sandbox is released (asleep: a message wakes it). Empty: the agent’s; 0: never."
                    placeholder="the agent’s"
                    value={v.idle_ttl_seconds}
                    onChange={(x) => set('idle_ttl_seconds', x)}
                    error={err('idle_ttl_seconds')}
                  />
                  <LimitInput
                    label="Max lifetime (seconds)"
                    description={`From now; then the sandbox stops for good and cannot be started again. Empty: no limit; at most ${MAX_SESSION_SECONDS} (a year).`}
                    placeholder="no limit"
                    value={v.max_lifetime_seconds}
                    onChange={(x) => set('max_lifetime_seconds', x)}
                    error={err('max_lifetime_seconds')}
                  />
                  <LimitInput
                    label="CPUs"
                    description="Fractions allowed (0.5). Empty: the server’s default."
                    placeholder="server default"
                    decimal
                    value={v.cpus}
                    onChange={(x) => set('cpus', x)}
                    error={err('resources.cpus') ?? err('resources')}
                  />
                  <LimitInput
                    label="Memory (MiB)"
                    description="At least 64, no extra swap. Empty: the server’s default."
                    placeholder="server default"
                    value={v.memory_mb}
                    onChange={(x) => set('memory_mb', x)}
                    error={err('resources.memory_mb') ?? err('resources.gpus')}
                  />
                  <LimitInput
                    label="Disk (MiB)"
                    description={`What it may write before it is stopped: its workspace is kept, other files (such as /tmp) are not. At least ${MIN_DISK_MB}, at most the server’s limit. Empty: the server’s limit, if it has one.`}
                    placeholder="server limit"
                    value={v.disk_mb}
                    onChange={(x) => set('disk_mb', x)}
                    error={err('resources.disk_mb')}
                  />
                </SimpleGrid>
              </Accordion.Panel>
            </Accordion.Item>
            <Accordion.Item value="budget">
              <Accordion.Control>Budget: cost, tokens, model steps, sandbox time</Accordion.Control>
              <Accordion.Panel>
                <Stack gap="sm">
                  <Text size="xs" c="dimmed">
                    Limits on what its turns spend, checked before every model call: a turn that reaches one stops there, and raising it lets the next message go on. It can be changed on the session’s page.
                  </Text>
                  <SegmentedControl
                    aria-label="Budget"
                    data={[
                      { value: 'agent', label: 'The agent’s' },
                      { value: 'own', label: 'Its own' },
                      { value: 'none', label: 'None' },
                    ]}
                    value={v.budgetMode}
                    onChange={(x) => {
                      const mode = x as BudgetMode;
                      // Its own starts from the agent's, when there is one and nothing was typed yet.
                      setV((old) => ({ ...old, budgetMode: mode, budget: mode === 'own' && !hasLimits(old.budget) ? budgetValuesOf(picked?.budget) : old.budget }));
                    }}
                    data-testid="budget-mode"
                  />
                  {v.budgetMode === 'agent' && (
                    <Text size="sm" data-testid="agent-budget">
                      {picked ? `The agent’s, copied now: ${budgetSummary(picked.budget)}.` : 'The agent’s default budget, copied now (if it has one).'}
                    </Text>
                  )}
                  {v.budgetMode === 'none' && <Text size="sm">No budget, whatever the agent’s default.</Text>}
                  {v.budgetMode === 'own' && <BudgetFields values={v.budget} onChange={(b) => set('budget', b)} errors={errors} />}
                  {err('budget') && (
                    <Text size="sm" c="red" role="alert" data-testid="budget-error">
                      {err('budget')}
                    </Text>
                  )}
                </Stack>
              </Accordion.Panel>
            </Accordion.Item>
          </Accordion>
          {Object.keys(errors).length > 0 && !start.error && (
            <Alert color="red" role="alert" data-testid="start-errors">
              Fix the fields marked above first.
            </Alert>
          )}
          {isSpendLimitRefusal(start.error) ? <SpendLimitRefusal detail={start.error.detail} /> : <ErrorAlert error={start.error} />}
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={start.isPending} leftSection={<IconPlayerPlay size={16} />}>
              Start session
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

/**
 * A field of the limits: whole numbers unless `decimal`, never negative. Its value stays text
 * (what was typed, checked before sending): Mantine's trimming of leading zeros on blur would
 * turn a typed 0 into nothing.
 */
function LimitInput({ decimal = false, value, onChange, ...rest }: Pick<NumberInputProps, 'label' | 'description' | 'placeholder' | 'error'> & { decimal?: boolean; value: string; onChange: (value: string) => void }) {
  return <NumberInput {...rest} allowDecimal={decimal} allowNegative={false} trimLeadingZeroesOnBlur={false} value={value} onChange={(x) => onChange(String(x))} />;
}
