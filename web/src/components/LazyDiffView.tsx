import { Box, Loader } from '@mantine/core';
import { lazy, Suspense } from 'react';
import type { DiffViewProps } from './DiffView';

const DiffView = lazy(() => import('./DiffView'));

/** The diff view (CodeMirror's merge view), loaded on first use. */
export function LazyDiffView(props: DiffViewProps) {
  return (
    <Suspense
      fallback={
        <Box aria-busy="true" data-testid="diff-view-loading" style={{ minHeight: 120, border: '1px solid var(--mantine-color-default-border)', borderRadius: 4, position: 'relative' }}>
          <Loader size="xs" style={{ position: 'absolute', top: 6, right: 6 }} aria-label="Loading the comparison" />
        </Box>
      }
    >
      <DiffView {...props} />
    </Suspense>
  );
}
