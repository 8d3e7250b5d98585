// Renders a component inside the providers the app gives every page (Mantine, TanStack Query
// with a fresh client, a memory router), for component tests.
import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render } from '@testing-library/react';
import type { ReactNode } from 'react';
import { MemoryRouter } from 'react-router-dom';

/** `route` is the URL the memory router starts at (`/usage?agent=a`), `/` by default. */
export function renderInApp(ui: ReactNode, { route = '/' }: { route?: string } = {}) {
  return render(
    <MantineProvider>
      <QueryClientProvider client={new QueryClient()}>
        <MemoryRouter initialEntries={[route]}>{ui}</MemoryRouter>
      </QueryClientProvider>
    </MantineProvider>,
  );
}
