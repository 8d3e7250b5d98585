// Approvals, end to end, on a server of its own (its model calls the shell for every message,
// so no other spec's script may answer it): an agent made in the UI whose shell asks (but `ls`
// runs without asking) and whose write_file is denied, set on the form's Permissions tab; an
// edit that leaves the resolved defaults alone (only the field changed is recorded); a session
// whose first call waits in the transcript with its arguments until it is approved, then runs,
// and the model answers with its output; a second call denied with a message the model reads;
// a third that a prefix lets through without asking.
import { expect, test } from '@playwright/test';
import { ownServer } from './ownServer';
import { shot } from './shots';
import { noSidewaysScroll } from './layout';

const AGENT = 'careful';

async function api(method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const r = await fetch(`${own.server.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  expect(r.ok, `${method} ${p}: ${r.status} ${await r.clone().text()}`).toBeTruthy();
  return r.status === 204 ? null : r.json();
}

type Event = { seq: number; type: string; payload: Record<string, unknown> };

// The model: after a tool's answer, a sentence on it; to a message, a shell call that depends
// on what it asks for.
const own = ownServer('approvals', [
  { when: { last_message_role: 'tool', last_tool_result_contains: 'a person denied this call' }, reply: { text: 'Understood: I left the build alone.' } },
  { when: { last_message_role: 'tool', last_tool_result_contains: 'approved-output' }, reply: { text: 'The shell printed approved-output.' } },
  { when: { last_message_role: 'tool' }, reply: { text: 'Listed the root.' } },
  { when: { last_message_role: 'user', last_user_contains: 'clean' }, reply: { tool_calls: [{ name: 'shell', arguments: { command: 'rm -rf build' } }] } },
  { when: { last_message_role: 'user', last_user_contains: 'list' }, reply: { tool_calls: [{ name: 'shell', arguments: { command: 'ls /' } }] } },
  { when: { last_message_role: 'user' }, reply: { tool_calls: [{ name: 'shell', arguments: { command: 'echo approved-output' } }] } },
  { reply: { text: 'Done.' } },
]);

test('a call the agent asks about waits in the transcript until it is approved or denied', async ({ page }) => {
  test.setTimeout(360_000);

  // The agent, its permissions set on the form's Permissions tab.
  await page.goto(`${own.ui}/agents/new`);
  await page.getByLabel('Slug').fill(AGENT);
  await page.getByLabel('Name', { exact: false }).first().fill('Careful');
  await page.getByRole('textbox', { name: 'Model' }).fill('fake-model');
  await page.getByRole('tab', { name: 'Permissions' }).click();
  const shell = page.getByTestId('permission-shell');
  await shell.getByText('Ask', { exact: true }).click();
  await expect(shell).toHaveAttribute('data-mode', 'ask');
  await shell.getByRole('button', { name: 'Add a prefix' }).click();
  await shell.getByRole('textbox', { name: 'Command prefix 1' }).fill('ls');
  await page.getByTestId('permission-write_file').getByText('Deny', { exact: true }).click();
  await expect(page.getByTestId('permission-write_file')).toHaveAttribute('data-mode', 'deny');
  // The other file tools follow their group (allow).
  await expect(page.getByTestId('permission-read_file')).toHaveAttribute('data-mode', 'allow');
  await noSidewaysScroll(page, 1280);
  await shot(page, 'agent-permissions');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${AGENT}$`));
  await expect(page.getByTestId('agent-permission')).toHaveText(['shell: ask (runs without asking: ls)', 'write_file: deny']);
  const created = (await api('GET', `/api/agents/${AGENT}`)) as { permissions: unknown; subagent_max_steps: number };
  expect(created.permissions).toEqual({ shell: { mode: 'ask', allow_prefixes: ['ls'] }, write_file: { mode: 'deny' } });

  // An edit of another field records that field alone: the form does not send back the
  // subagent step limit it shows resolved (10), which the agent never set.
  // (First the tab on a phone-width screen: every row and its choices fit.)
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${own.ui}/agents/${AGENT}/edit`);
  await page.getByRole('tab', { name: 'Permissions' }).click();
  await expect(page.getByTestId('permission-shell')).toHaveAttribute('data-mode', 'ask');
  await expect(page.getByRole('textbox', { name: 'Command prefix 1' })).toHaveValue('ls');
  await expect(page.getByTestId('permission-write_file')).toHaveAttribute('data-mode', 'deny');
  await noSidewaysScroll(page, 390);
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(`${own.ui}/agents/${AGENT}/edit`);
  await page.getByRole('textbox', { name: 'Description' }).fill('Asks before it runs a command.');
  await page.getByRole('button', { name: 'Save' }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${AGENT}$`));
  const versions = (await api('GET', `/api/agents/${AGENT}/versions`)) as { version: number; changed: string[] }[];
  expect(versions.find((v) => v.version === 2)?.changed).toEqual(['description']);
  expect(((await api('GET', `/api/agents/${AGENT}`)) as { permissions: unknown }).permissions).toEqual(created.permissions);

  // A session of it.
  await page.getByRole('button', { name: 'Start a session' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Title').fill('Approvals');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const id = page.url().split('/').pop()!;
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 120_000 });

  // The first message: its shell call waits, its arguments shown, until it is approved.
  await page.getByTestId('composer').fill('Say hello with the shell');
  await page.getByRole('button', { name: 'Send' }).click();
  const first = page.getByTestId('tool-call').filter({ hasText: 'echo approved-output' });
  await expect(first).toHaveAttribute('data-approval', 'waiting', { timeout: 120_000 });
  await expect(first.getByTestId('awaiting-approval')).toHaveText('awaiting approval');
  await expect(first.locator('pre').first()).toHaveText('{\n  "command": "echo approved-output"\n}');
  await expect(page.getByTestId('session-awaiting-approval')).toHaveText('waiting for approval');
  await expect(page.getByTestId('requires-approval')).toContainText('approved or denied: shell');
  await expect(page.getByTestId('run-end').last()).toContainText('Paused for approval');
  const waiting = (await api('GET', `/api/sessions/${id}/tool-confirmations`)) as { call_id: string; tool: string; kind: string; arguments: string }[];
  expect(waiting.map((w) => [w.tool, w.kind, JSON.parse(w.arguments)])).toEqual([['shell', 'sandbox', { command: 'echo approved-output' }]]);
  await shot(page, 'approval-waiting');
  // A phone-width screen: the waiting call and its buttons fit.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${own.ui}/sessions/${id}`);
  await expect(first.getByRole('button', { name: 'Approve', exact: true })).toBeVisible();
  await expect(page.getByTestId('session-awaiting-approval')).toBeVisible();
  await noSidewaysScroll(page, 390);
  await shot(page, 'approval-waiting-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(`${own.ui}/sessions/${id}`);

  await first.getByRole('button', { name: 'Approve', exact: true }).click();
  await expect(first.getByTestId('approval-decision-text')).toHaveText('Allowed by open mode', { timeout: 60_000 });
  await expect(first).toHaveAttribute('data-approval', 'allowed');
  await expect(first.locator('pre').last()).toContainText('approved-output', { timeout: 60_000 });
  await expect(page.getByTestId('agent-message').last()).toContainText('The shell printed approved-output.', { timeout: 60_000 });
  await expect(page.getByTestId('run-end').last()).toContainText('Run finished');
  await expect(page.getByTestId('session-awaiting-approval')).toHaveCount(0);
  await expect(page.getByTestId('requires-approval')).toHaveCount(0);

  // The second: denied, with a message the model reads as the tool's error.
  await page.getByTestId('composer').fill('Now clean the build directory');
  await page.getByRole('button', { name: 'Send' }).click();
  const second = page.getByTestId('tool-call').filter({ hasText: 'rm -rf build' });
  await expect(second).toHaveAttribute('data-approval', 'waiting', { timeout: 120_000 });
  await expect(page.getByTestId('session-awaiting-approval')).toBeVisible();
  await second.getByRole('textbox', { name: /Message/ }).fill('Keep the build, please');
  await second.getByRole('button', { name: 'Deny', exact: true }).click();
  await expect(second.getByTestId('approval-decision-text')).toHaveText('Denied by open mode: Keep the build, please', { timeout: 60_000 });
  await expect(second).toHaveAttribute('data-approval', 'denied');
  await expect(page.getByTestId('agent-message').last()).toContainText('Understood: I left the build alone.', { timeout: 60_000 });
  await expect(page.getByTestId('session-awaiting-approval')).toHaveCount(0);
  await shot(page, 'approval-denied');

  // The third: a command its prefix vouches for runs without asking.
  await page.getByTestId('composer').fill('Now list the root');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('Listed the root.', { timeout: 120_000 });
  const third = page.getByTestId('tool-call').filter({ hasText: 'ls /' });
  await expect(third).not.toHaveAttribute('data-approval');
  await expect(third).toContainText('done');

  // The log: each decision once, by whom, with its message; the denied call never ran, its
  // result is the denial the model read.
  const events = (await api('GET', `/api/sessions/${id}/events?limit=1000`)) as Event[];
  const decisions = events.filter((e) => e.type === 'agent.tool_confirmation').map((e) => [e.payload.decision, e.payload.message ?? null, (e.payload.by as { kind: string }).kind]);
  expect(decisions).toEqual([
    ['allow', null, 'open'],
    ['deny', 'Keep the build, please', 'open'],
  ]);
  const asked = events.filter((e) => e.type === 'agent.tool_use' && e.payload.awaiting_approval === true).map((e) => e.payload.call_id);
  expect(asked).toHaveLength(2);
  const deniedResults = events.filter((e) => e.type === 'agent.tool_result' && e.payload.call_id === asked[1]).map((e) => e.payload.output);
  expect(deniedResults).toEqual(['error: a person denied this call: Keep the build, please']);
  await noSidewaysScroll(page, 1280);
});
