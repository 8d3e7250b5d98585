// The project's capacity on its page: what it runs now against its limits ("1 of 2 sandboxes ·
// 1 queued", "0 of 1 turns in flight", read again every few seconds while the page is visible)
// and, for operators, the three fields that set them in place of the server's per-project
// flags (empty: the server's default). A save sends the whole set (PATCH replaces it), the
// monthly spend limit along as it is. Each field is checked before sending, a 422 lands at its
// field and a 403 is said as the other card says it; others see the limits read-only.
import { Button, Card, Group, NumberInput, Progress, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { IconLock } from '@tabler/icons-react';
import { useEffect, useState } from 'react';
import { fieldErrors, type Project } from '../../api/client';
import { ErrorAlert } from '../../components/common';
import { useProjectSpend } from '../../components/ProjectSpend';
import {
  CAPACITY_FIELDS,
  capacityBody,
  capacityErrorKey,
  capacityPercent,
  capacitySavedText,
  capacityUsageText,
  capacityValuesOf,
  MAX_CAPACITY,
  requestsPerMinuteText,
  SERVER_DEFAULT,
  validateCapacityValues,
  type CapacityKey,
  type CapacityValues,
} from '../../lib/projectCapacity';
import type { ProjectSpend } from '../../lib/spendLimit';
import { isForbidden, LimitsForbiddenAlert, useSaveProjectLimits } from './saveLimits';

/** How often what the project runs now is read again while the page is visible. */
export const CAPACITY_REFRESH_MS = 5000;

export function ProjectCapacityCard({ project, operator }: { project: Project; operator: boolean }) {
  const ref = project.slug;
  const spend = useProjectSpend(ref, { refreshMs: CAPACITY_REFRESH_MS });
  const current = capacityValuesOf(project.limits);
  const [values, setValues] = useState<CapacityValues>(current);
  const [errors, setErrors] = useState<Partial<Record<CapacityKey, string>>>({});
  const currentKey = JSON.stringify(current);
  useEffect(() => setValues(JSON.parse(currentKey) as CapacityValues), [currentKey]);
  const save = useSaveProjectLimits(ref, capacitySavedText);
  const submit = () => {
    const problems = validateCapacityValues(values);
    setErrors(problems);
    if (Object.keys(problems).length === 0) save.mutate(capacityBody(values, project.limits));
  };
  const serverErrors = fieldErrors(save.error);
  const ours = new Set(CAPACITY_FIELDS.map(({ key }) => capacityErrorKey(key)));
  // A 422 is said at its field; anything else (a 403 apart) above the button.
  const otherError = save.error && !Object.keys(serverErrors).some((k) => ours.has(k)) && !isForbidden(save.error) ? save.error : null;
  return (
    <Card withBorder data-testid="project-capacity">
      <Title order={4} mb={4}>
        Capacity
      </Title>
      <Text size="sm" c="dimmed" mb="sm" maw={640}>
        How much the project may run at once, over every server process, in place of the server’s per-project defaults. Past a limit a new session waits queued for a sandbox, a turn waits for a slot, and API requests are refused (429) until the minute has room.
      </Text>
      <Stack gap="md" maw={640}>
        <ErrorAlert error={spend.error} title="What the project runs now could not be read" />
        <Stack gap="xs" data-testid="capacity-usage">
          {spend.data && <UsageRow label="Sandboxes at once" what="sandboxes" spend={spend.data} />}
          {spend.data && <UsageRow label="Turns in flight" what="runs" spend={spend.data} />}
          <Group justify="space-between" gap="xs" wrap="wrap">
            <Text size="sm" c="dimmed">
              Requests per minute
            </Text>
            <Text size="sm" fw={600} data-testid="capacity-requests">
              {requestsPerMinuteText(project.limits)}
            </Text>
          </Group>
        </Stack>
        {operator ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              submit();
            }}
          >
            <Stack gap="xs">
              <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="sm" verticalSpacing="xs">
                {CAPACITY_FIELDS.map(({ key, label, description }) => (
                  <NumberInput
                    key={key}
                    label={label}
                    description={`${description} ${SERVER_DEFAULT}`}
                    // The inputs in line, however long the words under them.
                    inputWrapperOrder={['label', 'input', 'description', 'error']}
                    placeholder="server’s default"
                    min={1}
                    max={MAX_CAPACITY}
                    allowNegative={false}
                    allowDecimal={false}
                    trimLeadingZeroesOnBlur={false}
                    clampBehavior="none"
                    thousandSeparator={false}
                    value={values[key]}
                    onChange={(v) => {
                      setValues((old) => ({ ...old, [key]: String(v) }));
                      setErrors((old) => ({ ...old, [key]: undefined }));
                    }}
                    error={errors[key] ?? serverErrors[capacityErrorKey(key)]}
                    data-testid={`capacity-input-${key}`}
                  />
                ))}
              </SimpleGrid>
              {isForbidden(save.error) && <LimitsForbiddenAlert error={save.error} />}
              <ErrorAlert error={otherError} />
              <Group gap="xs">
                <Button type="submit" loading={save.isPending}>
                  Save capacity
                </Button>
              </Group>
            </Stack>
          </form>
        ) : (
          <Group gap={6} wrap="nowrap" data-testid="project-capacity-readonly">
            <IconLock size={14} style={{ flex: 'none' }} />
            <Text size="sm" c="dimmed">
              Only an operator can change the project’s capacity.
            </Text>
          </Group>
        )}
      </Stack>
    </Card>
  );
}

/** One limit against what the project runs now: the words, and a bar when it has a limit. */
function UsageRow({ label, what, spend }: { label: string; what: 'sandboxes' | 'runs'; spend: ProjectSpend }) {
  const text = capacityUsageText(what, spend);
  const pct = capacityPercent(what, spend);
  const queued = (what === 'sandboxes' ? spend.sandboxes_queued : spend.runs_queued) ?? 0;
  const full = pct != null && pct >= 100;
  return (
    <Stack gap={4}>
      <Group justify="space-between" gap="xs" wrap="wrap">
        <Text size="sm" c="dimmed">
          {label}
        </Text>
        <Text size="sm" fw={600} data-testid={`capacity-${what}`} data-full={full || undefined}>
          {text}
        </Text>
      </Group>
      {pct != null && <Progress value={pct} color={full || queued > 0 ? 'orange' : 'teal'} size="sm" aria-label={`${label}: ${text}`} />}
    </Stack>
  );
}
