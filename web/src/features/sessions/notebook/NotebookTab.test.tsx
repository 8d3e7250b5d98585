import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SessionDetail } from '../../../api/client';
import { renderInApp } from '../../../test/render';
import NotebookTab from './NotebookTab';

const session = { id: 'S1', status: 'running' } as SessionDetail;
const json = (body: unknown) => new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });
const notebook = (cells: unknown[]) => ({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells });
const meta = (status: string, epoch?: string) => ({ sandbox_agents: epoch ? { status, epoch } : { status } });

afterEach(() => vi.restoreAllMocks());

describe('NotebookTab', () => {
  it('says how cells come, when there are none', async () => {
    vi.spyOn(globalThis, 'fetch').mockImplementation(async () => json(notebook([])));
    renderInApp(<NotebookTab session={session} />);
    expect(await screen.findByText('No Python cells yet: an agent with the python capability writes them')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Download .ipynb' })).toBeDisabled();
  });

  it('shows each cell’s code, outputs and status, a restart, and downloads the notebook', async () => {
    const nb = notebook([
      {
        cell_type: 'code', id: 'c1', execution_count: 1, metadata: meta('ok', 'k1'), source: 'x = 6 * 7\nprint(x)\nx',
        outputs: [
          { output_type: 'stream', name: 'stdout', text: '42\n' },
          { output_type: 'stream', name: 'stderr', text: 'careful\n' },
          { output_type: 'execute_result', execution_count: 1, data: { 'text/plain': '42' }, metadata: {} },
          { output_type: 'display_data', data: { 'image/png': 'iVBORw0KGgo=', 'text/plain': '<Figure size 640x480 with 1 Axes>' }, metadata: {} },
        ],
      },
      { cell_type: 'code', id: 'c2', execution_count: 2, metadata: meta('died', 'k1'), source: 'import os; os._exit(1)', outputs: [] },
      {
        cell_type: 'code', id: 'c3', execution_count: 1, metadata: meta('error', 'k2'), source: 'x',
        outputs: [{ output_type: 'error', ename: 'NameError', evalue: "name 'x' is not defined", traceback: ['\u001b[0;31mNameError\u001b[0m: name \'x\' is not defined'] }],
      },
      { cell_type: 'code', id: 'c4', execution_count: null, metadata: meta('running'), source: 'import time; time.sleep(60)', outputs: [] },
    ]);
    vi.spyOn(globalThis, 'fetch').mockImplementation(async () => json(nb));
    // jsdom has no object URLs: keep the file's blob, and the name the link gives it.
    const blobs: Blob[] = [];
    const names: string[] = [];
    Object.assign(URL, { createObjectURL: (b: Blob) => (blobs.push(b), 'blob:x'), revokeObjectURL: () => {} });
    vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      names.push(this.download);
    });
    renderInApp(<NotebookTab session={session} />);
    const cells = await screen.findAllByTestId('notebook-cell');
    expect(cells.map((c) => c.dataset.status)).toEqual(['ok', 'died', 'error', 'running']);
    expect(within(cells[0]).getByTestId('cell-source')).toHaveTextContent('x = 6 * 7');
    expect(within(cells[0]).getByTestId('cell-stdout')).toHaveTextContent('42');
    expect(within(cells[0]).getByTestId('cell-stderr')).toHaveTextContent('careful');
    expect(within(cells[0]).getByTestId('cell-result')).toHaveTextContent('42');
    expect(within(cells[0]).getByText('Out[1]:')).toBeInTheDocument();
    expect(within(cells[0]).getByRole('img', { name: '<Figure size 640x480 with 1 Axes>' })).toHaveAttribute('src', 'data:image/png;base64,iVBORw0KGgo=');
    expect(within(cells[1]).getByTestId('cell-status')).toHaveTextContent('kernel died');
    expect(within(cells[2]).getByTestId('cell-error')).toHaveTextContent("NameError: name 'x' is not defined");
    expect(within(cells[2]).getByTestId('cell-error').textContent).not.toMatch(/\u001b/);
    expect(within(cells[3]).getByTestId('cell-status')).toHaveTextContent('running');
    // The kernel changed between the second and third cell.
    const restarts = screen.getAllByTestId('kernel-restart');
    expect(restarts).toHaveLength(1);
    expect(restarts[0]).toHaveTextContent('kernel restarted — earlier state was lost');
    expect(cells[1].compareDocumentPosition(restarts[0]) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(cells[2].compareDocumentPosition(restarts[0]) & Node.DOCUMENT_POSITION_PRECEDING).toBeTruthy();
    expect(screen.getByTestId('notebook-summary')).toHaveTextContent('4 cells the python tool ran, oldest first · the kernel restarted 1 time');
    await userEvent.setup({ delay: null }).click(screen.getByRole('button', { name: 'Download .ipynb' }));
    expect(names).toEqual(['S1.ipynb']);
    expect(blobs[0].type).toBe('application/x-ipynb+json');
    const text = await new Promise<string>((resolve) => {
      const r = new FileReader();
      r.onload = () => resolve(r.result as string);
      r.readAsText(blobs[0]);
    });
    expect(JSON.parse(text)).toEqual(nb);
  }, 30_000);
});
