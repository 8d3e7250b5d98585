import { describe, expect, it } from 'vitest';
import { ansiSpans, color256, stripAnsi } from './ansi';

// As IPython 8 colours a traceback (ultratb), with the 256-colour and background codes it
// puts on the failing expression.
const TRACEBACK = [
  '\u001b[0;31m---------------------------------------------------------------------------\u001b[0m',
  '\u001b[0;31mZeroDivisionError\u001b[0m                         Traceback (most recent call last)',
  'Cell \u001b[0;32mIn[1], line 2\u001b[0m\n\u001b[0;32m----> 2\u001b[0m \u001b[38;5;241;43m1\u001b[39;49m\u001b[38;5;241;43m/\u001b[39;49m\u001b[38;5;241;43m0\u001b[39;49m\n',
  '\u001b[0;31mZeroDivisionError\u001b[0m: division by zero',
].join('\n');

describe('stripAnsi', () => {
  it('drops colour codes and other escapes, keeping the text', () => {
    expect(stripAnsi(TRACEBACK)).toContain('ZeroDivisionError: division by zero');
    expect(stripAnsi(TRACEBACK)).toContain('----> 2 1/0');
    expect(stripAnsi(TRACEBACK)).not.toMatch(/\u001b/);
    expect(stripAnsi('a\u001b[2Kb\u001b]8;;http://x\u0007link\u001b]8;;\u0007c')).toBe('ablinkc');
    expect(stripAnsi('plain')).toBe('plain');
    expect(stripAnsi('cut\u001b[')).toBe('cut');
  });
});

describe('ansiSpans', () => {
  it('cuts the text where its colour changes', () => {
    const spans = ansiSpans('\u001b[0;31mZeroDivisionError\u001b[0m: division by zero');
    expect(spans).toEqual([
      { text: 'ZeroDivisionError', fg: 'red', bg: null, bold: false },
      { text: ': division by zero', fg: null, bg: null, bold: false },
    ]);
  });
  it('reads bold, bright, 256-colour and background codes, and resets', () => {
    expect(ansiSpans('\u001b[1;92mok\u001b[22mthin\u001b[39mdefault')).toEqual([
      { text: 'ok', fg: 'green', bg: null, bold: true },
      { text: 'thin', fg: 'green', bg: null, bold: false },
      { text: 'default', fg: null, bg: null, bold: false },
    ]);
    const expr = ansiSpans('\u001b[38;5;241;43m1\u001b[39;49m\u001b[38;5;241;43m/\u001b[39;49m');
    expect(expr).toEqual([{ text: '1/', fg: 'gray', bg: 'yellow', bold: false }]);
    expect(ansiSpans('\u001b[38;2;255;0;0mtrue\u001b[m')).toEqual([{ text: 'true', fg: null, bg: null, bold: false }]);
    expect(ansiSpans('')).toEqual([]);
  });
  it('keeps every character of the text', () => {
    expect(ansiSpans(TRACEBACK).map((s) => s.text).join('')).toBe(stripAnsi(TRACEBACK));
  });
});

describe('color256', () => {
  it('maps the palette onto the basic colours', () => {
    expect(color256(1)).toBe('red');
    expect(color256(9)).toBe('red');
    expect(color256(241)).toBe('gray');
    expect(color256(196)).toBe('red'); // the cube's pure red
    expect(color256(46)).toBe('green');
    expect(color256(16)).toBe('black');
    expect(color256(300)).toBeNull();
  });
});
