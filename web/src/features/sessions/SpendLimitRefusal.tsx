// A turn refused with 402 (POST messages, or a new session with a prompt): the project's
// monthly spend limit is reached. The API's sentence (the limit and the month's spend), and who
// can do what about it: the project's admins cannot raise the limit, an operator can.
import { Alert, Anchor, Text } from '@mantine/core';
import { IconCoin } from '@tabler/icons-react';
import { Link } from 'react-router-dom';
import { ApiError } from '../../api/client';

/** Whether an error is the API's refusal at the project's monthly spend limit. */
export function isSpendLimitRefusal(error: unknown): error is ApiError {
  return error instanceof ApiError && error.status === 402;
}

/** A message refused with 402: the project's monthly spend limit is reached. The API's sentence
 * (the limit and the month's spend), and who can do what about it. */
export function SpendLimitRefusal({ detail, projectPath }: { detail: string; projectPath?: string }) {
  return (
    <Alert color="orange" icon={<IconCoin size={18} />} title="The project’s monthly spend limit is reached" role="alert" data-testid="spend-limit-refusal">
      <Text size="sm" fw={600} data-testid="spend-limit-refusal-detail">
        {detail}
      </Text>
      <Text size="xs" c="dimmed" mt={4}>
        No turn starts in this project until next month (UTC), or until an operator raises the limit
        {projectPath ? (
          <>
            {' '}on the{' '}
            <Anchor component={Link} to={projectPath} size="xs">
              project’s page
            </Anchor>
          </>
        ) : null}
        . Nothing was sent.
      </Text>
    </Alert>
  );
}
