import { describe, expect, it } from 'vitest';
import { carriageReturns, groupOutputs, hasRunningCell, ipynbText, isPythonToolEvent, notebookRows, readCell, readOutput, type Notebook } from './notebook';

const cell = (id: string, epoch: string | null, extra: Record<string, unknown> = {}) => ({
  cell_type: 'code',
  id,
  source: `print("${id}")`,
  execution_count: 1,
  outputs: [],
  metadata: { sandbox_agents: epoch ? { status: 'ok', epoch } : { status: 'running' } },
  ...extra,
});
const nb = (cells: unknown[]) => ({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells }) as unknown as Notebook;
const kinds = (n: Notebook) => notebookRows(n).map((r) => (r.kind === 'cell' ? r.cell.id : '--restart--'));

describe('notebookRows', () => {
  it('puts a restart divider where the kernel changes, and only there', () => {
    expect(kinds(nb([cell('a', 'k1'), cell('b', 'k1'), cell('c', 'k2'), cell('d', 'k2'), cell('e', 'k3')]))).toEqual(['a', 'b', '--restart--', 'c', 'd', '--restart--', 'e']);
  });
  it('does not count a running cell (no kernel named yet) as a restart, before or after it', () => {
    expect(kinds(nb([cell('a', 'k1'), cell('b', null)]))).toEqual(['a', 'b']);
    expect(kinds(nb([cell('a', 'k1'), cell('b', null), cell('c', 'k1')]))).toEqual(['a', 'b', 'c']);
    expect(kinds(nb([cell('a', 'k1'), cell('b', null), cell('c', 'k2')]))).toEqual(['a', 'b', '--restart--', 'c']);
  });
  it('starts without a divider, skips cells that are not code, and takes an empty or missing notebook', () => {
    expect(kinds(nb([cell('a', 'k9'), { cell_type: 'markdown', source: '# x' }, cell('b', 'k9')]))).toEqual(['a', 'b']);
    expect(notebookRows(nb([]))).toEqual([]);
    expect(notebookRows(undefined)).toEqual([]);
  });
});

describe('readCell', () => {
  it('reads the code, the count, the status and the kernel', () => {
    const c = readCell(cell('x1', 'k1', { source: ['import math\n', 'math.pi'], execution_count: 3, metadata: { sandbox_agents: { status: 'timeout', epoch: 'k1' } } }), 0)!;
    expect(c).toMatchObject({ id: 'x1', source: 'import math\nmath.pi', executionCount: 3, status: 'timeout', epoch: 'k1' });
  });
  it('takes an unknown status as ok and a missing id from the position', () => {
    const c = readCell({ cell_type: 'code', source: '', metadata: { sandbox_agents: { status: 'weird' } }, outputs: [] }, 4)!;
    expect(c).toMatchObject({ id: 'cell-4', status: 'ok', epoch: null, executionCount: null });
  });
});

describe('readOutput', () => {
  it('reads stream text, results, images and errors', () => {
    expect(readOutput({ output_type: 'stream', name: 'stderr', text: ['warn', 'ing\n'] })).toEqual([{ kind: 'stream', name: 'stderr', text: 'warning\n' }]);
    expect(readOutput({ output_type: 'execute_result', execution_count: 2, data: { 'text/plain': '42' }, metadata: {} })).toEqual([{ kind: 'text', text: '42', executionCount: 2 }]);
    expect(readOutput({ output_type: 'display_data', data: { 'image/png': 'iVBO\nRw0K', 'text/plain': '<Figure size 640x480 with 1 Axes>' } })).toEqual([
      { kind: 'image', src: 'data:image/png;base64,iVBORw0K', alt: '<Figure size 640x480 with 1 Axes>' },
    ]);
    const svg = readOutput({ output_type: 'display_data', data: { 'image/svg+xml': '<svg/>' } })[0];
    expect(svg).toEqual({ kind: 'image', src: 'data:image/svg+xml;charset=utf-8,%3Csvg%2F%3E', alt: 'An image the cell displayed' });
    expect(readOutput({ output_type: 'error', ename: 'NameError', evalue: "name 'x' is not defined", traceback: ['\u001b[0;31mNameError\u001b[0m', 'line'] })).toEqual([
      { kind: 'error', ename: 'NameError', evalue: "name 'x' is not defined", traceback: '\u001b[0;31mNameError\u001b[0m\nline' },
    ]);
    expect(readOutput({ output_type: 'error', ename: 'E', evalue: 'v', traceback: [] })).toMatchObject([{ traceback: 'E: v' }]);
  });
  it('shows nothing for what it cannot show', () => {
    expect(readOutput({ output_type: 'display_data', data: { 'text/html': '<b>x</b>' } })).toEqual([]);
    expect(readOutput({ output_type: 'unknown' })).toEqual([]);
    expect(readOutput(null)).toEqual([]);
  });
});

describe('groupOutputs', () => {
  it('joins consecutive text of one stream, keeping the order of everything else', () => {
    const out = groupOutputs([
      { kind: 'stream', name: 'stdout', text: 'a\n' },
      { kind: 'stream', name: 'stdout', text: 'b\n' },
      { kind: 'stream', name: 'stderr', text: 'warn\n' },
      { kind: 'stream', name: 'stdout', text: 'c\n' },
      { kind: 'text', text: '1', executionCount: 1 },
      { kind: 'stream', name: 'stdout', text: '' },
    ]);
    expect(out).toEqual([
      { kind: 'stream', name: 'stdout', text: 'a\nb\n' },
      { kind: 'stream', name: 'stderr', text: 'warn\n' },
      { kind: 'stream', name: 'stdout', text: 'c\n' },
      { kind: 'text', text: '1', executionCount: 1 },
    ]);
  });
  it('applies carriage returns across the joined pieces, as a progress bar redraws', () => {
    expect(groupOutputs([{ kind: 'stream', name: 'stderr', text: ' 10%\r' }, { kind: 'stream', name: 'stderr', text: '100%\n' }])).toEqual([{ kind: 'stream', name: 'stderr', text: '100%\n' }]);
  });
});

describe('carriageReturns', () => {
  it('overwrites from the start of the line', () => {
    expect(carriageReturns('abc\rxy')).toBe('xyc');
    expect(carriageReturns('one\r\ntwo')).toBe('one\ntwo');
    expect(carriageReturns('50%\r100%\ndone')).toBe('100%\ndone');
    expect(carriageReturns('plain\n')).toBe('plain\n');
  });
});

describe('hasRunningCell, ipynbText, isPythonToolEvent', () => {
  it('says whether a cell still runs', () => {
    expect(hasRunningCell(nb([cell('a', 'k1'), cell('b', null)]))).toBe(true);
    expect(hasRunningCell(nb([cell('a', 'k1')]))).toBe(false);
  });
  it('writes the notebook as Jupyter does, parseable back', () => {
    const n = nb([cell('a', 'k1')]);
    const text = ipynbText(n);
    expect(JSON.parse(text)).toEqual(n);
    expect(text).toMatch(/^\{\n "nbformat": 4,/);
  });
  it('knows the python tool’s calls and results', () => {
    expect(isPythonToolEvent({ type: 'agent.tool_use', payload: { tool: 'python', call_id: 'c' } })).toBe(true);
    expect(isPythonToolEvent({ type: 'agent.tool_result', payload: { tool: 'python', call_id: 'c', output: '' } })).toBe(true);
    expect(isPythonToolEvent({ type: 'agent.tool_result', payload: { tool: 'shell' } })).toBe(false);
    expect(isPythonToolEvent({ type: 'agent.tool_output_delta', payload: { tool: 'python' } })).toBe(false);
  });
});
