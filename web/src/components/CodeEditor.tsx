// CodeMirror 6 for JSON, Markdown and instructions. Loaded lazily (see LazyCodeEditor), so
// the first page load does not carry it.
import { json } from '@codemirror/lang-json';
import { markdown } from '@codemirror/lang-markdown';
import { EditorState } from '@codemirror/state';
import { EditorView, placeholder as cmPlaceholder } from '@codemirror/view';
import { useComputedColorScheme } from '@mantine/core';
import { basicSetup } from 'codemirror';
import { useEffect, useRef } from 'react';
import { darkTheme } from './codemirror';

export type CodeEditorProps = {
  value: string;
  onChange?: (value: string) => void;
  language?: 'json' | 'markdown' | 'text';
  minHeight?: number;
  maxHeight?: number;
  readOnly?: boolean;
  placeholder?: string;
  ariaLabel?: string;
};

export default function CodeEditor({ value, onChange, language = 'text', minHeight = 120, maxHeight = 480, readOnly, placeholder, ariaLabel }: CodeEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const onChangeRef = useRef(onChange);
  onChangeRef.current = onChange;
  const scheme = useComputedColorScheme('light');

  useEffect(() => {
    const extensions = [
      basicSetup,
      EditorView.lineWrapping,
      EditorView.updateListener.of((u) => {
        if (u.docChanged) onChangeRef.current?.(u.state.doc.toString());
      }),
      EditorView.theme({ '&': { fontSize: '13px', border: '1px solid var(--mantine-color-default-border)', borderRadius: '4px' }, '.cm-scroller': { minHeight: `${minHeight}px`, maxHeight: `${maxHeight}px`, overflow: 'auto' } }),
      EditorView.contentAttributes.of({ 'aria-label': ariaLabel ?? 'editor' }),
      EditorState.readOnly.of(!!readOnly),
    ];
    if (language === 'json') extensions.push(json());
    if (language === 'markdown') extensions.push(markdown());
    if (placeholder) extensions.push(cmPlaceholder(placeholder));
    if (scheme === 'dark') extensions.push(darkTheme);
    const v = new EditorView({ parent: host.current!, state: EditorState.create({ doc: value, extensions }) });
    view.current = v;
    return () => v.destroy();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [language, readOnly, scheme]);

  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) {
      v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
    }
  }, [value]);

  return <div ref={host} data-testid="code-editor" />;
}
