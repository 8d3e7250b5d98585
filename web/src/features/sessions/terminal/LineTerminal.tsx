// The terminal of a sandbox without a daemon (its image cannot run it, or the server runs
// without one): each line typed runs through `POST /api/sessions/{id}/exec`, one command at a
// time, its output printed when it ends.
import { Alert, Group, NumberInput, Text, useComputedColorScheme } from '@mantine/core';
import { useEffect, useRef, useState } from 'react';
import { api, unwrap, type Schemas, type SessionDetail } from '../../../api/client';
import { errorText } from '../../../components/common';
import { createTerminal } from './xterm';

const PROMPT = '\x1b[1;32m$\x1b[0m ';

export default function LineTerminal({ session }: { session: SessionDetail }) {
  const host = useRef<HTMLDivElement>(null);
  const [timeout, setTimeoutS] = useState<number>(60);
  const timeoutRef = useRef(timeout);
  timeoutRef.current = timeout;
  const scheme = useComputedColorScheme('light');

  useEffect(() => {
    if (!host.current) return;
    const { term, dispose } = createTerminal(host.current, scheme, { convertEol: true });
    term.writeln(`Commands run in ${session.workdir || '/workspace'} with the session's environment. One command per line.`);
    term.write(PROMPT);
    let line = '';
    let busy = false;
    const history: string[] = [];
    let hIndex = 0;
    const replaceLine = (text: string) => {
      term.write('\r\x1b[2K' + PROMPT + text);
      line = text;
    };
    const run = async (command: string) => {
      busy = true;
      try {
        // Asked as JSON (no `Accept: text/event-stream`): the whole result.
        const r = (await unwrap(
          api.POST('/api/sessions/{session_id}/exec', { params: { path: { session_id: session.id } }, body: { command, timeout: timeoutRef.current } }),
        )) as Schemas['ExecResult'];
        if (r.stdout) term.write(r.stdout.endsWith('\n') ? r.stdout : r.stdout + '\n');
        if (r.stderr) term.write('\x1b[31m' + r.stderr + (r.stderr.endsWith('\n') ? '' : '\n') + '\x1b[0m');
        if (r.exit_code !== 0) term.writeln(`\x1b[33m[exit ${r.exit_code}]\x1b[0m`);
      } catch (e) {
        term.writeln('\x1b[31m' + errorText(e) + '\x1b[0m');
      } finally {
        busy = false;
        term.write(PROMPT);
      }
    };
    const sub = term.onData((data) => {
      if (busy) return;
      if (data === '\r') {
        term.write('\r\n');
        const cmd = line.trim();
        line = '';
        if (cmd) {
          history.push(cmd);
          hIndex = history.length;
          void run(cmd);
        } else term.write(PROMPT);
      } else if (data === '\x7f') {
        if (line.length) {
          line = line.slice(0, -1);
          term.write('\b \b');
        }
      } else if (data === '\x1b[A') {
        if (hIndex > 0) replaceLine(history[--hIndex]);
      } else if (data === '\x1b[B') {
        if (hIndex < history.length - 1) replaceLine(history[++hIndex]);
        else {
          hIndex = history.length;
          replaceLine('');
        }
      } else if (data === '\x03') {
        term.write('^C\r\n' + PROMPT);
        line = '';
      } else if (!data.startsWith('\x1b')) {
        const printable = data.replace(/[\x00-\x1f]/g, '');
        line += printable;
        term.write(printable);
      }
    });
    term.focus();
    return () => {
      sub.dispose();
      dispose();
    };
  }, [session.id, session.workdir, scheme]);

  return (
    <>
      <Alert color="gray" mb="sm" data-testid="line-terminal-note">
        This sandbox has no daemon (its image cannot run it, or the server runs without one), so there is no interactive terminal: each line runs as a command on its own.
      </Alert>
      <Group mb="xs" gap="xs">
        <Text size="sm">Timeout per command</Text>
        <NumberInput size="xs" w={90} min={1} max={600} value={timeout} onChange={(v) => typeof v === 'number' && setTimeoutS(v)} aria-label="Timeout in seconds" suffix="s" />
      </Group>
      <div ref={host} style={{ height: 'calc(100vh - 360px)', minHeight: 260, border: '1px solid var(--mantine-color-default-border)', borderRadius: 4, padding: 4 }} data-testid="terminal" />
    </>
  );
}
