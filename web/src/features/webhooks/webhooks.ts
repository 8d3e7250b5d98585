// What the webhook forms share: the checks of a webhook's name and URL before sending, and
// the catalogue of event types a subscription may pick from.
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { keys } from '../../api/queryKeys';

export const URL_RE = /^[Hh][Tt][Tt][Pp][Ss]?:\/\/\S*$/;

export function validateWebhook(v: { name: string; url: string }): Record<string, string> {
  const e: Record<string, string> = {};
  if (!v.name.trim()) e.name = 'Required.';
  else if (v.name.length > 200) e.name = 'At most 200 characters.';
  if (!URL_RE.test(v.url) || v.url.length < 8) e.url = 'An http:// or https:// URL without spaces.';
  return e;
}

export function useEventTypes() {
  return useQuery({ queryKey: keys.webhooks.eventTypes(), queryFn: () => unwrap(api.GET('/api/webhooks/event-types')), staleTime: Infinity });
}
