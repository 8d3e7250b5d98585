// The session's terminal: an interactive shell through the sandbox's daemon, or, where the
// sandbox has no daemon, one command per line through exec.
import { Alert } from '@mantine/core';
import { useState } from 'react';
import type { SessionDetail } from '../../api/client';
import LineTerminal from './terminal/LineTerminal';
import PtyTerminal from './terminal/PtyTerminal';

export default function TerminalTab({ session }: { session: SessionDetail }) {
  const [noDaemon, setNoDaemon] = useState(false);
  if (session.status !== 'running') {
    return (
      <Alert color="gray" mb="sm">
        The sandbox is {session.status}: a terminal needs it running (start the session first).
      </Alert>
    );
  }
  // Keyed by the sandbox: a new one (a stop and a start) gets a new shell.
  return noDaemon ? <LineTerminal key={session.container_id ?? ''} session={session} /> : <PtyTerminal key={session.container_id ?? ''} session={session} onNoDaemon={() => setNoDaemon(true)} />;
}
