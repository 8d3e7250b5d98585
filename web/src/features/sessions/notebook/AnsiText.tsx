import { useMemo } from 'react';
import { ansiSpans, type AnsiColor } from './ansi';

// Theme colours that read in light and dark alike; black and white fall back to the text colour.
const FG: Partial<Record<AnsiColor, string>> = {
  red: 'var(--mantine-color-red-text)',
  green: 'var(--mantine-color-green-text)',
  yellow: 'var(--mantine-color-yellow-text)',
  blue: 'var(--mantine-color-blue-text)',
  magenta: 'var(--mantine-color-grape-text)',
  cyan: 'var(--mantine-color-cyan-text)',
  gray: 'var(--mantine-color-dimmed)',
};
const BG: Partial<Record<AnsiColor, string>> = {
  red: 'var(--mantine-color-red-light)',
  green: 'var(--mantine-color-green-light)',
  yellow: 'var(--mantine-color-yellow-light)',
  blue: 'var(--mantine-color-blue-light)',
  magenta: 'var(--mantine-color-grape-light)',
  cyan: 'var(--mantine-color-cyan-light)',
  gray: 'var(--mantine-color-default-hover)',
};

/** Text with terminal colour codes, shown in the theme's colours (as a traceback is coloured). */
export function AnsiText({ text }: { text: string }) {
  const spans = useMemo(() => ansiSpans(text), [text]);
  return (
    <>
      {spans.map((s, i) =>
        s.fg || s.bg || s.bold ? (
          <span key={i} style={{ color: s.fg ? FG[s.fg] : undefined, background: s.bg ? BG[s.bg] : undefined, fontWeight: s.bold ? 700 : undefined }}>
            {s.text}
          </span>
        ) : (
          s.text
        ),
      )}
    </>
  );
}
