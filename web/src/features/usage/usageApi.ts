// `GET /api/usage`: the aggregate the usage page charts, through the typed client. The page
// picks whole days, and the API takes them as they are: `from` is the start of its UTC day
// and `to` includes its whole day. Without `from` and `to` the API takes the last 30 days.
import { api, unwrap, type Schemas } from '../../api/client';

export type GroupBy = Schemas['UsageGroupBy'];
export type UsageGroup = Schemas['UsageGroup'];
export type UsageReport = Schemas['UsageReport'];

/**
 * `from` and `to` are `YYYY-MM-DD` (UTC days, both included); `agent` (an id or slug) keeps
 * that agent's sessions only.
 */
export function fetchUsage(params: { from?: string; to?: string; groupBy?: GroupBy; agent?: string | null }): Promise<UsageReport> {
  return unwrap(
    api.GET('/api/usage', {
      params: { query: { from: params.from, to: params.to, group_by: params.groupBy, agent: params.agent ?? undefined } },
    }),
  );
}
