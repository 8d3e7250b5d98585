import { RuntimeClassSelect } from '../../components/RuntimeClassSelect';
import {
  ActionIcon,
  Alert,
  Anchor,
  Autocomplete,
  Button,
  Card,
  Checkbox,
  Group,
  Input,
  MultiSelect,
  NumberInput,
  Select,
  SimpleGrid,
  Stack,
  Switch,
  Table,
  Tabs,
  Text,
  TextInput,
  Textarea,
} from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { IconCheck, IconPlus, IconTrash } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { api, ApiError, fieldErrors, unwrap, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { BudgetFields } from '../../components/BudgetFields';
import { ErrorAlert, PageHeader } from '../../components/common';
import { LazyCodeEditor } from '../../components/LazyCodeEditor';
import { NetworkPolicyEditor } from '../../components/NetworkPolicyEditor';
import { SecretBindingsEditor } from '../../components/SecretBindingsEditor';
import { serverBindingErrors } from '../../lib/secretBindings';
import { PageFallback } from '../../components/PageFallback';
import { LAYERS_HELP, networkErrorsOf } from '../../lib/network';
import { ManifestEntriesEditor, SkillsSourceEditor } from './StructuredEditors';
import { PermissionsPanel } from './PermissionsPanel';
import { serverPermissionErrors } from '../../lib/permissions';
import { bundleOfSkillsSource } from './structured';
import {
  agentBody,
  agentPatchBody,
  CAPABILITIES,
  CAPABILITY_HELP,
  conflictRows,
  EFFORTS,
  emptyAgentForm,
  formFromAgent,
  rebaseForm,
  toolsOfForm,
  TRANSPORTS,
  validateAgentForm,
  type AgentFormValues,
  type ConflictRow,
  type Errors,
} from './model';

export default function AgentFormPage() {
  const { ref } = useParams();
  const editing = !!ref;
  const agent = useQuery({
    queryKey: keys.agents.detail(ref ?? ''),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}', { params: { path: { ref: ref! } } })),
    enabled: editing,
  });
  if (editing && agent.isPending) return <PageFallback />;
  if (editing && agent.error) return <ErrorAlert error={agent.error} />;
  return <AgentForm base={agent.data ?? null} key={agent.data?.id ?? 'new'} />;
}

function AgentForm({ base: initialBase }: { base: Agent | null }) {
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [base, setBase] = useState<Agent | null>(initialBase);
  const [values, setValues] = useState<AgentFormValues>(() => (initialBase ? formFromAgent(initialBase) : emptyAgentForm()));
  const [errors, setErrors] = useState<Errors>({});
  const [touched, setTouched] = useState(false);
  const [conflict, setConflict] = useState<{ current: Agent; rows: ConflictRow[] } | null>(null);
  const models = useQuery({ queryKey: keys.models(), queryFn: () => unwrap(api.GET('/api/models')), retry: false });
  const secrets = useQuery({ queryKey: keys.secrets(), queryFn: () => unwrap(api.GET('/api/secrets')) });
  const bundles = useQuery({ queryKey: keys.skillBundles.all(), queryFn: () => unwrap(api.GET('/api/skill-bundles')) });
  const otherAgents = useQuery({ queryKey: keys.agents.all(), queryFn: () => unwrap(api.GET('/api/agents')) });

  const skillsBundle = bundleOfSkillsSource(values.skills_source);
  const set = <K extends keyof AgentFormValues>(k: K, v: AgentFormValues[K]) => setValues((s) => ({ ...s, [k]: v }));
  useEffect(() => {
    if (touched) setErrors(validateAgentForm(values, { selfSlug: values.slug }));
  }, [values, touched]);

  const save = useMutation({
    mutationFn: async ({ v, base }: { v: AgentFormValues; base: Agent | null }) => {
      if (base) {
        // Resolved defaults the form shows (model, subagent step limit) go only when changed.
        const body = agentPatchBody(v, formFromAgent(base));
        return unwrap(
          api.PATCH('/api/agents/{ref}', { params: { path: { ref: base.slug } }, body: { ...body, version: base.version } }),
        );
      }
      return unwrap(api.POST('/api/agents', { body: agentBody(v) }));
    },
    onSuccess: (a) => {
      qc.invalidateQueries({ queryKey: keys.agents.all() });
      // Every accepted save is a new version in the agent's history.
      qc.invalidateQueries({ queryKey: keys.agents.versions(a.slug) });
      qc.setQueryData(keys.agents.detail(a.slug), a);
      notifications.show({ color: 'teal', message: base ? `Saved ${a.slug} (version ${a.version})` : `Created ${a.slug}` });
      navigate(`/agents/${a.slug}`);
    },
    onError: async (err) => {
      if (err instanceof ApiError && err.status === 409 && base) {
        // Stale version: fetch what is there now and show what changed since this form was loaded.
        try {
          const current = await unwrap(api.GET('/api/agents/{ref}', { params: { path: { ref: base.slug } } }));
          if (current.version !== base.version) setConflict({ current, rows: conflictRows(base, current, values) });
        } catch {
          /* the error alert shows the 409 */
        }
      }
    },
  });

  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    setTouched(true);
    const errs = validateAgentForm(values, { selfSlug: values.slug });
    setErrors(errs);
    if (Object.keys(errs).length === 0) save.mutate({ v: values, base });
  };

  const err = (k: string) => errors[k];
  // The server's word on the policy (a 422 names the entry), on the rows as they were sent.
  const networkErrors = networkErrorsOf(fieldErrors(save.error), 'network', save.variables?.v.network, values.network);
  // The server's word on a binding (a 422 names the field), shown while the row is as it was sent.
  const serverBindings = serverBindingErrors(fieldErrors(save.error));
  const bindingError = (k: string) => {
    const i = Number(k.split('.')[1]);
    const sent = save.variables?.v.secret_bindings[i];
    const same = sent !== undefined && JSON.stringify(sent) === JSON.stringify(values.secret_bindings[i]);
    return err(k) ?? (same ? serverBindings[k] : undefined);
  };
  // The server's word on the budget (a 422 names the limit), under the client's.
  const serverErrors = fieldErrors(save.error);
  const budgetErrors = Object.fromEntries(
    Object.entries({ ...serverErrors, ...errors }).filter(([k]) => k === 'budget' || k.startsWith('budget.')),
  );
  // The permissions: the keys the agent in the form has; the server's word while they are as sent.
  const permissionsAsSent = !!save.variables && JSON.stringify(save.variables.v.permissions) === JSON.stringify(values.permissions);
  const permissionErrs = {
    ...(permissionsAsSent ? serverPermissionErrors(serverErrors) : {}),
    ...Object.fromEntries(Object.entries(errors).filter(([k]) => k === 'permissions' || k.startsWith('permissions.'))),
  };
  const sectionHasErrors = (prefixes: string[]) => Object.keys(errors).some((k) => prefixes.some((p) => k === p || k.startsWith(p + '.')));

  return (
    <form onSubmit={submit} noValidate>
      <PageHeader
        title={base ? `Edit ${base.name}` : 'New agent'}
        description={base ? `Version ${base.version}. Saving replaces lists and the manifest as a whole.` : 'Only the slug and the name are required.'}
        actions={
          <>
            <Button variant="default" component={Link} to={base ? `/agents/${base.slug}` : '/agents'}>
              Cancel
            </Button>
            <Button type="submit" loading={save.isPending}>
              {base ? 'Save' : 'Create agent'}
            </Button>
          </>
        }
      />
      {conflict && (
        <Alert color="orange" title={`Someone saved version ${conflict.current.version} meanwhile`} mb="md" data-testid="conflict">
          {conflict.rows.length === 0 ? (
            <Text size="sm">Changed since you opened the form: nothing visible (only the version).</Text>
          ) : (
            <>
              <Text size="sm">Changed since you opened the form:</Text>
              <Table fz="sm" mt={4} withRowBorders={false} data-testid="conflict-values">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Field</Table.Th>
                    <Table.Th>When you opened it</Table.Th>
                    <Table.Th>Saved meanwhile</Table.Th>
                    <Table.Th>In your form</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {conflict.rows.map((r) => (
                    <Table.Tr key={r.field}>
                      <Table.Td ff="monospace">{r.field}</Table.Td>
                      <Table.Td style={{ wordBreak: 'break-word' }}>{r.opened}</Table.Td>
                      <Table.Td style={{ wordBreak: 'break-word' }}>{r.theirs}</Table.Td>
                      <Table.Td style={{ wordBreak: 'break-word' }}>{r.yours}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </>
          )}
          <Group mt="xs">
            <Button
              size="xs"
              onClick={() => {
                const merged = base ? rebaseForm(formFromAgent(base), values, formFromAgent(conflict.current)) : values;
                setBase(conflict.current);
                setValues(merged);
                setConflict(null);
                save.mutate({ v: merged, base: conflict.current });
              }}
            >
              Re-apply my changes on version {conflict.current.version}
            </Button>
            <Button
              size="xs"
              variant="default"
              onClick={() => {
                setBase(conflict.current);
                setValues(formFromAgent(conflict.current));
                setConflict(null);
                save.reset();
              }}
            >
              Discard mine, load theirs
            </Button>
          </Group>
        </Alert>
      )}
      {!conflict && <ErrorAlert error={save.error} title="The server refused the agent" />}
      {Object.keys(errors).length > 0 && (
        <Alert color="red" mb="md" title="Fix these first">
          {Object.entries(errors).map(([k, v]) => (
            <Text size="sm" key={k}>
              {k}: {v}
            </Text>
          ))}
        </Alert>
      )}
      <Tabs defaultValue="basics" keepMounted={false}>
        <Tabs.List mb="md">
          <Tabs.Tab value="basics" color={sectionHasErrors(['slug', 'name', 'description', 'model', 'transport']) ? 'red' : undefined}>
            Basics
          </Tabs.Tab>
          <Tabs.Tab value="instructions">Instructions</Tabs.Tab>
          <Tabs.Tab value="sandbox" color={sectionHasErrors(['image', 'exposed_ports', 'idle_ttl_seconds', 'environment_id', 'runtime_class', 'env', 'entries']) ? 'red' : undefined}>
            Sandbox
          </Tabs.Tab>
          <Tabs.Tab value="network" color={Object.keys(networkErrors).length > 0 ? 'red' : undefined}>
            Network
          </Tabs.Tab>
          <Tabs.Tab value="budget" color={Object.keys(budgetErrors).length > 0 ? 'red' : undefined}>
            Budget
          </Tabs.Tab>
          <Tabs.Tab value="tools" color={sectionHasErrors(['client_tools']) ? 'red' : undefined}>
            Client tools
          </Tabs.Tab>
          <Tabs.Tab value="secrets" color={sectionHasErrors(['secret_bindings']) || Object.keys(serverBindings).length > 0 ? 'red' : undefined}>
            Secrets
          </Tabs.Tab>
          <Tabs.Tab value="advanced" color={sectionHasErrors(['subagents', 'subagent_max_steps', 'skills_source', 'workspace_source']) ? 'red' : undefined}>
            Subagents & skills
          </Tabs.Tab>
          <Tabs.Tab value="permissions" color={Object.keys(permissionErrs).length > 0 ? 'red' : undefined}>
            Permissions
          </Tabs.Tab>
        </Tabs.List>

        <Tabs.Panel value="basics">
          <Stack maw={720}>
            <SimpleGrid cols={{ base: 1, sm: 2 }}>
              <TextInput label="Slug" description="The stable name callers use." required value={values.slug} disabled={!!base} error={err('slug')} onChange={(e) => set('slug', e.currentTarget.value)} name="slug" />
              <TextInput label="Name" required value={values.name} error={err('name')} onChange={(e) => set('name', e.currentTarget.value)} name="name" />
            </SimpleGrid>
            <Textarea label="Description" description="For people, at most 4000 characters." autosize minRows={2} value={values.description} error={err('description')} onChange={(e) => set('description', e.currentTarget.value)} />
            <SimpleGrid cols={{ base: 1, sm: 3 }}>
              <Select label="Transport" data={[...TRANSPORTS]} value={values.transport} allowDeselect={false} onChange={(v) => set('transport', v ?? 'proxy')} error={err('transport')} />
              <Autocomplete
                label="Model"
                placeholder="server default"
                description={models.error ? 'The model catalogue is unavailable.' : undefined}
                data={(models.data ?? []).map((m) => m.id)}
                value={values.model}
                onChange={(v) => set('model', v)}
                error={err('model')}
              />
              <Select label="Reasoning effort" placeholder="provider default" clearable data={[...EFFORTS]} value={values.reasoning_effort || null} onChange={(v) => set('reasoning_effort', v ?? '')} />
            </SimpleGrid>
            <Checkbox label="Default capabilities (shell, filesystem and compaction)" checked={values.defaultCapabilities} onChange={(e) => set('defaultCapabilities', e.currentTarget.checked)} />
            {!values.defaultCapabilities && (
              <MultiSelect
                label="Capabilities"
                description="What the agent’s tools may do; each option says what it gives."
                data={[...CAPABILITIES]}
                value={values.capabilities}
                onChange={(v) => set('capabilities', v)}
                maxDropdownHeight={360}
                renderOption={({ option, checked }) => (
                  <Group gap="xs" wrap="nowrap">
                    <IconCheck size={14} style={{ visibility: checked ? 'visible' : 'hidden', flex: 'none' }} />
                    <Stack gap={0}>
                      <Text size="sm" ff="monospace">
                        {option.value}
                      </Text>
                      <Text size="xs" c="dimmed">
                        {CAPABILITY_HELP[option.value as keyof typeof CAPABILITY_HELP]}
                      </Text>
                    </Stack>
                  </Group>
                )}
              />
            )}
            {!values.defaultCapabilities && values.capabilities.includes('python') && (
              <Text size="sm" c="dimmed" data-testid="python-capability-note">
                python: the model gets a python tool whose kernel keeps its variables between calls; each cell is kept in the session’s Notebook tab.{' '}
                {values.environment_id.trim()
                  ? 'The kernel’s packages (ipykernel at least) come from the agent’s environment.'
                  : 'With no environment of its own the agent boots in the project’s built-in analysis environment (numpy, pandas, matplotlib), made on first use: its image builds while the first session waits.'}
              </Text>
            )}
          </Stack>
        </Tabs.Panel>

        <Tabs.Panel value="instructions">
          <Input.Wrapper label="Instructions" description="The system prompt, in Markdown.">
            <LazyCodeEditor language="markdown" value={values.instructions} onChange={(v) => set('instructions', v)} minHeight={280} ariaLabel="Instructions" />
          </Input.Wrapper>
        </Tabs.Panel>

        <Tabs.Panel value="sandbox">
          <Stack maw={820}>
            <SimpleGrid cols={{ base: 1, sm: 2 }}>
              <TextInput label="Image" placeholder="server default image" value={values.image} error={err('image')} onChange={(e) => set('image', e.currentTarget.value)} />
              <TextInput label="Environment" placeholder="server default" description="An environment of this project, by name or id: its sessions boot in it." value={values.environment_id} error={err('environment_id')} onChange={(e) => set('environment_id', e.currentTarget.value)} />
              <TextInput label="Exposed ports" description="Comma-separated, 1–65535, for previews." value={values.exposed_ports} error={err('exposed_ports')} onChange={(e) => set('exposed_ports', e.currentTarget.value)} />
              <NumberInput label="Idle TTL (seconds)" description="Empty: server default; 0: never released." min={0} allowDecimal={false} value={values.idle_ttl_seconds === '' ? '' : Number(values.idle_ttl_seconds)} error={err('idle_ttl_seconds')} onChange={(v) => set('idle_ttl_seconds', v === '' ? '' : String(v))} />
              <RuntimeClassSelect value={values.runtime_class} error={err('runtime_class') ?? fieldErrors(save.error).runtime_class} onChange={(v) => set('runtime_class', v)} description="The runtime its sessions' sandboxes run under (gVisor, Kata): default, its environment's, else the server's. Such a sandbox boots cold." />
            </SimpleGrid>
            <Input.Wrapper label="Environment variables" description="Set in the container for every command.">
              <Stack gap="xs" mt={4}>
                {values.env.map((row, i) => (
                  <Group key={i} gap="xs" wrap="nowrap" align="flex-start">
                    <TextInput placeholder="NAME" value={row.key} error={err(`env.${i}.key`)} aria-label="Variable name" onChange={(e) => set('env', values.env.map((r, j) => (j === i ? { ...r, key: e.currentTarget.value } : r)))} />
                    <TextInput placeholder="value" style={{ flex: 1 }} value={row.value} aria-label="Variable value" onChange={(e) => set('env', values.env.map((r, j) => (j === i ? { ...r, value: e.currentTarget.value } : r)))} />
                    <ActionIcon variant="subtle" color="red" aria-label="Remove variable" onClick={() => set('env', values.env.filter((_, j) => j !== i))} mt={6}>
                      <IconTrash size={16} />
                    </ActionIcon>
                  </Group>
                ))}
                <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => set('env', [...values.env, { key: '', value: '' }])}>
                  Add variable
                </Button>
              </Stack>
            </Input.Wrapper>
            <ManifestEntriesEditor rows={values.entries} json={values.entriesJson} onChange={(patch) => setValues((s) => ({ ...s, ...patch }))} errors={errors} />
          </Stack>
        </Tabs.Panel>

        <Tabs.Panel value="network">
          <Stack maw={820}>
            <NetworkPolicyEditor
              label="Egress"
              description={`What this agent’s sandboxes may connect to. ${LAYERS_HELP}`}
              value={values.network}
              onChange={(p) => set('network', p)}
              errors={networkErrors}
            />
          </Stack>
        </Tabs.Panel>

        <Tabs.Panel value="budget">
          <Stack maw={820}>
            <Text size="sm" c="dimmed">
              The default budget of its sessions: limits on what a session’s turns spend, checked before every model call. A turn that reaches one stops there (nothing fails); raising the session’s budget lets its next message go on. A session created without a budget of its own gets a copy of this one then, so a change here applies to sessions created afterwards. All empty: no budget.
            </Text>
            <BudgetFields values={values.budget} onChange={(b) => set('budget', b)} errors={budgetErrors} />
            {budgetErrors.budget && (
              <Text size="sm" c="red" role="alert">
                {budgetErrors.budget}
              </Text>
            )}
          </Stack>
        </Tabs.Panel>

        <Tabs.Panel value="tools">
          <Stack maw={820}>
            <Text size="sm" c="dimmed">
              Tools your code (or a person) answers. A deferrable tool parks the run until it is answered, however long that takes; an ordinary one holds it for its timeout.
            </Text>
            {values.client_tools.map((t, i) => {
              const upd = (patch: Partial<typeof t>) => set('client_tools', values.client_tools.map((r, j) => (j === i ? { ...r, ...patch } : r)));
              return (
                <Card withBorder key={i}>
                  <Stack gap="xs">
                    <Group align="flex-start" grow>
                      <TextInput label="Name" value={t.name} error={err(`client_tools.${i}.name`)} onChange={(e) => upd({ name: e.currentTarget.value })} />
                      <TextInput label="Timeout (s)" placeholder="120" disabled={t.deferrable} value={t.timeout_seconds} error={err(`client_tools.${i}.timeout_seconds`)} onChange={(e) => upd({ timeout_seconds: e.currentTarget.value })} />
                    </Group>
                    <TextInput label="Description" value={t.description} onChange={(e) => upd({ description: e.currentTarget.value })} />
                    <Switch label="Deferrable (a question for a person)" checked={t.deferrable} onChange={(e) => upd({ deferrable: e.currentTarget.checked, timeout_seconds: e.currentTarget.checked ? '' : t.timeout_seconds })} />
                    <Input.Wrapper label="Parameters (JSON Schema)" error={err(`client_tools.${i}.parameters`)}>
                      <LazyCodeEditor language="json" value={t.parameters} onChange={(v) => upd({ parameters: v })} minHeight={80} ariaLabel={`Parameters of ${t.name || 'tool'}`} />
                    </Input.Wrapper>
                    <Button variant="subtle" color="red" size="xs" w="fit-content" onClick={() => set('client_tools', values.client_tools.filter((_, j) => j !== i))}>
                      Remove tool
                    </Button>
                  </Stack>
                </Card>
              );
            })}
            <Button
              variant="light"
              w="fit-content"
              leftSection={<IconPlus size={14} />}
              onClick={() => set('client_tools', [...values.client_tools, { name: '', description: '', deferrable: false, timeout_seconds: '', parameters: '{\n  "type": "object",\n  "properties": {}\n}' }])}
            >
              Add client tool
            </Button>
          </Stack>
        </Tabs.Panel>

        <Tabs.Panel value="secrets">
          <SecretBindingsEditor rows={values.secret_bindings} onChange={(rows) => set('secret_bindings', rows)} error={bindingError} secretNames={(secrets.data ?? []).map((s) => s.name)}
            intro={
              <Text size="sm" c="dimmed">
                Project secrets, resolved when the sandbox boots; values are never shown. A variable puts the secret in the sandbox’s environment. With a header (inject) or a placeholder the secret never enters the sandbox: the egress proxy adds it to requests to the hosts you name. Those two work only on a server run with --egress-proxy (an operator’s flag): without the proxy nothing adds the header or swaps the placeholder.
              </Text>
            }
          />
        </Tabs.Panel>

        <Tabs.Panel value="advanced">
          <Stack maw={820}>
            <Input.Wrapper
              label="Subagents"
              description="Other agents of the project this one can call with a task (tool: it answers, the conversation stays here) or hand the conversation to (handoff: it answers the next messages until it hands back). Both work in this session's sandbox; subagents may not form a cycle."
              error={err('subagents')}
            >
              <Stack gap="xs" mt={4} data-testid="subagents">
                {values.subagents.map((x, i) => {
                  const upd = (patch: Partial<typeof x>) => set('subagents', values.subagents.map((r, j) => (j === i ? { ...r, ...patch } : r)));
                  return (
                    <Group key={i} gap="xs" wrap="nowrap" align="flex-start">
                      <Select
                        aria-label="Subagent"
                        placeholder="agent"
                        searchable
                        data={(otherAgents.data ?? []).filter((a) => a.slug !== values.slug).map((a) => ({ value: a.slug, label: `${a.name} (${a.slug})` }))}
                        value={x.agent || null}
                        error={err(`subagents.${i}.agent`)}
                        onChange={(v) => upd({ agent: v ?? '' })}
                        w={240}
                      />
                      <Select aria-label="Mode" data={[{ value: 'tool', label: 'tool' }, { value: 'handoff', label: 'handoff' }]} value={x.mode} allowDeselect={false} onChange={(v) => upd({ mode: v === 'handoff' ? 'handoff' : 'tool' })} w={110} />
                      <TextInput aria-label="Tool name" placeholder={x.mode === 'handoff' ? `transfer_to_${x.agent || 'slug'}` : x.agent || 'tool name'} value={x.tool_name} error={err(`subagents.${i}.tool_name`)} onChange={(e) => upd({ tool_name: e.currentTarget.value })} w={200} />
                      <TextInput aria-label="When to use it" placeholder="its own description" value={x.description} onChange={(e) => upd({ description: e.currentTarget.value })} style={{ flex: 1 }} />
                      <ActionIcon variant="subtle" color="red" aria-label="Remove subagent" mt={6} onClick={() => set('subagents', values.subagents.filter((_, j) => j !== i))}>
                        <IconTrash size={16} />
                      </ActionIcon>
                    </Group>
                  );
                })}
                <Button variant="light" size="xs" w="fit-content" leftSection={<IconPlus size={14} />} onClick={() => set('subagents', [...values.subagents, { agent: '', mode: 'tool', tool_name: '', description: '' }])}>
                  Add a subagent
                </Button>
              </Stack>
            </Input.Wrapper>
            <NumberInput label="Subagent step limit" description="Model steps each subagent this agent calls as a tool may take before its call ends with an error: 1 to 100. Empty: 10." min={1} max={100} allowDecimal={false} maw={260} value={values.subagent_max_steps === '' ? '' : Number(values.subagent_max_steps)} error={err('subagent_max_steps')} onChange={(v) => set('subagent_max_steps', v === '' ? '' : String(v))} />
            <SkillsSourceEditor value={values.skills_source} onChange={(v) => set('skills_source', v)} error={err('skills_source')} />
            <Select
              label="Use a skill bundle"
              description="Sets the skills source to the bundle's latest version, resolved at every boot (pin a number in the JSON instead)."
              placeholder={(bundles.data ?? []).length ? 'Pick a bundle' : 'No skill bundles in this project'}
              data={(bundles.data ?? []).map((b) => b.slug)}
              value={skillsBundle ?? null}
              onChange={(slug) => slug && set('skills_source', JSON.stringify({ kind: 'bundle', bundle: slug, version: 'latest', lazy: true }, null, 2))}
              maw={360}
              searchable
            />
            {values.skills_source.trim() !== '' && !values.defaultCapabilities && !values.capabilities.includes('skills') && (
              <Text size="sm" c="dimmed" data-testid="skills-not-announced">
                Without the skills capability the skills are staged into the workspace at boot, but the model is not told about them.
              </Text>
            )}
            {values.skills_source.trim() !== '' && values.defaultCapabilities && (
              <Text size="sm" c="dimmed" data-testid="skills-not-announced">
                The default capabilities do not include skills: the skills are staged at boot, but the model is not told about them.
              </Text>
            )}
            {skillsBundle && (
              <Text size="sm" mt={-8}>
                Skill bundle: <Anchor component={Link} to={`/skill-bundles/${encodeURIComponent(skillsBundle)}`} ff="monospace">{skillsBundle}</Anchor> (its versions, and how to push one)
              </Text>
            )}
            <Input.Wrapper label="Workspace source" description='Empty for none, or {"kind":"same_as_skills","dest":"pstack"}' error={err('workspace_source')}>
              <LazyCodeEditor language="json" value={values.workspace_source} onChange={(v) => set('workspace_source', v)} minHeight={80} ariaLabel="Workspace source" />
            </Input.Wrapper>
          </Stack>
        </Tabs.Panel>

        <Tabs.Panel value="permissions">
          <PermissionsPanel slug={base?.slug ?? null} tools={toolsOfForm(values)} rows={values.permissions} onChange={(rows) => set('permissions', rows)} errors={permissionErrs} />
        </Tabs.Panel>
      </Tabs>
    </form>
  );
}
