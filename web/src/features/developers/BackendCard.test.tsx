import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../../test/render';
import { BackendCard } from './BackendCard';

afterEach(() => vi.restoreAllMocks());

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

/** Serves `body` at GET /api/backends, and fails on any other call. */
function serve(body: unknown, status = 200) {
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL) => {
    const req = input as Request;
    expect(req.method).toBe('GET');
    expect(new URL(req.url).pathname).toBe('/api/backends');
    return json(body, status);
  });
}

/** The mark (yes, no, partly, value) and the text of each capability row, in order. */
function rows(backend: HTMLElement) {
  return within(backend)
    .getAllByRole('row')
    .map((r) => [r.dataset.testid, r.dataset.mark, r.textContent]);
}

describe('the sandbox backend card', () => {
  it('names the default backend and says each capability in words, with its mark', async () => {
    serve([{ name: 'docker', default: true, capabilities: { snapshots: 'image', image_builds: true, daemon: true, warm_pool: false, disk_measurement: true, isolation: true } }]);
    renderInApp(<BackendCard />);
    const backend = await screen.findByTestId('backend');
    expect(within(backend).getByTestId('backend-name')).toHaveTextContent('docker');
    expect(within(backend).getByText('default')).toBeInTheDocument();
    expect(rows(backend).map(([id, mark]) => [id, mark])).toEqual([
      ['capability-snapshots', 'yes'],
      ['capability-image_builds', 'yes'],
      ['capability-daemon', 'yes'],
      ['capability-warm_pool', 'no'],
      ['capability-disk_measurement', 'yes'],
      ['capability-isolation', 'yes'],
    ]);
    expect(screen.getByTestId('capability-snapshots')).toHaveTextContent('Snapshots keep installed packages');
    expect(screen.getByTestId('capability-image_builds')).toHaveTextContent('Environment image builds');
    expect(screen.getByTestId('capability-daemon')).toHaveTextContent('Terminals and background processes');
    expect(screen.getByTestId('capability-disk_measurement')).toHaveTextContent('Disk limit enforced');
    expect(screen.getByTestId('capability-isolation')).toHaveTextContent('Isolated by the kernel');
    const warm = screen.getByTestId('capability-warm_pool');
    expect(warm).toHaveTextContent('Warm pool');
    expect(within(warm).getByLabelText('no')).toBeInTheDocument();
  });

  it('says when snapshots keep the workspace only, and shows a capability it does not know by its name', async () => {
    serve([
      { name: 'docker', default: true, capabilities: { snapshots: 'image', image_builds: true, daemon: true, warm_pool: true, disk_measurement: true, isolation: true } },
      { name: 'memory', default: false, capabilities: { snapshots: 'archive_only', image_builds: false, daemon: false, warm_pool: true, disk_measurement: false, isolation: false, gpus: true, region: 'eu-west' } },
    ]);
    renderInApp(<BackendCard />);
    const [docker, memory] = await screen.findAllByTestId('backend');
    expect(within(docker).getByText('default')).toBeInTheDocument();
    expect(within(memory).getByTestId('backend-name')).toHaveTextContent('memory');
    expect(within(memory).queryByText('default')).toBeNull();
    expect(rows(memory)).toEqual([
      ['capability-snapshots', 'partly', expect.stringContaining('Snapshots keep the workspace only')],
      ['capability-image_builds', 'no', expect.stringContaining('Environment image builds')],
      ['capability-daemon', 'no', expect.stringContaining('Terminals and background processes')],
      ['capability-warm_pool', 'yes', expect.stringContaining('Warm pool')],
      ['capability-disk_measurement', 'no', expect.stringContaining('Disk limit enforced')],
      ['capability-isolation', 'no', expect.stringContaining('Isolated by the kernel')],
      ['capability-gpus', 'yes', 'gpus'],
      ['capability-region', 'value', 'eu-westregion'],
    ]);
    expect(within(within(memory).getByTestId('capability-gpus')).getByLabelText('yes')).toBeInTheDocument();
  });

  it('shows the API’s reason when the backends cannot be read', async () => {
    serve({ detail: 'Sign in to see this deployment.' }, 401);
    // The app does not retry a 4xx (main.tsx); a test client that retries would wait seconds.
    const noRetry = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    renderInApp(
      <QueryClientProvider client={noRetry}>
        <BackendCard />
      </QueryClientProvider>,
    );
    expect(await screen.findByRole('alert')).toHaveTextContent('Sign in to see this deployment.');
    expect(screen.queryByTestId('backend')).toBeNull();
  });
});
