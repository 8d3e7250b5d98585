// One xterm.js terminal in a host element, fitted to it and following its size.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';

export function createTerminal(host: HTMLElement, scheme: 'light' | 'dark', options: { convertEol?: boolean } = {}) {
  const term = new Terminal({
    convertEol: options.convertEol ?? false,
    fontSize: 13,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    theme: scheme === 'dark' ? { background: '#1a1b1e' } : { background: '#ffffff', foreground: '#1a1b1e', cursor: '#1a1b1e', selectionBackground: '#a5d8ff' },
    cursorBlink: true,
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(host);
  fit.fit();
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(host);
  return {
    term,
    dispose() {
      observer.disconnect();
      term.dispose();
    },
  };
}
