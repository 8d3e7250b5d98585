// Two texts compared with CodeMirror's merge view: side by side (MergeView) or unified, read
// only, long unchanged stretches folded. Loaded lazily (see LazyDiffView), so the first page
// load carries neither CodeMirror nor the diff.
import { json } from '@codemirror/lang-json';
import { markdown } from '@codemirror/lang-markdown';
import { MergeView, unifiedMergeView } from '@codemirror/merge';
import { EditorState, type Extension } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { useComputedColorScheme } from '@mantine/core';
import { basicSetup } from 'codemirror';
import { useEffect, useRef } from 'react';
import { darkTheme } from './codemirror';

export type DiffViewProps = {
  /** The older text (left, or the deleted lines). */
  a: string;
  /** The newer text (right, or the document with the inserted lines). */
  b: string;
  /** Said to assistive technology for each side: "v1", "v3". */
  aLabel: string;
  bLabel: string;
  language?: 'json' | 'markdown' | 'text';
  mode?: 'split' | 'unified';
  maxHeight?: number;
};

const COLLAPSE = { margin: 3, minSize: 6 };

export default function DiffView({ a, b, aLabel, bLabel, language = 'text', mode = 'split', maxHeight = 560 }: DiffViewProps) {
  const host = useRef<HTMLDivElement>(null);
  const scheme = useComputedColorScheme('light');

  useEffect(() => {
    const parent = host.current!;
    const common = (label: string): Extension[] => {
      const ext: Extension[] = [
        basicSetup,
        EditorView.lineWrapping,
        EditorState.readOnly.of(true),
        EditorView.theme({ '&': { fontSize: '13px' } }),
        EditorView.contentAttributes.of({ 'aria-label': label }),
      ];
      if (language === 'json') ext.push(json());
      if (language === 'markdown') ext.push(markdown());
      if (scheme === 'dark') ext.push(darkTheme);
      return ext;
    };
    if (mode === 'split') {
      const view = new MergeView({ a: { doc: a, extensions: common(aLabel) }, b: { doc: b, extensions: common(bLabel) }, parent, gutter: true, highlightChanges: true, collapseUnchanged: COLLAPSE });
      view.dom.style.maxHeight = `${maxHeight}px`;
      return () => view.destroy();
    }
    const view = new EditorView({
      parent,
      state: EditorState.create({
        doc: b,
        extensions: [
          ...common(`${aLabel} to ${bLabel}`),
          unifiedMergeView({ original: a, mergeControls: false, gutter: true, highlightChanges: true, collapseUnchanged: COLLAPSE }),
          EditorView.theme({ '.cm-scroller': { maxHeight: `${maxHeight}px`, overflow: 'auto' } }),
        ],
      }),
    });
    return () => view.destroy();
  }, [a, b, aLabel, bLabel, language, mode, maxHeight, scheme]);

  return <div ref={host} data-testid="diff-view" data-mode={mode} style={{ border: '1px solid var(--mantine-color-default-border)', borderRadius: 4, overflow: 'hidden' }} />;
}
