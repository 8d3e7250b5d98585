// The project's monthly spend limit on its page: this month's spend against it (a bar), and
// for operators the field that sets, changes or removes it (PATCH with `limits`, replacing the
// whole set: the project's other limits, its capacity, are sent along as they are). A
// project's own admins cannot lift a limit set on it: the field is not offered to them, and a
// 403 the server gives anyway is said as what it is. A 422 lands at the field.
import { Button, Card, Group, NumberInput, Stack, Text, Title } from '@mantine/core';
import { IconLock } from '@tabler/icons-react';
import { useEffect, useState } from 'react';
import { fieldErrors, type Project } from '../../api/client';
import { ErrorAlert } from '../../components/common';
import { SpendMeter, useProjectSpend } from '../../components/ProjectSpend';
import { formatUsd } from '../../lib/money';
import { limitsBody, MAX_MONTHLY_COST_USD, monthlyLimitOf, validateMonthlyLimit } from '../../lib/spendLimit';
import { isForbidden, LimitsForbiddenAlert, useSaveProjectLimits } from './saveLimits';

const FIELD = 'limits.monthly_cost_usd';

export function ProjectLimitsCard({ project, operator }: { project: Project; operator: boolean }) {
  const ref = project.slug;
  const spend = useProjectSpend(ref);
  const current = monthlyLimitOf(project.limits);
  const [value, setValue] = useState(current == null ? '' : String(current));
  const [error, setError] = useState<string | null>(null);
  useEffect(() => setValue(current == null ? '' : String(current)), [current]);
  const save = useSaveProjectLimits(ref, (limits) => {
    const max = monthlyLimitOf(limits);
    return max == null ? 'Monthly limit removed' : `Monthly limit set to ${formatUsd(max)}`;
  });
  const submit = (text: string) => {
    const problem = validateMonthlyLimit(text);
    setError(problem);
    if (!problem) save.mutate(limitsBody(text, project.limits));
  };
  const fieldError = error ?? fieldErrors(save.error)[FIELD];
  const forbidden = isForbidden(save.error);
  // A 422 is said at the field; anything else above the buttons.
  const otherError = save.error && !fieldErrors(save.error)[FIELD] && !forbidden ? save.error : null;
  return (
    <Card withBorder data-testid="project-limits">
      <Title order={4} mb={4}>
        Monthly spend limit
      </Title>
      <Text size="sm" c="dimmed" mb="sm" maw={640}>
        What the project’s model calls may cost in a calendar month (UTC), over every session. At 80 % a warning goes to the session whose call crossed it; at the limit no turn starts and turns in flight stop before their next model call. Calls without a price are not counted.
      </Text>
      <Stack gap="md" maw={640}>
        <ErrorAlert error={spend.error} title="This month’s spend could not be read" />
        {spend.data && (current != null || spend.data.requests > 0) && <SpendMeter spend={spend.data} />}
        {current == null && (
          <Text size="sm" data-testid="project-no-limit">
            No monthly limit is set.
          </Text>
        )}
        {operator ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              submit(value);
            }}
          >
            <Stack gap="xs">
              <NumberInput
                label="Monthly limit (US dollars)"
                description="Empty: no limit. Only operators may set or change it."
                placeholder="no limit"
                min={0}
                max={MAX_MONTHLY_COST_USD}
                allowNegative={false}
                trimLeadingZeroesOnBlur={false}
                clampBehavior="none"
                thousandSeparator={false}
                value={value}
                onChange={(v) => {
                  setValue(String(v));
                  setError(null);
                }}
                error={fieldError}
                w={{ base: '100%', xs: 260 }}
                data-testid="monthly-limit-input"
              />
              {isForbidden(save.error) && <LimitsForbiddenAlert error={save.error} />}
              <ErrorAlert error={otherError} />
              <Group gap="xs">
                <Button type="submit" loading={save.isPending && save.variables?.monthly_cost_usd != null}>
                  {current == null ? 'Set limit' : 'Save limit'}
                </Button>
                {current != null && (
                  <Button
                    variant="subtle"
                    color="red"
                    loading={save.isPending && save.variables?.monthly_cost_usd == null}
                    onClick={() => {
                      setValue('');
                      submit('');
                    }}
                  >
                    Remove limit
                  </Button>
                )}
              </Group>
            </Stack>
          </form>
        ) : (
          <Group gap={6} wrap="nowrap" data-testid="project-limits-readonly">
            <IconLock size={14} style={{ flex: 'none' }} />
            <Text size="sm" c="dimmed">
              {current == null ? 'Only an operator can set one.' : `The limit is ${formatUsd(current)} a month; only an operator can change it.`}
            </Text>
          </Group>
        )}
      </Stack>
    </Card>
  );
}
