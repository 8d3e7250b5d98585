import { Select } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client';
import { keys } from '../api/queryKeys';

/** The runtime classes to choose from: those the server offers (`runtime_classes` of its
 * default backend in `GET /api/backends`), and `current` when it is set but no longer offered
 * (so a stored value is shown as it is, and saving it again is the server's to refuse). */
export function runtimeClassOptions(offered: string[], current: string): { value: string; label: string }[] {
  const names = current && !offered.includes(current) ? [...offered, current] : offered;
  return [{ value: '', label: 'server default' }, ...names.map((n) => ({ value: n, label: offered.includes(n) ? n : `${n} (no longer offered)` }))];
}

/** The `runtime_class` of an agent or an environment: a select of what the server offers,
 * disabled, saying how an operator offers some, when it offers none. `''` is the default. */
export function RuntimeClassSelect({ value, error, onChange, description }: { value: string; error?: string; onChange: (v: string) => void; description: string }) {
  const backends = useQuery({ queryKey: keys.backends(), queryFn: () => unwrap(api.GET('/api/backends')), staleTime: Infinity });
  const offered = backends.data?.find((b) => b.default)?.runtime_classes ?? [];
  const none = backends.isSuccess && offered.length === 0 && !value;
  return (
    <Select
      label="Runtime class"
      data-testid="runtime-class"
      description={none ? 'This server offers no runtime class to choose: an operator lists them with --kubernetes-runtime-classes.' : description}
      data={runtimeClassOptions(offered, value)}
      value={value}
      error={error}
      disabled={none}
      allowDeselect={false}
      onChange={(v) => onChange(v ?? '')}
    />
  );
}
