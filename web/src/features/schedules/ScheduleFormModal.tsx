// The schedule form, in a modal: a new schedule of an agent (picked here when the page is not
// the agent's), or one edited. Checked as it is sent; a 422 is shown on the field it names.
import { Alert, Button, Checkbox, Chip, Group, Modal, SegmentedControl, Select, Stack, Text, Textarea, TextInput } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { api, unwrap, unwrapPage, type Agent } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { BudgetFields } from '../../components/BudgetFields';
import { ErrorAlert } from '../../components/common';
import {
  BUSY_POLICIES,
  CRON_PRESETS,
  MISSED_POLICIES,
  createBody,
  emptySchedule,
  patchBody,
  scheduleFieldErrors,
  timeZones,
  validateSchedule,
  valuesOf,
  viewerZone,
  type BusyPolicy,
  type MissedPolicy,
  type Schedule,
  type ScheduleValues,
} from '../../lib/schedules';

export function ScheduleFormModal({
  opened,
  onClose,
  agent,
  agents,
  schedule,
}: {
  opened: boolean;
  onClose: () => void;
  /** The agent the schedule is (or will be) of; none: picked from `agents`. */
  agent?: Agent | null;
  agents?: Agent[];
  /** The schedule edited; none: a new one. */
  schedule?: Schedule | null;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={schedule ? `Edit schedule${schedule.name ? ` “${schedule.name}”` : ''}` : 'New schedule'} size="lg">
      {opened && <ScheduleForm agent={agent ?? null} agents={agents ?? []} schedule={schedule ?? null} onDone={onClose} />}
    </Modal>
  );
}

function ScheduleForm({ agent, agents, schedule, onDone }: { agent: Agent | null; agents: Agent[]; schedule: Schedule | null; onDone: () => void }) {
  const qc = useQueryClient();
  const [v, setV] = useState<ScheduleValues>(() => (schedule ? valuesOf(schedule) : emptySchedule(viewerZone())));
  const [picked, setPicked] = useState<string | null>(agent?.slug ?? (agents.length === 1 ? agents[0].slug : null));
  const [checked, setChecked] = useState<Record<string, string>>({});
  const slug = agent?.slug ?? picked;
  const set = <K extends keyof ScheduleValues>(k: K, x: ScheduleValues[K]) => setV((old) => ({ ...old, [k]: x }));
  const zones = useMemo(() => timeZones([viewerZone(), v.timezone]), [v.timezone]);

  // The agent's sessions a schedule may continue (its newest hundred).
  const sessions = useQuery({
    queryKey: keys.sessions.ofAgent(slug ?? '', 100),
    queryFn: () => unwrapPage(api.GET('/api/sessions', { params: { query: { agent_id: slug!, limit: 100, offset: 0 } } })),
    enabled: !!slug && !schedule,
  });

  const save = useMutation({
    mutationFn: async () => {
      if (schedule) {
        return unwrap(api.PATCH('/api/agents/{ref}/schedules/{schedule_id}', { params: { path: { ref: slug!, schedule_id: schedule.id } }, body: patchBody(v, schedule) }));
      }
      return unwrap(api.POST('/api/agents/{ref}/schedules', { params: { path: { ref: slug! } }, body: createBody(v) }));
    },
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.schedules.all() });
      notifications.show({ message: schedule ? 'Schedule saved' : 'Schedule created' });
      onDone();
    },
  });

  const server = scheduleFieldErrors(save.error);
  const errors = { ...server, ...checked };
  const onSubmit = (e: React.FormEvent) => {
    e.preventDefault();
    const found = validateSchedule(v);
    if (!slug) found.agent = 'Pick the agent whose message this is.';
    setChecked(found);
    if (Object.keys(found).length === 0) save.mutate();
  };
  // A field's own error clears as it is edited.
  const edit = <K extends keyof ScheduleValues>(k: K, x: ScheduleValues[K]) => {
    set(k, x);
    setChecked(({ [k as string]: _, ...rest }) => rest);
  };
  // The server's field errors are in the list; any other error (a 409, a 5xx) is said whole.
  const otherError = save.error && Object.keys(server).length === 0 ? save.error : null;

  const sessionOptions = [
    { value: 'new', label: 'A new session for each fire' },
    ...(schedule && schedule.session !== 'new' ? [{ value: schedule.session, label: `Session ${schedule.session.slice(0, 8)}` }] : []),
    ...(sessions.data?.items ?? []).map((s) => ({ value: s.id, label: `${s.title || 'Untitled'} · ${s.id.slice(0, 8)} · ${s.status}` })),
  ];

  return (
    <form onSubmit={onSubmit} noValidate data-testid="schedule-form">
      <Stack>
        {!agent && !schedule && (
          <Select
            label="Agent"
            required
            searchable
            data={agents.filter((a) => !a.archived_at).map((a) => ({ value: a.slug, label: `${a.name} (${a.slug})` }))}
            value={picked}
            onChange={(x) => {
              setPicked(x);
              set('session', 'new');
              setChecked(({ agent: _, ...rest }) => rest);
            }}
            error={errors.agent}
            comboboxProps={{ withinPortal: true }}
          />
        )}
        {(agent || schedule) && errors.agent && (
          <Alert color="red" role="alert" data-testid="schedule-agent-error">
            {errors.agent}
          </Alert>
        )}
        <TextInput label="Name" description="For people; optional." value={v.name} onChange={(e) => edit('name', e.currentTarget.value)} error={errors.name} maxLength={200} />
        <div>
          <TextInput
            label="Cron expression"
            required
            description="Five fields (minute hour day-of-month month day-of-week), or six with seconds first; read in the time zone below."
            inputWrapperOrder={['label', 'input', 'description', 'error']}
            placeholder="0 9 * * 1-5"
            value={v.cron}
            onChange={(e) => edit('cron', e.currentTarget.value)}
            error={errors.cron}
            styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
            data-testid="schedule-cron"
          />
          <Group gap={6} mt={6} data-testid="cron-presets">
            {CRON_PRESETS.map((p) => (
              <Chip key={p.cron} size="xs" checked={v.cron.trim() === p.cron} onChange={() => edit('cron', p.cron)} title={p.cron}>
                {p.label}
              </Chip>
            ))}
          </Group>
        </div>
        <Select
          label="Time zone"
          required
          description="The zone the expression is read in; daylight-saving changes follow it."
          inputWrapperOrder={['label', 'input', 'description', 'error']}
          searchable
          allowDeselect={false}
          limit={100}
          data={zones}
          value={v.timezone}
          onChange={(x) => x && edit('timezone', x)}
          error={errors.timezone}
          nothingFoundMessage="No such time zone"
          comboboxProps={{ withinPortal: true }}
          data-testid="schedule-timezone"
        />
        <Textarea label="Message" required description="Sent at each fire, as a person's prompt." autosize minRows={3} maxRows={10} value={v.message} onChange={(e) => edit('message', e.currentTarget.value)} error={errors.message} data-testid="schedule-message" />
        <Select
          label="Session"
          description={schedule ? 'The session cannot be changed: make another schedule instead.' : 'Each fire starts a new session, or continues one of the agent’s.'}
          inputWrapperOrder={['label', 'input', 'description', 'error']}
          allowDeselect={false}
          searchable
          disabled={!!schedule || !slug}
          data={sessionOptions}
          value={v.session}
          onChange={(x) => x && edit('session', x)}
          error={errors.session}
          comboboxProps={{ withinPortal: true }}
          data-testid="schedule-session"
        />
        {v.session === 'new' && (
          <Stack gap={4}>
            <Text size="sm" fw={500}>
              Budget of each new session
            </Text>
            <Text size="xs" c="dimmed">
              Empty: the agent’s default budget.
            </Text>
            <BudgetFields values={v.budget} onChange={(b) => edit('budget', b)} errors={errors} />
            {errors.budget && (
              <Text size="sm" c="red" role="alert">
                {errors.budget}
              </Text>
            )}
          </Stack>
        )}
        <Group grow align="flex-start">
          <Stack gap={4}>
            <Text size="sm" fw={500}>
              Missed fires
            </Text>
            <SegmentedControl aria-label="Missed fires" data={MISSED_POLICIES.map((p) => ({ value: p.value, label: p.label }))} value={v.missed} onChange={(x) => edit('missed', x as MissedPolicy)} />
            <Text size="xs" c="dimmed">
              {MISSED_POLICIES.find((p) => p.value === v.missed)?.help}
            </Text>
            {errors.missed && <Text size="xs" c="red">{errors.missed}</Text>}
          </Stack>
          <Stack gap={4}>
            <Text size="sm" fw={500}>
              When the session is busy
            </Text>
            <SegmentedControl aria-label="When the session is busy" data={BUSY_POLICIES.map((p) => ({ value: p.value, label: p.label }))} value={v.busy} onChange={(x) => edit('busy', x as BusyPolicy)} />
            <Text size="xs" c="dimmed">
              {BUSY_POLICIES.find((p) => p.value === v.busy)?.help}
            </Text>
            {errors.busy && <Text size="xs" c="red">{errors.busy}</Text>}
          </Stack>
        </Group>
        {!schedule && <Checkbox label="Create it paused" checked={v.paused} onChange={(e) => edit('paused', e.currentTarget.checked)} />}
        {errors.form && (
          <Alert color="red" role="alert">
            {errors.form}
          </Alert>
        )}
        <ErrorAlert error={otherError} />
        <Group justify="flex-end">
          <Button variant="default" onClick={onDone}>
            Cancel
          </Button>
          <Button type="submit" loading={save.isPending}>
            {schedule ? 'Save' : 'Create schedule'}
          </Button>
        </Group>
      </Stack>
    </form>
  );
}
