import { Badge, Tooltip } from '@mantine/core';
import { buildLabel, type Environment } from './environments';

/** An environment's build status, with what it means in the tooltip. */
export function BuildBadge({ env }: { env: Environment }) {
  const { color, text } = buildLabel(env.build);
  return (
    <Tooltip label={text} multiline maw={420}>
      <Badge color={color} variant="light" data-testid="build-status">{env.build.status}</Badge>
    </Tooltip>
  );
}
