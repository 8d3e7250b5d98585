import { Code, SimpleGrid, Stack, Text, TextInput, Textarea } from '@mantine/core';
import { EXAMPLES, MANAGERS, type ConfigValues, type EnvironmentErrors } from './environments';

/** The image and the packages of each manager (one per line, in its own syntax). */
export function ConfigFields({ values, errors, onChange }: { values: ConfigValues; errors: EnvironmentErrors; onChange: (v: ConfigValues) => void }) {
  return (
    <Stack gap="sm">
      <TextInput
        label="Base image"
        placeholder="the server's default image"
        value={values.image}
        error={errors.image}
        onChange={(e) => onChange({ ...values, image: e.currentTarget.value })}
        description="Packages are installed on top of it. It needs the sandbox user (uid 1000)."
        maw={480}
      />
      <Text size="sm" c="dimmed">
        Packages install in this order, each in its manager's own syntax, one per line. cargo, gem, go and npm need their tool in the base image (or install it with apt).
      </Text>
      <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }}>
        {MANAGERS.map((m) => (
          <Textarea
            key={m}
            label={m}
            aria-label={`${m} packages`}
            placeholder={EXAMPLES[m]}
            value={values.packages[m]}
            error={errors[m]}
            autosize
            minRows={2}
            maxRows={8}
            styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
            onChange={(e) => onChange({ ...values, packages: { ...values.packages, [m]: e.currentTarget.value } })}
            description={<>e.g. <Code>{EXAMPLES[m]}</Code></>}
          />
        ))}
      </SimpleGrid>
    </Stack>
  );
}
