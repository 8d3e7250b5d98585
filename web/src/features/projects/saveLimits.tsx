// What the project page's limit cards share: the save (PATCH /api/projects/{ref} with
// `limits`, which replaces the whole set, so each card sends the project's current limits with
// its edit applied) and the word on a 403 (only operators may change a project's limits).
import { Alert, Text } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { IconLock } from '@tabler/icons-react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { ApiError, api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';
import type { ProjectLimits } from '../../lib/spendLimit';

/** Saves the project's limits; `saved` words the notification from the limits the server kept. */
export function useSaveProjectLimits(ref: string, saved: (limits: ProjectLimits) => string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (limits: ProjectLimits) => unwrap(api.PATCH('/api/projects/{ref}', { params: { path: { ref } }, body: { limits } })),
    onSuccess: (p) => {
      // At once, so the other card's next save starts from these limits, not the ones before.
      qc.setQueryData(keys.projects.detail(ref), p);
      qc.invalidateQueries({ queryKey: keys.projects.all() });
      qc.invalidateQueries({ queryKey: keys.projects.detail(ref) });
      qc.invalidateQueries({ queryKey: keys.projects.spend(ref) });
      notifications.show({ message: saved(p.limits ?? {}) });
    },
  });
}

export const isForbidden = (error: unknown): error is ApiError => error instanceof ApiError && error.status === 403;

export function LimitsForbiddenAlert({ error }: { error: ApiError }) {
  return (
    <Alert color="red" icon={<IconLock size={18} />} title="Only operators may change the project’s limits" role="alert" data-testid="limits-forbidden">
      <Text size="sm">{error.detail}</Text>
    </Alert>
  );
}
