// `GET /api/usage?from=&to=&group_by=agent|model|day`: the aggregate the usage page charts.
// Kept in this one module: until the endpoint is in openapi.json the shape is coded by hand
// here, and adjusting to the server means changing only this file.
import { apiFetch } from '../../api/client';

export type GroupBy = 'agent' | 'model' | 'day';

export type UsageGroup = {
  key: string;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  requests: number;
  active_seconds: number;
};

export type UsageReport = { group_by: GroupBy; from: string; to: string; groups: UsageGroup[] };

export async function fetchUsage(params: { from: string; to: string; groupBy: GroupBy }): Promise<UsageReport> {
  const q = new URLSearchParams({ from: params.from, to: params.to, group_by: params.groupBy });
  const r = await apiFetch(`/api/usage?${q}`);
  const body = (await r.json()) as Partial<UsageReport>;
  return {
    group_by: (body.group_by as GroupBy) ?? params.groupBy,
    from: body.from ?? params.from,
    to: body.to ?? params.to,
    groups: (body.groups ?? []).map((g) => ({
      key: String(g.key ?? ''),
      input_tokens: Number(g.input_tokens ?? 0),
      output_tokens: Number(g.output_tokens ?? 0),
      total_tokens: Number(g.total_tokens ?? Number(g.input_tokens ?? 0) + Number(g.output_tokens ?? 0)),
      requests: Number(g.requests ?? 0),
      active_seconds: Number(g.active_seconds ?? 0),
    })),
  };
}
