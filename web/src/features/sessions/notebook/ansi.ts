// Terminal colour codes as IPython writes them into tracebacks (`\x1b[0;31m`, 256-colour
// `\x1b[38;5;241m`, a yellow background under the failing expression): split into coloured
// spans for the notebook, or stripped for plain text. Other escape sequences are dropped.

export type AnsiColor = 'black' | 'red' | 'green' | 'yellow' | 'blue' | 'magenta' | 'cyan' | 'white' | 'gray';
export type AnsiSpan = { text: string; fg: AnsiColor | null; bg: AnsiColor | null; bold: boolean };

const BASIC: AnsiColor[] = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white'];
// CSI (colours and cursor moves), OSC (titles, links) and any other two-character escape.
const ESCAPE = /\x1b(?:\[([0-9;?]*)[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)/g;

export function stripAnsi(text: string): string {
  return text.replace(ESCAPE, '');
}

/** A 256-colour palette entry as the nearest of the basic eight, grey for the grey ramp. */
export function color256(n: number): AnsiColor | null {
  if (!Number.isInteger(n) || n < 0 || n > 255) return null;
  if (n < 8) return BASIC[n];
  if (n < 16) return n === 8 ? 'gray' : BASIC[n - 8];
  if (n >= 232) return 'gray';
  const c = n - 16;
  const [r, g, b] = [Math.floor(c / 36), Math.floor(c / 6) % 6, c % 6];
  if (r === g && g === b) return r === 0 ? 'black' : r === 5 ? 'white' : 'gray';
  return BASIC[(r >= 3 ? 1 : 0) + (g >= 3 ? 2 : 0) + (b >= 3 ? 4 : 0)];
}

type State = { fg: AnsiColor | null; bg: AnsiColor | null; bold: boolean };

function applySgr(params: string, s: State): State {
  const codes = params === '' ? [0] : params.split(';').map((p) => (p === '' ? 0 : Number(p)));
  const next = { ...s };
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0) Object.assign(next, { fg: null, bg: null, bold: false });
    else if (c === 1) next.bold = true;
    else if (c === 22) next.bold = false;
    else if (c >= 30 && c <= 37) next.fg = BASIC[c - 30];
    else if (c >= 90 && c <= 97) next.fg = c === 90 ? 'gray' : BASIC[c - 90];
    else if (c === 39) next.fg = null;
    else if (c >= 40 && c <= 47) next.bg = BASIC[c - 40];
    else if (c >= 100 && c <= 107) next.bg = BASIC[c - 100];
    else if (c === 49) next.bg = null;
    else if (c === 38 || c === 48) {
      // 38;5;n (palette) or 38;2;r;g;b (true colour, shown as the default colour).
      let value: AnsiColor | null = null;
      if (codes[i + 1] === 5) {
        value = color256(codes[i + 2]);
        i += 2;
      } else if (codes[i + 1] === 2) i += 4;
      if (c === 38) next.fg = value;
      else next.bg = value;
    }
  }
  return next;
}

/** The text cut where its colour changes; the escapes themselves are gone. */
export function ansiSpans(text: string): AnsiSpan[] {
  const out: AnsiSpan[] = [];
  let state: State = { fg: null, bg: null, bold: false };
  let last = 0;
  const push = (t: string) => {
    if (!t) return;
    const prev = out[out.length - 1];
    if (prev && prev.fg === state.fg && prev.bg === state.bg && prev.bold === state.bold) prev.text += t;
    else out.push({ text: t, ...state });
  };
  for (const m of text.matchAll(ESCAPE)) {
    push(text.slice(last, m.index));
    last = m.index! + m[0].length;
    if (m[2] === 'm') state = applySgr(m[1] ?? '', state);
  }
  push(text.slice(last));
  return out;
}
