import { Code, SimpleGrid, Stack, Text, TextInput, Textarea } from '@mantine/core';
import { NetworkPolicyEditor } from '../../components/NetworkPolicyEditor';
import { RuntimeClassSelect } from '../../components/RuntimeClassSelect';
import { LAYERS_HELP, type NetworkErrors } from '../../lib/network';
import { EXAMPLES, MANAGERS, type ConfigValues, type EnvironmentErrors } from './environments';

/** The image, the packages of each manager (one per line, in its own syntax) and the network
 * policy of the environment's sessions (`networkErrors`: the server's, keyed below `config.network`). */
export function ConfigFields({ values, errors, networkErrors, runtimeClassError, onChange }: { values: ConfigValues; errors: EnvironmentErrors; networkErrors?: NetworkErrors; runtimeClassError?: string; onChange: (v: ConfigValues) => void }) {
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
      <div style={{ maxWidth: 480 }}>
        <RuntimeClassSelect
          value={values.runtime_class}
          error={runtimeClassError}
          onChange={(runtime_class) => onChange({ ...values, runtime_class })}
          description="The runtime its sessions' sandboxes run under (gVisor, Kata), unless their agent names one. Such a sandbox boots cold."
        />
      </div>
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
      <NetworkPolicyEditor
        label="Egress"
        description={`What sessions in this environment may connect to. ${LAYERS_HELP}`}
        value={values.network}
        errors={networkErrors}
        onChange={(network) => onChange({ ...values, network })}
      />
    </Stack>
  );
}
