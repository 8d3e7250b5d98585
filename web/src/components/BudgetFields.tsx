// The four limits of a budget as fields (a new session's, a session's own, an agent's default
// for its sessions): empty is no limit. Each says what it counts and, where the caller knows
// it, what was used so far; an error keyed as a 422 names the field (`budget.max_cost_usd`)
// is shown under it.
import { NumberInput, SimpleGrid, Text } from '@mantine/core';
import { BUDGET_LIMITS, LIMIT_INFO, type BudgetLimit, type BudgetValues } from '../lib/budget';

export function BudgetFields({
  values,
  onChange,
  errors = {},
  used,
  placeholder = 'no limit',
  prefix = 'budget',
  disabled = false,
}: {
  values: BudgetValues;
  onChange: (values: BudgetValues) => void;
  /** Errors by field key (`budget.max_turns`), the client's or the server's. */
  errors?: Record<string, string | undefined>;
  /** What the session used so far of each limit, said under its field. */
  used?: Partial<Record<BudgetLimit, number>>;
  placeholder?: string;
  prefix?: string;
  disabled?: boolean;
}) {
  return (
    <SimpleGrid cols={{ base: 1, sm: 2 }} data-testid="budget-fields">
      {BUDGET_LIMITS.map((k) => {
        const info = LIMIT_INFO[k];
        const u = used?.[k];
        return (
          <NumberInput
            key={k}
            label={info.label}
            description={
              <>
                {info.help}
                {u != null && (
                  <Text span size="xs" fw={600} c="dimmed" data-testid={`budget-used-${k}`}>
                    {' '}
                    Used so far: {info.format(u)}.
                  </Text>
                )}
              </>
            }
            // The description beneath the input, so the inputs of a row line up whatever its length.
            inputWrapperOrder={['label', 'input', 'description', 'error']}
            placeholder={placeholder}
            min={0}
            max={info.max}
            allowNegative={false}
            allowDecimal={!info.whole}
            // The value stays text (what was typed): Mantine's trimming on blur would turn a typed 0 into nothing.
            trimLeadingZeroesOnBlur={false}
            clampBehavior="none"
            thousandSeparator={false}
            value={values[k]}
            disabled={disabled}
            error={errors[`${prefix}.${k}`]}
            onChange={(x) => onChange({ ...values, [k]: String(x) })}
            data-testid={`budget-${k}`}
          />
        );
      })}
    </SimpleGrid>
  );
}
