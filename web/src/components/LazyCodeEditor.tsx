import { Box, Loader, Text } from '@mantine/core';
import { lazy, Suspense } from 'react';
import type { CodeEditorProps } from './CodeEditor';

const Editor = lazy(() => import('./CodeEditor'));

/**
 * The CodeMirror editor, loaded on first use. While it loads, the value is shown but nothing
 * can be typed: an input that is replaced mid-keystroke loses what was typed into it (and its
 * focus), so the only editable element carrying `ariaLabel` is the real editor.
 */
export function LazyCodeEditor(props: CodeEditorProps) {
  const minHeight = props.minHeight ?? 120;
  return (
    <Suspense
      fallback={
        <Box aria-busy="true" data-testid="code-editor-loading" style={{ minHeight, border: '1px solid var(--mantine-color-default-border)', borderRadius: 4, padding: 6, position: 'relative' }}>
          <Text size="sm" ff="monospace" style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-word' }} c={props.value ? undefined : 'dimmed'}>
            {props.value || props.placeholder || ''}
          </Text>
          <Loader size="xs" style={{ position: 'absolute', top: 6, right: 6 }} aria-label="Loading the editor" />
        </Box>
      }
    >
      <Editor {...props} />
    </Suspense>
  );
}
