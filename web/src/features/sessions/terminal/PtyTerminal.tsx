// An interactive shell in the sandbox: xterm.js on a WebSocket to
// `GET /api/sessions/{id}/terminal`. Binary messages are the terminal's bytes both ways; a
// resize goes as JSON text, and the shell's end comes as JSON text before the close.
import { Badge, Button, Group, Text, useComputedColorScheme } from '@mantine/core';
import { useEffect, useRef, useState } from 'react';
import type { SessionDetail } from '../../../api/client';
import type { ApiError } from '../../../api/client';
import { createTerminal } from './xterm';
import { isNoDaemon, parseServerMessage, terminalPath, terminalUrl, whyRefused } from './socket';

type State = { phase: 'connecting' } | { phase: 'open' } | { phase: 'ended'; why: string };

export default function PtyTerminal({ session, onNoDaemon }: { session: SessionDetail; onNoDaemon: () => void }) {
  const host = useRef<HTMLDivElement>(null);
  const scheme = useComputedColorScheme('light');
  const [state, setState] = useState<State>({ phase: 'connecting' });
  // Bumped by "New shell": a new socket and a new shell.
  const [attempt, setAttempt] = useState(0);
  const onNoDaemonRef = useRef(onNoDaemon);
  onNoDaemonRef.current = onNoDaemon;

  useEffect(() => {
    if (!host.current) return;
    const { term, dispose } = createTerminal(host.current, scheme);
    setState({ phase: 'connecting' });
    const path = terminalPath(session.id, term.rows, term.cols);
    const ws = new WebSocket(terminalUrl(path));
    ws.binaryType = 'arraybuffer';
    const encoder = new TextEncoder();
    let opened = false;
    let closedByUs = false;
    let exit: { exit_code: number; signal: number | null } | null = null;
    ws.onopen = () => {
      opened = true;
      setState({ phase: 'open' });
      term.focus();
    };
    ws.onmessage = (m) => {
      if (typeof m.data === 'string') {
        const msg = parseServerMessage(m.data);
        if (msg) exit = msg;
      } else term.write(new Uint8Array(m.data as ArrayBuffer));
    };
    ws.onclose = (e) => {
      if (closedByUs) return;
      if (opened) {
        const why = exit ? `The shell exited with ${exit.exit_code}${exit.signal ? ` (signal ${exit.signal})` : ''}.` : e.reason || `The connection closed (${e.code}).`;
        term.write(`\r\n\x1b[33m[${why}]\x1b[0m\r\n`);
        setState({ phase: 'ended', why });
        return;
      }
      void whyRefused(session.id, term.rows, term.cols).then((refusal: ApiError | null) => {
        if (closedByUs) return;
        if (isNoDaemon(refusal)) onNoDaemonRef.current();
        else setState({ phase: 'ended', why: refusal ? refusal.detail : 'The terminal could not connect: a proxy in front of the server may not pass WebSockets.' });
      });
    };
    const input = term.onData((data) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(data));
    });
    const resize = term.onResize(({ rows, cols }) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', rows, cols }));
    });
    return () => {
      closedByUs = true;
      input.dispose();
      resize.dispose();
      ws.close();
      dispose();
    };
  }, [session.id, scheme, attempt]);

  return (
    <>
      <Group mb="xs" gap="xs" data-testid="terminal-state" data-phase={state.phase}>
        {state.phase === 'connecting' && <Badge color="gray" variant="light">connecting</Badge>}
        {state.phase === 'open' && (
          <>
            <Badge color="green" variant="light">connected</Badge>
            <Text size="sm" c="dimmed">
              A shell in {session.workdir || '/workspace'} with the session's environment; it ends when you close this tab or the session stops.
            </Text>
          </>
        )}
        {state.phase === 'ended' && (
          <>
            <Badge color="gray" variant="light">closed</Badge>
            <Text size="sm">{state.why}</Text>
            <Button size="xs" variant="light" onClick={() => setAttempt((a) => a + 1)}>
              New shell
            </Button>
          </>
        )}
      </Group>
      <div ref={host} style={{ height: 'calc(100vh - 360px)', minHeight: 260, border: '1px solid var(--mantine-color-default-border)', borderRadius: 4, padding: 4 }} data-testid="terminal" />
    </>
  );
}
