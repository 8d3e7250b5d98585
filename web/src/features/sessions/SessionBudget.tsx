// A session's budget on its page: each limit against what was used (progress bars), the
// header's short form of it, and the dialog that sets, changes or removes it (PATCH, from the
// session's next turn). A 422 lands at the field it names.
import { Alert, Button, Group, Modal, Progress, Stack, Text, Tooltip, UnstyledButton } from '@mantine/core';
import { IconCoin } from '@tabler/icons-react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, fieldErrors, unwrap, type SessionDetail } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { BudgetFields } from '../../components/BudgetFields';
import { ErrorAlert } from '../../components/common';
import { BUDGET_LIMITS, budgetBody, budgetValuesOf, LIMIT_INFO, validateBudget, type Budget, type BudgetValues } from '../../lib/budget';
import { budgetUseOf, limitRows, meterColor, type LimitRow } from './budget';

/** Each limit with a bar of what was used: "Cost · $0.40 of $0.55". */
export function BudgetMeters({ rows }: { rows: LimitRow[] }) {
  return (
    <Stack gap={8} data-testid="budget-meters">
      {rows.map((r) => (
        <div key={r.limit} data-testid="budget-meter" data-limit={r.limit} data-reached={r.reached || undefined}>
          <Group justify="space-between" gap="xs" wrap="nowrap">
            <Text size="sm">{LIMIT_INFO[r.limit].label.replace(/ \(.*\)$/, '')}</Text>
            <Text size="sm" fw={600} c={r.reached ? 'orange.8' : undefined} data-testid="budget-meter-text" style={{ whiteSpace: 'nowrap' }}>
              {r.text}
              {r.reached ? ' · reached' : ''}
            </Text>
          </Group>
          <Progress value={r.fraction * 100} color={meterColor(r)} size="sm" aria-label={`${LIMIT_INFO[r.limit].noun}: ${r.text}`} />
        </div>
      ))}
    </Stack>
  );
}

/**
 * The header's word on the budget: the limit nearest to being reached ("$0.40 of $0.55
 * budget") with a small bar, every limit in its tooltip; a click opens the budget.
 */
export function BudgetIndicator({ session, onOpen }: { session: SessionDetail; onOpen: () => void }) {
  const rows = limitRows(session.budget, budgetUseOf(session));
  if (rows.length === 0) return null;
  const top = rows.reduce((a, b) => (b.reached && !a.reached) || (b.reached === a.reached && b.fraction > a.fraction) ? b : a);
  return (
    <Tooltip
      multiline
      w={300}
      label={
        <Stack gap={2}>
          <Text size="xs" fw={600}>
            Budget (checked before every model call)
          </Text>
          {rows.map((r) => (
            <Text size="xs" key={r.limit}>
              {LIMIT_INFO[r.limit].noun}: {r.text}
              {r.reached ? ' (reached)' : ''}
            </Text>
          ))}
        </Stack>
      }
    >
      <UnstyledButton onClick={onOpen} data-testid="session-budget" aria-label={`Budget: ${rows.map((r) => `${LIMIT_INFO[r.limit].noun} ${r.text}`).join(', ')}`} style={{ display: 'inline-flex', alignItems: 'center', gap: 6 }}>
        <IconCoin size={14} color={top.reached ? 'var(--mantine-color-orange-8)' : 'var(--mantine-color-dimmed)'} />
        <Text span size="sm" c={top.reached ? 'orange.8' : 'dimmed'} data-testid="session-budget-text" style={{ whiteSpace: 'nowrap' }}>
          {top.text} budget{rows.length > 1 ? ` (+${rows.length - 1})` : ''}
        </Text>
        <Progress value={top.fraction * 100} color={meterColor(top)} size="sm" w={48} aria-hidden />
      </UnstyledButton>
    </Tooltip>
  );
}

/** The dialog: the limits as fields (empty: none), what was used under each; Save or Remove. */
export function BudgetModal({ session, onClose }: { session: SessionDetail; onClose: () => void }) {
  const qc = useQueryClient();
  const [values, setValues] = useState<BudgetValues>(() => budgetValuesOf(session.budget));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const use = budgetUseOf(session);
  const rows = limitRows(session.budget, use);
  const save = useMutation({
    mutationFn: (budget: Budget | null) => unwrap(api.PATCH('/api/sessions/{session_id}', { params: { path: { session_id: session.id } }, body: { budget } })),
    onSuccess: (s) => {
      qc.setQueryData(keys.sessions.detail(session.id), (old: SessionDetail | undefined) => (old ? { ...old, ...s } : old));
      qc.invalidateQueries({ queryKey: keys.sessions.detail(session.id) });
      qc.invalidateQueries({ queryKey: keys.sessions.all() });
      onClose();
    },
  });
  // The server's word on the values as they were sent (an edit clears it), else the client's.
  const server = fieldErrors(save.error);
  // A message on a limit shows at its field; any other (an unknown key, a 404) in the alert.
  const atFields = BUDGET_LIMITS.some((k) => server[`budget.${k}`]);
  return (
    <Modal opened onClose={onClose} title="Budget" size="lg">
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const errs = validateBudget(values);
          setErrors(errs);
          if (Object.keys(errs).length === 0) save.mutate(budgetBody(values));
        }}
      >
        <Stack>
          <Text size="sm" c="dimmed">
            Limits on what this session’s turns spend, checked before every model call: a turn that reaches one stops there (nothing fails), and a raised limit lets the next message go on. A change applies from the next turn. Empty: no limit.
          </Text>
          {rows.length > 0 && <BudgetMeters rows={rows} />}
          <BudgetFields
            values={values}
            onChange={(v) => {
              setValues(v);
              setErrors({});
              if (save.error) save.reset();
            }}
            errors={{ ...server, ...errors }}
            used={use}
          />
          {server.budget && (
            <Alert color="red" role="alert" data-testid="budget-error">
              {server.budget}
            </Alert>
          )}
          {save.error != null && !atFields && !server.budget && <ErrorAlert error={save.error} title="The budget was not saved" />}
          <Group justify="space-between">
            {session.budget ? (
              <Button variant="subtle" color="red" onClick={() => save.mutate(null)} loading={save.isPending && save.variables === null} data-testid="remove-budget">
                Remove the budget
              </Button>
            ) : (
              <span />
            )}
            <Group gap="xs">
              <Button variant="default" onClick={onClose}>
                Cancel
              </Button>
              <Button type="submit" loading={save.isPending && save.variables !== null}>
                Save
              </Button>
            </Group>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}
