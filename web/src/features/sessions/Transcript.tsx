import { Alert, Badge, Box, Button, Checkbox, Code, Group, Paper, Stack, Text, Textarea, UnstyledButton } from '@mantine/core';
import { IconArrowsExchange, IconArrowsMinimize, IconBrain, IconChevronDown, IconChevronRight, IconCoin, IconTool, IconUser, IconRobot, IconAlertTriangle, IconCheck, IconHandStop, IconX } from '@tabler/icons-react';
import { useMutation } from '@tanstack/react-query';
import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useEffect, useLayoutEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { Link } from 'react-router-dom';
import { api, ApiError, unwrap, type AwaitingConfirmation, type ClientToolCall } from '../../api/client';
import { ErrorAlert } from '../../components/common';
import { budgetReachedText, budgetSummary, type Budget } from '../../lib/budget';
import { isProjectScope, spendWarningText } from '../../lib/spendLimit';
import { formatDuration, formatNumber, RelTime } from '../../lib/time';
import type { EventLogState } from './events/eventLog';
import {
  approvalText,
  buildTranscript,
  compactionSizes,
  holdsWaitingApproval,
  mcpServerErrorConsequence,
  mcpServerErrorText,
  parseArguments as parseArgs,
  pythonCell,
  statusLabel,
  type Item,
  type McpErrorItem,
  type ToolItem,
} from './events/transcript';

type Ctx = {
  expanded: Set<string>;
  toggle: (id: string) => void;
  pending: Map<string, ClientToolCall>;
  /** Opens the session's budget, from the end of a turn that stopped at it. */
  onRaiseBudget?: () => void;
  /** The newest run end's id: only it offers to raise the budget. */
  lastEndId: string | null;
  /** The project's page (its monthly spend limit), from a turn that stopped at that limit. */
  projectPath?: string;
  /** The session, for deciding a call that waits for approval (none: the transcript only shows it). */
  sessionId?: string;
  /** After a decision was sent, or refused as stale (409): read what waits again. */
  onDecided?: () => void;
};

const text = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v, null, 2));

/** Session-wide lines that tell of something refused or kept back, shown in orange. */
const WARNINGS = new Set(['session.s3_conflict', 'sandbox.egress_denied']);

function Collapsible({ id, ctx, header, children, defaultOpen = false }: { id: string; ctx: Ctx; header: ReactNode; children: ReactNode; defaultOpen?: boolean }) {
  const open = ctx.expanded.has(id) !== defaultOpen;
  return (
    <Box>
      <UnstyledButton onClick={() => ctx.toggle(id)} aria-expanded={open} style={{ display: 'flex', alignItems: 'center', gap: 6, width: '100%' }}>
        {open ? <IconChevronDown size={14} /> : <IconChevronRight size={14} />}
        {header}
      </UnstyledButton>
      {open && (
        <Box pl="md" pt={4}>
          {children}
        </Box>
      )}
    </Box>
  );
}

export function AnswerForm({ call, sessionId, onAnswered }: { call: ClientToolCall; sessionId: string; onAnswered: () => void }) {
  const [output, setOutput] = useState('');
  const [isError, setIsError] = useState(false);
  const send = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/sessions/{session_id}/tool-results', {
          params: { path: { session_id: sessionId } },
          body: { call_id: call.call_id, output, is_error: isError },
        }),
      ),
    onSuccess: onAnswered,
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        send.mutate();
      }}
      data-testid={`answer-${call.call_id}`}
    >
      <Stack gap="xs" mt="xs">
        <Textarea label={`Answer to ${call.tool}`} autosize minRows={2} value={output} onChange={(e) => setOutput(e.currentTarget.value)} placeholder="What the model receives as the tool's output" />
        <Group justify="space-between">
          <Checkbox label="Report as an error" checked={isError} onChange={(e) => setIsError(e.currentTarget.checked)} />
          <Button type="submit" size="xs" loading={send.isPending}>
            Send answer
          </Button>
        </Group>
        <ErrorAlert error={send.error} />
      </Stack>
    </form>
  );
}

/** A running tool's output so far, following its end as it grows. */
function LiveOutput({ text }: { text: string }) {
  const ref = useRef<HTMLPreElement>(null);
  useEffect(() => {
    if (ref.current) ref.current.scrollTop = ref.current.scrollHeight;
  }, [text]);
  return (
    <Code block ref={ref} mt={6} data-testid="tool-live-output" style={{ maxHeight: 180, overflow: 'auto' }}>
      {text}
    </Code>
  );
}

/** A tool call's input: the python tool's cell as code, any other tool's arguments as JSON. */
function ToolInput({ item }: { item: ToolItem }) {
  const cell = pythonCell(item);
  if (!cell) {
    return (
      <>
        <Text size="xs" c="dimmed">
          Arguments
        </Text>
        <Code block>{text(item.arguments)}</Code>
      </>
    );
  }
  return (
    <>
      <Text size="xs" c="dimmed">
        Code{cell.timeout != null ? ` · time limit ${cell.timeout} s` : ''}
      </Text>
      <Code block data-testid="python-code" style={{ whiteSpace: 'pre', overflowX: 'auto', maxHeight: 320 }}>
        {cell.code}
      </Code>
    </>
  );
}

/** Who a call that waits for approval is about: the subagent that made it, the one it calls. */
function approvalWho(item: ToolItem): string | null {
  const parts = [item.subagent ? `asked by the subagent ${item.subagent.agent}` : null, item.agent ? `calls the subagent ${item.agent}` : null, item.client ? 'a client tool: once approved, its answer is yours to give' : null].filter(Boolean);
  return parts.length ? parts.join(' · ') : null;
}

/**
 * A call the agent's permissions ask about: while it waits, Approve and Deny (with a message
 * the model reads with a denial); once decided, by whom. A decision the server refuses because
 * the call no longer waits (409) stays said here while the transcript catches up.
 */
function ApprovalView({ item, ctx }: { item: ToolItem; ctx: Ctx }) {
  const [message, setMessage] = useState('');
  const approval = item.approval!;
  const decide = useMutation({
    mutationFn: (decision: 'allow' | 'deny') =>
      unwrap(
        api.POST('/api/sessions/{session_id}/tool-confirmations', {
          params: { path: { session_id: ctx.sessionId! } },
          body: { call_id: item.callId, decision, message: message.trim() ? message.trim() : null },
        }),
      ),
    onSuccess: () => ctx.onDecided?.(),
    onError: (e) => {
      if (e instanceof ApiError && e.status === 409) ctx.onDecided?.();
    },
  });
  const stale = decide.error instanceof ApiError && decide.error.status === 409;
  const who = approvalWho(item);
  const error = stale ? <ErrorAlert error={decide.error} title="Not decided: the call no longer waits" /> : <ErrorAlert error={decide.error} title="The decision was not accepted" />;
  if (approval.state !== 'waiting') {
    const denied = approval.state === 'denied';
    return (
      <Box mt="xs">
        {decide.error && error}
        <Group gap={6} wrap="nowrap" mt={decide.error ? 'xs' : 0} data-testid="approval-decision" data-decision={approval.state}>
          {denied ? <IconX size={14} color="var(--mantine-color-red-7)" style={{ flex: 'none' }} /> : approval.state === 'allowed' ? <IconCheck size={14} color="var(--mantine-color-teal-7)" style={{ flex: 'none' }} /> : <IconHandStop size={14} style={{ flex: 'none' }} />}
          <Text size="sm" c={denied ? 'red.8' : approval.state === 'allowed' ? 'teal.8' : 'dimmed'} style={{ wordBreak: 'break-word', whiteSpace: 'pre-wrap' }} data-testid="approval-decision-text">
            {approvalText(approval)}
          </Text>
          {approval.decision && <RelTime value={approval.decision.created_at} size="xs" c="dimmed" />}
        </Group>
      </Box>
    );
  }
  return (
    <Paper p="xs" mt="xs" radius="sm" bg="var(--mantine-color-orange-light)" data-testid="approval-waiting">
      <Group gap={6} wrap="nowrap">
        <IconHandStop size={16} style={{ flex: 'none' }} />
        <Text size="sm" fw={600}>
          Waiting for your approval
        </Text>
      </Group>
      {who && (
        <Text size="xs" c="dimmed" data-testid="approval-who">
          {who}
        </Text>
      )}
      {ctx.sessionId ? (
        <Stack gap="xs" mt="xs">
          <Textarea
            label="Message (optional)"
            description="Kept with your decision; with a denial the model reads it as the reason."
            autosize
            minRows={1}
            maxRows={6}
            maxLength={4000}
            value={message}
            onChange={(e) => setMessage(e.currentTarget.value)}
            disabled={decide.isPending || decide.isSuccess}
          />
          <Group gap="xs">
            <Button size="xs" color="teal" leftSection={<IconCheck size={14} />} loading={decide.isPending && decide.variables === 'allow'} disabled={(decide.isPending && decide.variables !== 'allow') || decide.isSuccess} onClick={() => decide.mutate('allow')}>
              Approve
            </Button>
            <Button size="xs" color="red" variant="light" leftSection={<IconX size={14} />} loading={decide.isPending && decide.variables === 'deny'} disabled={(decide.isPending && decide.variables !== 'deny') || decide.isSuccess} onClick={() => decide.mutate('deny')}>
              Deny
            </Button>
            {decide.isSuccess && (
              <Text size="xs" c="dimmed">
                {decide.variables === 'deny' ? 'Denied' : 'Approved'}; the run goes on…
              </Text>
            )}
          </Group>
          {decide.error && error}
        </Stack>
      ) : (
        <Text size="xs" c="dimmed">
          Decide it with POST /api/sessions/{'{id}'}/tool-confirmations.
        </Text>
      )}
    </Paper>
  );
}

function ToolView({ item, ctx }: { item: ToolItem; ctx: Ctx }) {
  const rp = (item.result?.payload ?? {}) as Record<string, unknown>;
  const pending = item.client ? ctx.pending.get(item.callId) : undefined;
  const approval = item.approval;
  const cell = pythonCell(item);
  const argsSummary = cell ? cell.code.split('\n').find((l) => l.trim()) ?? '' : typeof item.arguments === 'object' && item.arguments ? Object.values(item.arguments as Record<string, unknown>).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(' ') : String(item.arguments ?? '');
  return (
    <Paper withBorder p="xs" radius="sm" data-testid="tool-call" data-tool={item.tool} data-approval={approval?.state}>
      <Collapsible
        id={item.id}
        ctx={ctx}
        // Open while it (or a subagent's call under it) waits for an answer or an approval; a
        // call that went through an approval stays open, its decision and result in view.
        defaultOpen={!!pending || !!approval || item.children.some(holdsWaitingApproval)}
        header={
          <Group gap={6} wrap="nowrap" style={{ minWidth: 0, flex: 1 }}>
            <IconTool size={14} />
            <Text size="sm" fw={600} ff="monospace">
              {item.tool}
            </Text>
            {item.client && (
              <Badge size="xs" variant="light" color="grape">
                {item.deferrable ? 'client · deferrable' : 'client'}
              </Badge>
            )}
            {item.mcpServer && (
              <Badge size="xs" variant="light" color="indigo" miw="max-content" data-testid="mcp-badge" title={`A tool of the MCP server ${item.mcpServer}`}>
                MCP · {item.mcpServer}
              </Badge>
            )}
            {item.children.length > 0 && (
              <Badge size="xs" variant="light">
                subagent · {item.children.length} steps
              </Badge>
            )}
            <Text size="xs" c="dimmed" truncate style={{ flex: 1, minWidth: 0 }} ff="monospace">
              {argsSummary}
            </Text>
            {approval?.state === 'allowed' && (
              <Badge size="xs" color="teal" variant="outline">
                approved
              </Badge>
            )}
            {item.result ? (
              <Badge size="xs" color={rp.is_error ? 'red' : 'teal'} variant="light">
                {rp.timed_out ? 'timed out' : rp.is_error ? 'error' : 'done'}
              </Badge>
            ) : approval?.state === 'waiting' ? (
              <Badge size="xs" color="orange" data-testid="awaiting-approval">
                awaiting approval
              </Badge>
            ) : approval?.state === 'denied' ? (
              <Badge size="xs" color="red" variant="light">
                denied
              </Badge>
            ) : approval?.state === 'lapsed' ? (
              <Badge size="xs" color="gray" variant="light">
                not decided
              </Badge>
            ) : pending ? (
              <Badge size="xs" color="orange">
                waiting for an answer
              </Badge>
            ) : (
              <Badge size="xs" color="blue" variant="dot">
                running
              </Badge>
            )}
          </Group>
        }
      >
        <ToolInput item={item} />
        {approval && <ApprovalView item={item} ctx={ctx} />}
        {item.children.length > 0 && (
          <Stack gap={6} mt="xs" pl="sm" style={{ borderLeft: '2px solid var(--mantine-color-blue-4)' }} data-testid="subagent-steps">
            <Text size="xs" c="dimmed">
              Steps of {(item.children.find((c) => (c as { subagent?: unknown }).subagent) as { subagent?: { agent: string } } | undefined)?.subagent?.agent ?? 'the subagent'}
            </Text>
            {item.children.map((c) => (
              <ItemView key={c.id} item={c} ctx={ctx} />
            ))}
          </Stack>
        )}
        {item.result && (
          <>
            <Text size="xs" c="dimmed" mt="xs">
              Output
            </Text>
            <Code block color={rp.is_error ? 'red' : undefined} style={{ maxHeight: 320, overflow: 'auto' }}>
              {text(rp.output) || '(empty)'}
            </Code>
          </>
        )}
        {pending && (
          <Text size="xs" c="orange" mt="xs">
            Waiting for an answer: answer it in the banner above the transcript.
          </Text>
        )}
      </Collapsible>
      {item.live && <LiveOutput text={item.live} />}
    </Paper>
  );
}

/** An MCP server that could not be reached: a warning line, red when the server is required. */
function McpErrorView({ item }: { item: McpErrorItem }) {
  const p = (item.event.payload ?? {}) as Record<string, unknown>;
  const color = item.required ? 'red' : 'orange';
  return (
    <Paper p="xs" radius="sm" bg={`var(--mantine-color-${color}-light)`} role="alert" data-testid="mcp-server-error" data-server={item.server} data-required={item.required}>
      <Group gap="xs" justify="space-between" wrap="nowrap">
        <Group gap={6} wrap="nowrap" style={{ minWidth: 0 }}>
          <IconAlertTriangle size={16} style={{ flex: 'none' }} color={`var(--mantine-color-${color}-8)`} />
          <Text size="sm" fw={600} style={{ wordBreak: 'break-word' }} data-testid="mcp-server-error-text">
            {mcpServerErrorText(p)}
          </Text>
        </Group>
        <RelTime value={item.event.created_at} size="xs" c="dimmed" />
      </Group>
      <Text size="xs" c="dimmed">
        {mcpServerErrorConsequence(item.required, item.callId !== null)}
      </Text>
    </Paper>
  );
}

function Usage({ usage }: { usage: Record<string, unknown> }) {
  if (!usage || typeof usage !== 'object') return null;
  return (
    <Text size="xs" c="dimmed">
      {formatNumber(usage.input_tokens as number)} in · {formatNumber(usage.output_tokens as number)} out · {formatNumber(usage.requests as number)} requests
      {typeof usage.active_seconds === 'number' ? ` · ${formatDuration(usage.active_seconds)} active` : ''}
    </Text>
  );
}

const ItemView = memo(function ItemView({ item, ctx }: { item: Item; ctx: Ctx }) {
  const p = 'event' in item ? ((item.event.payload ?? {}) as Record<string, unknown>) : {};
  switch (item.kind) {
    case 'user':
      return (
        <Paper p="sm" radius="md" bg="var(--mantine-color-blue-light)" data-testid="user-message">
          <Group gap={6} mb={4}>
            <IconUser size={14} />
            <Text size="xs" fw={600}>
              You
            </Text>
            <RelTime value={item.event.created_at} size="xs" c="dimmed" />
          </Group>
          <Text size="sm" style={{ whiteSpace: 'pre-wrap' }}>
            {text(p.text)}
          </Text>
        </Paper>
      );
    case 'agent':
    case 'streaming':
      return (
        <Paper p="sm" radius="md" withBorder data-testid={item.kind === 'streaming' ? 'streaming-message' : 'agent-message'}>
          <Group gap={6} mb={4}>
            <IconRobot size={14} />
            <Text size="xs" fw={600}>
              {item.subagent ? item.subagent.agent : 'Agent'}
            </Text>
            {item.kind === 'streaming' ? (
              <Badge size="xs" variant="dot">
                streaming
              </Badge>
            ) : (
              <RelTime value={item.event.created_at} size="xs" c="dimmed" />
            )}
          </Group>
          <Text size="sm" style={{ whiteSpace: 'pre-wrap' }}>
            {item.kind === 'streaming' ? item.text : text(p.text)}
          </Text>
        </Paper>
      );
    case 'thinking':
      return (
        <Collapsible id={item.id} ctx={ctx} header={<Group gap={6}><IconBrain size={14} /><Text size="sm" c="dimmed">Thinking</Text></Group>}>
          <Text size="sm" c="dimmed" style={{ whiteSpace: 'pre-wrap' }}>
            {text(p.text)}
          </Text>
        </Collapsible>
      );
    case 'tool':
      return <ToolView item={item} ctx={ctx} />;
    case 'handoff':
      return (
        <Group gap={6} justify="center" data-testid="handoff">
          <IconArrowsExchange size={16} />
          <Text size="sm" fw={600}>
            Handoff: {item.from} → {item.to}
          </Text>
          <Text size="xs" c="dimmed">
            the next prompt goes to {item.to}
          </Text>
        </Group>
      );
    case 'compaction':
      return (
        <Box data-testid="compaction">
          <Collapsible
            id={item.id}
            ctx={ctx}
            header={
              <Group gap={6}>
                <IconArrowsMinimize size={14} />
                <Text size="xs" c="dimmed">
                  Conversation compacted ({compactionSizes(item.before, item.after)}): the model now sees a summary of the earlier turns, the log keeps them all
                </Text>
              </Group>
            }
          >
            <Text size="sm" c="dimmed" style={{ whiteSpace: 'pre-wrap' }}>
              {text(p.summary) || 'The summary is not part of this event.'}
            </Text>
          </Collapsible>
        </Box>
      );
    case 'terminal': {
      const error = item.event.type === 'session.status_error';
      const requiresAction = p.stop_reason === 'requires_action';
      // A stop at the budget is an ordinary end (the run completed): said in words, with the
      // way on (raise the budget, send again) on the newest end.
      const atBudget = !error && p.stop_reason === 'budget_reached';
      // The project's monthly limit is not the session's budget: its admins cannot raise it
      // here, so the way on is the project's page (an operator's), not the budget dialog.
      const atProjectLimit = atBudget && isProjectScope(p.budget);
      return (
        <Paper p="xs" radius="sm" bg={error ? 'var(--mantine-color-red-light)' : requiresAction ? 'var(--mantine-color-orange-light)' : 'var(--mantine-color-default-hover)'} data-testid="run-end" data-stop-reason={typeof p.stop_reason === 'string' ? p.stop_reason : undefined}>
          <Group gap="xs" justify="space-between">
            <Text size="xs" fw={600}>
              {error ? 'Run failed' : requiresAction ? (item.approvals > 0 ? 'Paused for approval' : 'Paused: requires action') : p.stop_reason === 'cancelled' ? 'Run cancelled' : 'Run finished'}
              {atProjectLimit ? ' · stopped at the project’s monthly spend limit' : atBudget ? ' · stopped at the budget' : requiresAction && item.approvals > 0 ? '' : p.stop_reason ? ` · ${text(p.stop_reason)}` : ''}
              {typeof p.turns === 'number' ? ` · ${p.turns} turns` : ''}
            </Text>
            <RelTime value={item.event.created_at} size="xs" c="dimmed" />
          </Group>
          {typeof p.error === 'string' && (
            <Text size="sm" c="red">
              {p.error}
            </Text>
          )}
          <Usage usage={p.usage as Record<string, unknown>} />
          {atProjectLimit && ctx.lastEndId === item.id && (
            <Group gap="xs" mt={4} data-testid="project-limit-hint">
              <Text size="xs" c="dimmed">
                No turn starts in this project until next month (UTC), or until an operator raises its monthly limit.
              </Text>
              {ctx.projectPath && (
                <Button component={Link} to={ctx.projectPath} size="compact-xs" variant="light" color="orange" leftSection={<IconCoin size={12} />}>
                  Project’s spend limit
                </Button>
              )}
            </Group>
          )}
          {atBudget && !atProjectLimit && ctx.onRaiseBudget && ctx.lastEndId === item.id && (
            <Group gap="xs" mt={4} data-testid="raise-budget-hint">
              <Text size="xs" c="dimmed">
                Raise the budget (or remove it), then send a message to go on from here.
              </Text>
              <Button size="compact-xs" variant="light" color="orange" leftSection={<IconCoin size={12} />} onClick={ctx.onRaiseBudget}>
                Raise the budget
              </Button>
            </Group>
          )}
        </Paper>
      );
    }
    case 'budget': {
      const budget = (p.budget ?? null) as Budget | null;
      const project = isProjectScope(p);
      return (
        <Paper p="xs" radius="sm" bg="var(--mantine-color-orange-light)" data-testid="budget-reached" data-limit={typeof p.limit === 'string' ? p.limit : undefined} data-scope={project ? 'project' : 'session'}>
          <Group gap="xs" justify="space-between" wrap="nowrap">
            <Group gap={6} wrap="nowrap" style={{ minWidth: 0 }}>
              <IconCoin size={16} style={{ flex: 'none' }} />
              <Text size="sm" fw={600} data-testid="budget-reached-text">
                {budgetReachedText(p)}
              </Text>
            </Group>
            <RelTime value={item.event.created_at} size="xs" c="dimmed" />
          </Group>
          <Text size="xs" c="dimmed">
            {project
              ? 'The turn ended before its next model call; nothing failed. The limit is the project’s, over all its sessions this calendar month (UTC).'
              : `The turn ended before its next model call; nothing failed. The session’s budget: ${budgetSummary(budget)}.`}
          </Text>
        </Paper>
      );
    }
    case 'spend_warning':
      return (
        <Paper p="xs" radius="sm" bg="var(--mantine-color-yellow-light)" data-testid="spend-warning">
          <Group gap="xs" justify="space-between" wrap="nowrap">
            <Group gap={6} wrap="nowrap" style={{ minWidth: 0 }}>
              <IconAlertTriangle size={16} style={{ flex: 'none' }} color="var(--mantine-color-orange-8)" />
              <Text size="sm" fw={600} data-testid="spend-warning-text">
                {spendWarningText(p)}
              </Text>
            </Group>
            <RelTime value={item.event.created_at} size="xs" c="dimmed" />
          </Group>
          <Text size="xs" c="dimmed">
            {typeof p.month === 'string' ? `This month (${p.month}, UTC)` : 'This month'}, over all its sessions. At the limit no turn starts, and turns in flight stop before their next model call.
          </Text>
        </Paper>
      );
    case 'mcp_error':
      return <McpErrorView item={item} />;
    case 'status': {
      return (
        <Group gap={6} justify="center">
          <Text size="xs" c={WARNINGS.has(item.event.type) ? 'orange' : 'dimmed'} data-testid={`status-${item.event.type}`}>
            {statusLabel(item.event)} · <RelTime value={item.event.created_at} size="xs" />
          </Text>
        </Group>
      );
    }
  }
});

export function Transcript({
  log,
  pending,
  height,
  onRaiseBudget,
  projectPath,
  sessionId,
  onDecided,
}: {
  log: EventLogState;
  pending: ClientToolCall[];
  height: string;
  onRaiseBudget?: () => void;
  projectPath?: string;
  /** Given, a call that waits for approval is approved or denied in place. */
  sessionId?: string;
  onDecided?: () => void;
}) {
  const items = useMemo(() => buildTranscript(log.events, log.streaming, log.toolOutput), [log.events, log.streaming, log.toolOutput]);
  const lastEndId = useMemo(() => items.findLast((i) => i.kind === 'terminal')?.id ?? null, [items]);
  const [expanded, setExpanded] = useState<Set<string>>(() => new Set());
  const pendingMap = useMemo(() => new Map(pending.map((c) => [c.call_id, c])), [pending]);
  const ctx: Ctx = useMemo(
    () => ({
      expanded,
      toggle: (id) =>
        setExpanded((s) => {
          const n = new Set(s);
          if (n.has(id)) n.delete(id);
          else n.add(id);
          return n;
        }),
      pending: pendingMap,
      onRaiseBudget,
      lastEndId,
      projectPath,
      sessionId,
      onDecided,
    }),
    [expanded, pendingMap, onRaiseBudget, lastEndId, projectPath, sessionId, onDecided],
  );
  const parent = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const virtualizer = useVirtualizer({
    count: items.length,
    getScrollElement: () => parent.current,
    estimateSize: () => 72,
    overscan: 8,
    getItemKey: (i) => items[i].id,
  });
  useLayoutEffect(() => {
    if (stick.current && items.length) virtualizer.scrollToIndex(items.length - 1, { align: 'end' });
  }, [items, virtualizer]);
  // Rows measured taller than estimated (a long message, an output folded open) grow the list
  // after the scroll above: stay at the bottom if that is where the reader was.
  const total = virtualizer.getTotalSize();
  useLayoutEffect(() => {
    const el = parent.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [total]);
  useEffect(() => {
    const el = parent.current;
    if (!el) return;
    const onScroll = () => {
      stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    };
    el.addEventListener('scroll', onScroll, { passive: true });
    return () => el.removeEventListener('scroll', onScroll);
  }, []);

  if (items.length === 0) {
    return (
      <Alert variant="light" color="gray" title="Nothing here yet">
        The transcript fills in as the sandbox boots and the agent works. Send a message below to start a turn.
      </Alert>
    );
  }
  return (
    <div ref={parent} style={{ height, overflow: 'auto', contain: 'strict' }} data-testid="transcript" tabIndex={0} aria-label="Transcript">
      <div style={{ height: virtualizer.getTotalSize(), position: 'relative', width: '100%' }}>
        {virtualizer.getVirtualItems().map((v) => (
          <div key={v.key} data-index={v.index} ref={virtualizer.measureElement} style={{ position: 'absolute', top: 0, left: 0, width: '100%', transform: `translateY(${v.start}px)`, padding: '4px 8px 4px 0' }}>
            <ItemView item={items[v.index]} ctx={ctx} />
          </div>
        ))}
      </div>
    </div>
  );
}

/** A call that waits for approval, named for people: its tool, and the subagent that asks. */
export function awaitingLabel(c: Pick<AwaitingConfirmation, 'tool' | 'subagent'>): string {
  const sub = c.subagent as { agent?: unknown } | null | undefined;
  return typeof sub?.agent === 'string' ? `${c.tool} (asked by ${sub.agent})` : c.tool;
}

export function RequiresActionBanner({ pending, approvals = [], sessionId, onAnswered }: { pending: ClientToolCall[]; approvals?: AwaitingConfirmation[]; sessionId: string; onAnswered: () => void }) {
  const parked = pending.filter((c) => c.deferrable);
  const held = pending.filter((c) => !c.deferrable);
  if (!pending.length && !approvals.length) return null;
  if (!pending.length) {
    return (
      <Alert color="orange" icon={<IconHandStop size={18} />} title="Waiting for approval" mb="sm" data-testid="requires-approval">
        <Text size="sm">
          The run is parked until {approvals.length === 1 ? 'this call is' : 'these calls are'} approved or denied: {approvals.map(awaitingLabel).join(', ')}. Decide in the transcript below, or from code with POST /api/sessions/{'{id}'}/tool-confirmations.
        </Text>
      </Alert>
    );
  }
  return (
    <Alert color="orange" icon={<IconAlertTriangle size={18} />} title={parked.length ? 'Requires action' : 'Waiting for a client tool'} mb="sm" data-testid="requires-action">
      {approvals.length > 0 && (
        <Text size="sm" data-testid="requires-approval">
          Also waiting for approval: {approvals.map(awaitingLabel).join(', ')} (decide in the transcript below).
        </Text>
      )}
      {parked.length > 0 && <Text size="sm">The run is parked until {parked.length === 1 ? 'this call is' : 'these calls are'} answered: {parked.map((c) => c.tool).join(', ')}.</Text>}
      {held.length > 0 && <Text size="sm">The turn is holding for {held.map((c) => c.tool).join(', ')} (it gives up after the tool's timeout).</Text>}
      <Text size="xs" c="dimmed">Answer here, or from code with POST /api/sessions/{'{id}'}/tool-results.</Text>
      {pending.map((c) => (
        <Paper key={c.call_id} withBorder p="xs" mt="xs">
          <Text size="sm" fw={600} ff="monospace">
            {c.tool}
          </Text>
          <Code block>{text(parseArgs(c.arguments))}</Code>
          <AnswerForm call={c} sessionId={sessionId} onAnswered={onAnswered} />
        </Paper>
      ))}
    </Alert>
  );
}
