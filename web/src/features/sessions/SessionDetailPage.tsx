import { Alert, Anchor, Badge, Button, Group, Input, Menu, NumberInput, Stack, Tabs, Text, Textarea, Tooltip } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { IconBox, IconClockStop, IconCoin, IconDatabase, IconDownload, IconHandStop, IconPencil, IconTool, IconPlayerPause, IconPlayerPlay, IconPlayerStop, IconRefresh, IconSend, IconTrash } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense, useCallback, useMemo, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { api, unwrap, type SessionEvent } from '../../api/client';
import { useOptionalAppContext } from '../../context';
import { ConfirmButton, ErrorAlert, PageHeader } from '../../components/common';
import { PageFallback } from '../../components/PageFallback';
import { download } from '../../lib/download';
import { describeCost } from '../../lib/money';
import { formatDuration, RelTime } from '../../lib/time';
import { activeRun } from './events/eventLog';
import { transcriptMarkdown } from './events/transcript';
import { useEventLog } from './events/useEventLog';
import type { StreamStatus } from './events/sse';
import { StatusBadge } from './StatusBadge';
import { awaitingLabel, RequiresActionBanner, Transcript } from './Transcript';
import { EditSessionModal } from './EditSessionModal';
import { isSpendLimitRefusal, SpendLimitRefusal } from './SpendLimitRefusal';
import { BudgetIndicator, BudgetModal } from './SessionBudget';
import { budgetUseOf, limitRows } from './budget';
import { LazyCodeEditor } from '../../components/LazyCodeEditor';
import { parseTurnClientTools, sessionMcpServersText } from './startSession';
import type { ClientTool } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { idleTtlText, lifetimeEnded, resourcesText } from './limits';
import { isPythonToolEvent } from './notebook/notebook';
import { historyPath, pinLabel } from '../../lib/agentVersions';

const FilesTab = lazy(() => import('./FilesTab'));
const TerminalTab = lazy(() => import('./TerminalTab'));
const ProcessesTab = lazy(() => import('./ProcessesTab'));
const RawEventsTab = lazy(() => import('./RawEventsTab'));
const PortsTab = lazy(() => import('./PortsTab'));
const NetworkTab = lazy(() => import('./NetworkTab'));
const SnapshotsTab = lazy(() => import('./SnapshotsTab'));
const SkillsTab = lazy(() => import('./SkillsTab'));
const UsageTab = lazy(() => import('./UsageTab'));
const NotebookTab = lazy(() => import('./notebook/NotebookTab'));

const TABS = ['transcript', 'notebook', 'files', 'terminal', 'processes', 'ports', 'network', 'snapshots', 'skills', 'events', 'usage'] as const;

function StreamBadge({ status, onReconnect }: { status: StreamStatus; onReconnect: () => void }) {
  const color = { live: 'teal', connecting: 'yellow', reconnecting: 'orange', closed: 'gray', error: 'red' }[status];
  return (
    <Group gap={4}>
      <Badge variant="dot" color={color} data-testid="stream-status">
        {status === 'live' ? 'live' : status}
      </Badge>
      <Tooltip label="Drop the connection and resume from the last event">
        <Button size="compact-xs" variant="subtle" onClick={onReconnect} aria-label="Reconnect the event stream" data-testid="reconnect">
          <IconRefresh size={14} />
        </Button>
      </Tooltip>
    </Group>
  );
}

export default function SessionDetailPage() {
  const { id, tab: tabParam } = useParams();
  const sessionId = id!;
  const tab = (TABS as readonly string[]).includes(tabParam ?? '') ? (tabParam as (typeof TABS)[number]) : 'transcript';
  const navigate = useNavigate();
  const qc = useQueryClient();
  // The project the session is in (the one picked): its page holds the monthly spend limit.
  const projectSlug = useOptionalAppContext()?.project?.slug ?? null;
  const projectPath = projectSlug ? `/projects/${projectSlug}` : undefined;

  const detail = useQuery({
    queryKey: keys.sessions.detail(sessionId),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}', { params: { path: { session_id: sessionId } } })),
    refetchInterval: (q) => (q.state.data?.status === 'provisioning' ? 2000 : false),
  });
  // The agent as it is now (the detail's `agent` is the version the session runs): for a
  // pinned session, whether its agent moved on since.
  const pinnedTo = typeof detail.data?.agent_version === 'number' ? detail.data.agent_version : null;
  const agentSlug = detail.data?.agent?.slug ?? null;
  const agentNow = useQuery({
    queryKey: keys.agents.detail(agentSlug ?? ''),
    queryFn: () => unwrap(api.GET('/api/agents/{ref}', { params: { path: { ref: agentSlug! } } })),
    enabled: pinnedTo != null && !!agentSlug,
  });
  const toolCalls = useQuery({
    queryKey: keys.sessions.toolCalls(sessionId),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/tool-calls', { params: { path: { session_id: sessionId } } })),
    enabled: detail.data?.status !== undefined,
  });
  // The calls its agent's permissions ask about that wait for a person now.
  const confirmations = useQuery({
    queryKey: keys.sessions.toolConfirmations(sessionId),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/tool-confirmations', { params: { path: { session_id: sessionId } } })),
    enabled: detail.data?.status !== undefined,
  });
  // A decision was sent (or refused as stale): what waits, and the calls the caller answers
  // (an approved client tool's), are read again; the events say the rest.
  const onDecided = useCallback(() => {
    qc.invalidateQueries({ queryKey: keys.sessions.toolConfirmations(sessionId) });
    qc.invalidateQueries({ queryKey: keys.sessions.toolCalls(sessionId) });
    qc.invalidateQueries({ queryKey: keys.sessions.detail(sessionId) });
  }, [qc, sessionId]);

  const onEvents = useCallback(
    (events: SessionEvent[]) => {
      const types = new Set(events.map((e) => e.type));
      const refreshSession = ['session.queued', 'session.status_running', 'session.status_stopped', 'session.status_idle', 'session.status_error', 'session.budget_reached', 'user.message', 'session.created', 'agent.handoff'];
      if (refreshSession.some((t) => types.has(t))) qc.invalidateQueries({ queryKey: keys.sessions.detail(sessionId) });
      if (types.has('agent.client_tool_call') || types.has('agent.client_tool_result') || types.has('session.status_idle') || types.has('session.status_error')) {
        qc.invalidateQueries({ queryKey: keys.sessions.toolCalls(sessionId) });
      }
      // A call asked about (or decided), or a run that parked or ended: what waits for approval.
      const asked = events.some((e) => e.type === 'agent.tool_use' && (e.payload as Record<string, unknown> | undefined)?.awaiting_approval === true);
      if (asked || types.has('agent.tool_confirmation') || types.has('session.status_idle') || types.has('session.status_error')) {
        qc.invalidateQueries({ queryKey: keys.sessions.toolConfirmations(sessionId) });
      }
      if (types.has('user.file')) qc.invalidateQueries({ queryKey: keys.sessions.files(sessionId) });
      // The project's spend this month moved (a run ended, or its limit was neared or reached).
      if (projectSlug && ['session.status_idle', 'session.status_error', 'session.spend_warning', 'session.budget_reached'].some((t) => types.has(t))) {
        qc.invalidateQueries({ queryKey: keys.projects.spend(projectSlug) });
      }
      // A python cell started or ended: the notebook changed.
      if (events.some(isPythonToolEvent)) qc.invalidateQueries({ queryKey: keys.sessions.notebook(sessionId) });
    },
    [qc, sessionId, projectSlug],
  );
  const { log, status: streamStatus, error: streamError, reconnect } = useEventLog(sessionId, onEvents);
  const [editing, setEditing] = useState(false);
  const [budgetOpen, setBudgetOpen] = useState(false);
  const openBudget = useCallback(() => setBudgetOpen(true), []);
  const pythonInLog = useMemo(() => log.events.some(isPythonToolEvent), [log.events]);

  const act = useMutation({
    mutationFn: async (kind: 'start' | 'stop' | 'interrupt' | 'delete') => {
      const path = { params: { path: { session_id: sessionId } } };
      if (kind === 'start') return unwrap(api.POST('/api/sessions/{session_id}/start', path));
      if (kind === 'stop') return unwrap(api.POST('/api/sessions/{session_id}/stop', path));
      if (kind === 'interrupt') return unwrap(api.POST('/api/sessions/{session_id}/interrupt', path));
      await unwrap(api.DELETE('/api/sessions/{session_id}', path));
      return null;
    },
    onSuccess: (_s, kind) => {
      if (kind === 'delete') {
        qc.invalidateQueries({ queryKey: keys.sessions.all() });
        notifications.show({ message: 'Session deleted' });
        navigate('/sessions');
        return;
      }
      qc.invalidateQueries({ queryKey: keys.sessions.detail(sessionId) });
    },
  });

  if (detail.isPending) return <PageFallback />;
  if (detail.error) return <ErrorAlert error={detail.error} />;
  const s = detail.data;
  const agent = s.agent;
  const running = activeRun(log);
  const busy = s.activity === 'busy' || !!running;
  const pending = toolCalls.data ?? [];
  const approvals = confirmations.data ?? [];
  const title = s.title || 'Untitled session';
  const ended = lifetimeEnded(s);
  // The notebook is there for an agent with the python capability, or once the log shows a
  // python call (the agent may have lost the capability since), or when the URL names it.
  const showNotebook = !!agent?.capabilities?.includes('python') || pythonInLog || tab === 'notebook';
  const resources = resourcesText(s.resources);
  const cost = s.usage?.requests ? describeCost(s.usage) : null;
  const idleTtl = idleTtlText(s.idle_ttl_seconds);
  const mcpServers = sessionMcpServersText(s.mcp_servers);
  // A limit reached now: the next message stops before any model call.
  const budgetSpent = limitRows(s.budget, budgetUseOf(s)).some((r) => r.reached);

  return (
    <Stack gap="sm">
      <PageHeader
        title={title}
        description={
          <Group gap="xs" component="span">
            <StatusBadge session={s} />
            {approvals.length > 0 && (
              <Tooltip label={`The run is parked until a person approves or denies ${approvals.length === 1 ? 'the call' : 'the calls'} (in the transcript): ${approvals.map(awaitingLabel).join(', ')}`} multiline w={300}>
                <Badge color="orange" variant="light" leftSection={<IconHandStop size={12} />} data-testid="session-awaiting-approval">
                  waiting for approval{approvals.length > 1 ? ` (${approvals.length})` : ''}
                </Badge>
              </Tooltip>
            )}
            {agent && (
              <Anchor component={Link} to={`/agents/${agent.slug}`} size="sm">
                {agent.name}
              </Anchor>
            )}
            {agent && s.agent_version != null && (
              <Tooltip
                label={
                  s.agent_version === 'latest'
                    ? `It follows the agent: every turn runs it as it is then (v${agent.version} now). Details changes it.`
                    : `Pinned: it runs v${s.agent_version} of the agent, whatever edits follow (Details moves it to another). Open that version in the agent's history.`
                }
              >
                <Anchor component={Link} to={historyPath(agent.slug, s.agent_version === 'latest' ? null : s.agent_version)} size="sm" c="dimmed" data-testid="session-agent-version">
                  {pinLabel(s.agent_version)}
                </Anchor>
              </Tooltip>
            )}
            {agentNow.data && pinnedTo != null && agentNow.data.version !== pinnedTo && (
              <Text span size="sm" c="dimmed" data-testid="session-agent-version-now">
                (the agent is at v{agentNow.data.version} now)
              </Text>
            )}
            {s.environment_id && (
              <Tooltip label="The environment this session was created in">
                <Anchor
                  component={Link}
                  to={`/environments/${encodeURIComponent(s.environment_id)}`}
                  size="sm"
                  data-testid="session-environment"
                  style={{ display: 'inline-flex', alignItems: 'center', gap: 4 }}
                >
                  <IconBox size={14} /> {s.environment_name ?? 'environment'}
                </Anchor>
              </Tooltip>
            )}
            {agent && s.conversation_agent && s.conversation_agent !== agent.slug && (
              <Tooltip label="A handoff gave the conversation to this agent: the next message goes to it, until it hands back.">
                <Badge size="sm" variant="light" color="grape" data-testid="conversation-agent">
                  talking to {s.conversation_agent}
                </Badge>
              </Tooltip>
            )}
            <Text span size="sm" c="dimmed" ff="monospace">
              {s.id}
            </Text>
            <Text span size="sm" c="dimmed">
              created <RelTime value={s.created_at} />
            </Text>
            {cost && (
              <Tooltip label="What this session's model calls cost; the Usage tab splits it by model, agent and run">
                <Anchor component={Link} to={`/sessions/${s.id}/usage`} size="sm" c={cost.unpriced ? 'orange.8' : 'dimmed'} data-testid="session-cost">
                  {cost.text === 'Unpriced' ? `cost unknown: ${cost.note}` : `${cost.text} spent${cost.note ? ` ${cost.note}` : ''}`}
                </Anchor>
              </Tooltip>
            )}
            <BudgetIndicator session={s} onOpen={openBudget} />
            {s.expires_at && !ended && (
              <Tooltip label={`Its max lifetime (${formatDuration(s.max_lifetime_seconds)}) ends then: the sandbox stops, and cannot be started again.`}>
                <Text span size="sm" c="orange.8" data-testid="session-expires" style={{ display: 'inline-flex', alignItems: 'center', gap: 4 }}>
                  <IconClockStop size={14} /> stops for good <RelTime value={s.expires_at} size="sm" />
                </Text>
              </Tooltip>
            )}
            {resources && (
              <Text span size="sm" c="dimmed" data-testid="session-resources" title="This session’s own sandbox resources">
                {resources}
              </Text>
            )}
            {idleTtl && (
              <Text span size="sm" c="dimmed" data-testid="session-idle-ttl">
                {idleTtl}
              </Text>
            )}
            {mcpServers && (
              <Tooltip label="It uses only these of its agent’s MCP servers (chosen when it was started); its subagents keep theirs.">
                <Text span size="sm" c="dimmed" data-testid="session-mcp-servers">
                  {mcpServers}
                </Text>
              </Tooltip>
            )}
            <StreamBadge status={streamStatus} onReconnect={reconnect} />
          </Group>
        }
        actions={
          <>
            {(busy || approvals.length > 0) && (
              <Button variant="light" color="orange" leftSection={<IconPlayerPause size={16} />} onClick={() => act.mutate('interrupt')} loading={act.isPending && act.variables === 'interrupt'}>
                Interrupt
              </Button>
            )}
            {ended ? (
              <Tooltip label="Its lifetime ended; it cannot be started again. Start a new session to go on.">
                <Button variant="light" leftSection={<IconPlayerPlay size={16} />} data-disabled aria-disabled="true" onClick={(e) => e.preventDefault()}>
                  Start
                </Button>
              </Tooltip>
            ) : s.status === 'stopped' || s.status === 'error' ? (
              <Button variant="light" leftSection={<IconPlayerPlay size={16} />} onClick={() => act.mutate('start')} loading={act.isPending && act.variables === 'start'}>
                Start
              </Button>
            ) : (
              <Button variant="default" leftSection={<IconPlayerStop size={16} />} onClick={() => act.mutate('stop')} loading={act.isPending && act.variables === 'stop'}>
                Stop
              </Button>
            )}
            <Button variant="default" leftSection={<IconPencil size={16} />} onClick={() => setEditing(true)}>
              Details
            </Button>
            <Button variant="default" leftSection={<IconCoin size={16} />} onClick={openBudget} data-testid="edit-budget">
              Budget
            </Button>
            <Menu position="bottom-end">
              <Menu.Target>
                <Button variant="default" leftSection={<IconDownload size={16} />}>
                  Export
                </Button>
              </Menu.Target>
              <Menu.Dropdown>
                <Menu.Item onClick={() => download(`session-${s.id}.md`, transcriptMarkdown(title, log.events), 'text/markdown')}>Transcript as Markdown</Menu.Item>
                <Menu.Item onClick={() => download(`session-${s.id}.json`, JSON.stringify(log.events, null, 2), 'application/json')}>Events as JSON</Menu.Item>
              </Menu.Dropdown>
            </Menu>
            <ConfirmButton variant="subtle" color="red" leftSection={<IconTrash size={16} />} message="Delete the session and its sandbox? This cannot be undone." onConfirm={() => act.mutate('delete')} confirmLabel="Delete">
              Delete
            </ConfirmButton>
          </>
        }
      />
      <EditSessionModal key={s.updated_at} session={s} opened={editing} onClose={() => setEditing(false)} />
      {budgetOpen && <BudgetModal session={s} onClose={() => setBudgetOpen(false)} />}
      <ErrorAlert error={act.error} />
      {s.status === 'error' && s.error && <ErrorAlert error={new Error(s.error)} title="The sandbox failed to start" />}
      {ended && (
        <Alert color="gray" icon={<IconClockStop size={18} />} title="Its lifetime ended; it cannot be started again" data-testid="lifetime-ended">
          The sandbox stopped for good when its max lifetime{s.max_lifetime_seconds ? ` (${formatDuration(s.max_lifetime_seconds)})` : ''} passed. Its files, transcript and notebook stay readable; start a new session to go on.
        </Alert>
      )}
      {s.status === 'stopped' && s.stopped_reason === 'disk' && (
        <Alert color="orange" icon={<IconDatabase size={18} />} title="Stopped: it wrote more to its disk than it may" data-testid="disk-limit">
          {s.resources?.disk_mb != null ? `Its own limit is ${s.resources.disk_mb} MiB. ` : 'The limit is this server’s. '}
          Its workspace was archived first, so Start brings it back; what was written outside the workspace (such as /tmp) is gone. Remove what it no longer needs before it writes more.
        </Alert>
      )}
      {streamError && <ErrorAlert error={streamError} title="The event stream stopped" />}
      <Tabs value={tab} onChange={(v) => navigate(`/sessions/${sessionId}${v && v !== 'transcript' ? `/${v}` : ''}`, { replace: true })} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="transcript">Transcript</Tabs.Tab>
          {showNotebook && <Tabs.Tab value="notebook">Notebook</Tabs.Tab>}
          <Tabs.Tab value="files">Files</Tabs.Tab>
          <Tabs.Tab value="terminal">Terminal</Tabs.Tab>
          <Tabs.Tab value="processes">Processes</Tabs.Tab>
          <Tabs.Tab value="ports">Ports</Tabs.Tab>
          <Tabs.Tab value="network">Network</Tabs.Tab>
          <Tabs.Tab value="snapshots">Snapshots</Tabs.Tab>
          <Tabs.Tab value="skills">Skills</Tabs.Tab>
          <Tabs.Tab value="events">
            Raw events{' '}
            <Badge size="xs" variant="light" data-testid="event-count">
              {log.events.length}
            </Badge>
          </Tabs.Tab>
          <Tabs.Tab value="usage">Usage</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="transcript" pt="sm">
          <RequiresActionBanner pending={pending} approvals={approvals} sessionId={sessionId} onAnswered={() => qc.invalidateQueries({ queryKey: keys.sessions.toolCalls(sessionId) })} />
          <Transcript log={log} pending={pending} height="calc(100vh - 400px)" onRaiseBudget={openBudget} projectPath={projectPath} sessionId={sessionId} onDecided={onDecided} />
          <Composer sessionId={sessionId} disabled={s.status === 'provisioning' || ended} ended={ended} busy={busy} budgetSpent={budgetSpent} awaitingApproval={approvals.length > 0} projectPath={projectPath} />
        </Tabs.Panel>
        <Suspense fallback={<PageFallback />}>
          <Tabs.Panel value="notebook" pt="sm">
            <NotebookTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="files" pt="sm">
            <FilesTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="terminal" pt="sm">
            <TerminalTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="processes" pt="sm">
            <ProcessesTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="events" pt="sm">
            <RawEventsTab log={log} />
          </Tabs.Panel>
          <Tabs.Panel value="ports" pt="sm">
            <PortsTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="network" pt="sm">
            <NetworkTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="snapshots" pt="sm">
            <SnapshotsTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="skills" pt="sm">
            <SkillsTab session={s} />
          </Tabs.Panel>
          <Tabs.Panel value="usage" pt="sm">
            <UsageTab session={s} />
          </Tabs.Panel>
        </Suspense>
      </Tabs>
    </Stack>
  );
}

const TOOLS_PLACEHOLDER = '[\n  {\n    "name": "lookup_order",\n    "description": "Look an order up by its number",\n    "parameters": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},\n    "deferrable": false,\n    "timeout_seconds": 120\n  }\n]';

function Composer({ sessionId, disabled, ended, busy, budgetSpent, awaitingApproval, projectPath }: { sessionId: string; disabled: boolean; ended: boolean; busy: boolean; budgetSpent: boolean; awaitingApproval: boolean; projectPath?: string }) {
  const [prompt, setPrompt] = useState('');
  const [maxTurns, setMaxTurns] = useState<number | ''>('');
  const [withTools, setWithTools] = useState(false);
  const [toolsText, setToolsText] = useState('');
  const [toolsError, setToolsError] = useState<string | null>(null);
  const send = useMutation({
    mutationFn: (clientTools: ClientTool[] | null) =>
      unwrap(
        api.POST('/api/sessions/{session_id}/messages', {
          params: { path: { session_id: sessionId } },
          body: { prompt, max_turns: maxTurns === '' ? null : maxTurns, ...(clientTools ? { client_tools: clientTools } : {}) },
        }),
      ),
    onSuccess: () => setPrompt(''),
  });
  // The turn's client tools are checked as they are typed, as the server would check them, so
  // what the person sees is what Send will send.
  const tools = withTools ? parseTurnClientTools(toolsText) : ({ ok: true, tools: null } as const);
  const shownToolsError = toolsError ?? (!tools.ok ? tools.error : null);
  const submit = () => {
    if (!prompt.trim() || send.isPending) return;
    if (!tools.ok) {
      setToolsError(tools.error);
      return;
    }
    setToolsError(null);
    send.mutate(tools.tools);
  };
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <Stack gap={6} mt="sm">
        {isSpendLimitRefusal(send.error) ? (
          <SpendLimitRefusal detail={send.error.detail} projectPath={projectPath} />
        ) : (
          <ErrorAlert error={send.error} title="The message was not accepted" />
        )}
        {withTools && (
          <Input.Wrapper
            label="Client tools for this turn"
            description="A JSON array of tools (name, description, parameters as JSON Schema, deferrable, timeout_seconds), added to the agent’s for this turn only; a name the agent has is replaced. Empty: none."
            error={shownToolsError}
            data-testid="turn-tools"
          >
            <LazyCodeEditor language="json" value={toolsText} onChange={(t) => { setToolsText(t); setToolsError(null); }} minHeight={80} maxHeight={240} placeholder={TOOLS_PLACEHOLDER} ariaLabel="Turn client tools (JSON)" />
            {tools.ok && tools.tools && tools.tools.length > 0 && (
              <Text size="xs" c="dimmed" mt={4} data-testid="turn-tools-summary">
                Sent with this turn: {tools.tools.map((t) => t.name).join(', ')}
              </Text>
            )}
          </Input.Wrapper>
        )}
        <Group align="flex-end" gap="xs" wrap="nowrap">
          <Textarea
            style={{ flex: 1 }}
            aria-label="Message"
            placeholder={
              ended
                ? 'Its lifetime ended: start a new session to go on'
                : awaitingApproval
                  ? 'The turn waits for your approval: approve or deny the call above (or interrupt it)'
                  : busy
                  ? 'A turn is in flight: interrupt it, or wait for it to end'
                  : budgetSpent
                    ? 'Its budget is reached: raise it (Budget, above) first, or a message stops before any model call'
                    : 'Message the agent (Ctrl+Enter to send)'
            }
            autosize
            minRows={2}
            maxRows={8}
            value={prompt}
            disabled={disabled}
            onChange={(e) => setPrompt(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
                e.preventDefault();
                submit();
              }
            }}
            data-testid="composer"
          />
          <NumberInput aria-label="Max turns" placeholder="max turns" min={1} max={1000} w={110} value={maxTurns} onChange={(v) => setMaxTurns(typeof v === 'number' ? v : '')} allowDecimal={false} />
          <Tooltip label={withTools ? 'Send no client tools with this turn' : 'Client tools for this turn'}>
            <Button variant={withTools ? 'light' : 'default'} onClick={() => { setWithTools((w) => !w); setToolsError(null); }} aria-pressed={withTools} aria-label="Client tools for this turn" px="xs">
              <IconTool size={16} />
            </Button>
          </Tooltip>
          <Button type="submit" leftSection={<IconSend size={16} />} loading={send.isPending} disabled={disabled || !prompt.trim()}>
            Send
          </Button>
        </Group>
      </Stack>
    </form>
  );
}
