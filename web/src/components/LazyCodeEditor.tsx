import { Textarea } from '@mantine/core';
import { lazy, Suspense } from 'react';
import type { CodeEditorProps } from './CodeEditor';

const Editor = lazy(() => import('./CodeEditor'));

/** The CodeMirror editor, with a plain textarea while it loads. */
export function LazyCodeEditor(props: CodeEditorProps) {
  return (
    <Suspense
      fallback={<Textarea value={props.value} onChange={(e) => props.onChange?.(e.currentTarget.value)} autosize minRows={4} aria-label={props.ariaLabel} />}
    >
      <Editor {...props} />
    </Suspense>
  );
}
