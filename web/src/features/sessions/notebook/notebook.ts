// The session's notebook (`GET /api/sessions/{id}/notebook`, nbformat 4.5) as the Notebook tab
// shows it: each code cell with its outputs in order (consecutive stream text of one stream
// joined, as Jupyter shows it), how it ended, and a divider wherever the kernel restarted
// (the cell's `metadata.sandbox_agents.epoch` differs from the one before).
import type { Schemas } from '../../../api/client';

export type Notebook = Schemas['Notebook'];

export const CELL_STATUSES = ['running', 'ok', 'error', 'timeout', 'died', 'interrupted'] as const;
export type CellStatus = (typeof CELL_STATUSES)[number];

export type CellOutput =
  | { kind: 'stream'; name: 'stdout' | 'stderr'; text: string }
  | { kind: 'text'; text: string; executionCount: number | null }
  | { kind: 'image'; src: string; alt: string }
  | { kind: 'error'; ename: string; evalue: string; traceback: string };

export type Cell = {
  id: string;
  source: string;
  executionCount: number | null;
  status: CellStatus;
  epoch: string | null;
  outputs: CellOutput[];
};

export type NotebookRow = { kind: 'cell'; key: string; cell: Cell } | { kind: 'restart'; key: string };

/** What each status is called on its badge, and its colour. */
export const STATUS_LABEL: Record<CellStatus, { label: string; color: string }> = {
  running: { label: 'running', color: 'blue' },
  ok: { label: 'ok', color: 'teal' },
  error: { label: 'error', color: 'red' },
  timeout: { label: 'timed out', color: 'orange' },
  died: { label: 'kernel died', color: 'red' },
  interrupted: { label: 'interrupted', color: 'orange' },
};

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml'];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v);

/** nbformat's multiline strings: a string, or a list of lines to join. */
export function multiline(v: unknown): string {
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return v.filter((x) => typeof x === 'string').join('');
  return '';
}

/**
 * Stream text as a terminal shows it: a carriage return goes back to the start of its line,
 * so a progress bar that redraws itself shows its last state.
 */
export function carriageReturns(text: string): string {
  if (!text.includes('\r')) return text;
  return text
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => {
      const parts = line.split('\r');
      let shown = '';
      for (const p of parts) shown = p + shown.slice(p.length);
      return shown;
    })
    .join('\n');
}

function dataOutput(o: Obj, executionCount: number | null): CellOutput[] {
  const data = isObj(o.data) ? o.data : {};
  const plain = multiline(data['text/plain']);
  const mime = IMAGE_TYPES.find((m) => typeof data[m] === 'string' || Array.isArray(data[m]));
  if (mime) {
    const raw = multiline(data[mime]);
    // SVG is text; the others are base64, which may be wrapped. An <img> runs no script.
    const src = mime === 'image/svg+xml' ? `data:${mime};charset=utf-8,${encodeURIComponent(raw)}` : `data:${mime};base64,${raw.replace(/\s+/g, '')}`;
    return [{ kind: 'image', src, alt: plain || 'An image the cell displayed' }];
  }
  return plain ? [{ kind: 'text', text: plain, executionCount }] : [];
}

/** One nbformat output as the tab shows it (nothing for an output it cannot show). */
export function readOutput(o: unknown): CellOutput[] {
  if (!isObj(o)) return [];
  switch (o.output_type) {
    case 'stream':
      return [{ kind: 'stream', name: o.name === 'stderr' ? 'stderr' : 'stdout', text: multiline(o.text) }];
    case 'execute_result':
      return dataOutput(o, typeof o.execution_count === 'number' ? o.execution_count : null);
    case 'display_data':
      return dataOutput(o, null);
    case 'error': {
      const tb = Array.isArray(o.traceback) ? o.traceback.filter((l): l is string => typeof l === 'string') : [];
      const ename = typeof o.ename === 'string' ? o.ename : '';
      const evalue = typeof o.evalue === 'string' ? o.evalue : '';
      return [{ kind: 'error', ename, evalue, traceback: tb.length ? tb.join('\n') : `${ename}: ${evalue}` }];
    }
    default:
      return [];
  }
}

/** Consecutive text of one stream as one block, with its carriage returns applied. */
export function groupOutputs(outputs: CellOutput[]): CellOutput[] {
  const out: CellOutput[] = [];
  for (const o of outputs) {
    const prev = out[out.length - 1];
    if (o.kind === 'stream' && prev?.kind === 'stream' && prev.name === o.name) out[out.length - 1] = { ...prev, text: prev.text + o.text };
    else out.push(o);
  }
  return out.map((o) => (o.kind === 'stream' ? { ...o, text: carriageReturns(o.text) } : o)).filter((o) => o.kind !== 'stream' || o.text !== '');
}

const metaOf = (c: Obj): Obj => (isObj(c.metadata) && isObj(c.metadata.sandbox_agents) ? c.metadata.sandbox_agents : {});
const statusOf = (meta: Obj): CellStatus => ((CELL_STATUSES as readonly unknown[]).includes(meta.status) ? (meta.status as CellStatus) : 'ok');

export function readCell(c: unknown, index: number): Cell | null {
  if (!isObj(c) || c.cell_type !== 'code') return null;
  const meta = metaOf(c);
  const status = statusOf(meta);
  return {
    id: typeof c.id === 'string' && c.id ? c.id : `cell-${index}`,
    source: multiline(c.source),
    executionCount: typeof c.execution_count === 'number' ? c.execution_count : null,
    status,
    epoch: typeof meta.epoch === 'string' ? meta.epoch : null,
    outputs: groupOutputs((Array.isArray(c.outputs) ? c.outputs : []).flatMap(readOutput)),
  };
}

/**
 * The rows of the tab: the code cells in order, with a restart divider before a cell whose
 * kernel is not the one of the last cell that named its kernel (a running cell names none yet).
 */
export function notebookRows(nb: Pick<Notebook, 'cells'> | null | undefined): NotebookRow[] {
  const rows: NotebookRow[] = [];
  let epoch: string | null = null;
  (nb?.cells ?? []).forEach((raw, i) => {
    const cell = readCell(raw, i);
    if (!cell) return;
    if (cell.epoch) {
      if (epoch && cell.epoch !== epoch) rows.push({ kind: 'restart', key: `restart-${cell.id}` });
      epoch = cell.epoch;
    }
    rows.push({ kind: 'cell', key: cell.id, cell });
  });
  return rows;
}

/** Whether a cell is still running (the tab polls while one is). */
export function hasRunningCell(nb: Pick<Notebook, 'cells'> | null | undefined): boolean {
  return (nb?.cells ?? []).some((c) => isObj(c) && statusOf(metaOf(c)) === 'running');
}

/** The notebook as a `.ipynb` file's text (Jupyter's own indentation). */
export function ipynbText(nb: Notebook): string {
  return `${JSON.stringify(nb, null, 1)}\n`;
}

/** Whether an event is the python tool's (a cell started or ended: the notebook changed). */
export function isPythonToolEvent(e: { type: string; payload?: unknown }): boolean {
  return (e.type === 'agent.tool_use' || e.type === 'agent.tool_result') && isObj(e.payload) && e.payload.tool === 'python';
}
