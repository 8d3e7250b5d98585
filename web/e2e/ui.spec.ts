// End to end, against the real server and the scripted fake model: one story, in order, the way
// a person uses the UI. The API key comes last: the first key closes the open deployment.
import { expect, test } from '@playwright/test';
import { readFileSync, writeFileSync } from 'node:fs';
import { capabilityRows, type BackendInfo } from '../src/features/developers/backendCapabilities';
import { MCP_TOOLS } from '../src/features/developers/mcpConnect';
import { setScript, tail } from './harness';
import { shot } from './shots';
import { sha256, tar, tgz } from './tar';

const UI = () => process.env.E2E_UI_URL!;
const API = () => process.env.E2E_API_URL!;
const SLUG = 'e2e-analyst';
const LONG = Array.from({ length: 30 }, (_, i) => `word${i + 1}`).join(' ');

let sessionId = '';
const ADA = { email: 'ada@example.com', password: 'correct horse battery' };

test.describe.configure({ mode: 'serial' });

async function apiGet(p: string) {
  const r = await fetch(`${API()}${p}`);
  expect(r.ok, `${p}: ${r.status}`).toBeTruthy();
  return r.json();
}

const cspViolations: string[] = [];
test.beforeEach(async ({ page }) => {
  cspViolations.length = 0;
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
  });
});

test.afterEach(async ({}, testInfo) => {
  expect(cspViolations, 'Content-Security-Policy violations').toEqual([]);
  if (testInfo.status !== testInfo.expectedStatus) {
    await testInfo.attach('server log', { body: tail(process.env.E2E_SERVER_LOG!, 80), contentType: 'text/plain' });
    console.log(`--- server log (tail) ---\n${tail(process.env.E2E_SERVER_LOG!, 40)}`);
  }
});

test.beforeAll(async () => {
  await setScript(process.env.E2E_FAKE_MODEL_URL!, [
    // Subagents: the lead (offered the researcher as a tool) calls it, or hands over to the closer.
    { when: { system_contains: 'You are the e2e researcher.' }, reply: { text: 'Research says: 3 facts.' } },
    { when: { system_contains: 'You are the e2e closer.' }, reply: { text: 'Closer here, all wrapped up.' } },
    { when: { has_tool: 'e2e-researcher', last_message_role: 'tool', last_tool_result_contains: 'Research says' }, reply: { text: 'The research is in: 3 facts.' } },
    { when: { has_tool: 'e2e-researcher', last_user_contains: 'research', last_message_role: 'user' }, reply: { tool_calls: [{ name: 'e2e-researcher', arguments: { input: 'find facts' } }] } },
    { when: { has_tool: 'transfer_to_e2e-closer', last_user_contains: 'wrap up', last_message_role: 'user' }, reply: { tool_calls: [{ name: 'transfer_to_e2e-closer', arguments: {} }] } },
    // A client tool sent with one turn only: the model calls it when it is offered.
    { when: { last_message_role: 'tool', last_tool_result_contains: 'shipped-42' }, reply: { text: 'Order 42 has shipped.' } },
    { when: { has_tool: 'lookup_order', last_user_contains: 'lookup' }, reply: { tool_calls: [{ name: 'lookup_order', arguments: { order: '42' } }] } },
    // The session's own model and instructions, from the "Start a session" dialog.
    { when: { model: 'e2e-override-model', any_message_contains: 'Speak like a pirate' }, reply: { text: 'Arr, the overrides reached me.' } },
    { when: { last_message_role: 'tool', last_tool_result_contains: 'yes' }, reply: { text: 'Thanks, you said yes.' } },
    // A tool that runs until the test lets it finish, for its live output.
    { when: { last_message_role: 'tool', last_user_contains: 'build' }, reply: { text: 'The build finished.' } },
    { when: { last_user_contains: 'build' }, reply: { tool_calls: [{ name: 'shell', arguments: { command: 'echo compiling-1; while [ ! -e /tmp/e2e-go ]; do sleep 0.1; done; echo compiling-2' } }] } },
    { when: { last_message_role: 'tool', last_user_contains: 'report' }, reply: { text: 'Done: output/report.md is written.' } },
    { when: { last_user_contains: 'report' }, reply: { reasoning: 'The person wants a report file.', tool_calls: [{ name: 'shell', arguments: { command: 'mkdir -p output && printf "# Report\\n\\nAll good.\\n" > output/report.md && ls output' } }] } },
    { when: { last_user_contains: 'question' }, reply: { tool_calls: [{ name: 'ask_user', arguments: { question: 'Proceed?' } }] } },
    { when: { last_user_contains: 'slowly' }, reply: { text: LONG, chunk_delay_ms: 120 } },
    { reply: { text: 'Hello from the fake model.' } },
  ]);
});

test('open mode goes straight in and shows empty states', async ({ page }) => {
  await page.goto(`${UI()}/agents`);
  await expect(page.getByRole('heading', { name: 'Agents' })).toBeVisible();
  await expect(page.getByText('No agents yet')).toBeVisible();
  await expect(page.getByTestId('me-label')).toHaveText('open mode');
  await page.goto(`${UI()}/sessions`);
  await expect(page.getByText('No sessions yet')).toBeVisible();
});

test('create an agent, with validation as the server does it', async ({ page }) => {
  await page.goto(`${UI()}/agents/new`);
  await page.getByLabel('Slug').fill('Not A Slug');
  await page.getByLabel('Name', { exact: false }).first().fill('E2E analyst');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page.getByText(/Lowercase letters, digits and -/).first()).toBeVisible();
  await page.getByLabel('Slug').fill(SLUG);
  await page.getByRole('tab', { name: 'Client tools' }).click();
  await page.getByRole('button', { name: 'Add client tool' }).click();
  await page.getByLabel('Name', { exact: true }).fill('ask_user');
  await page.getByLabel('Description', { exact: true }).fill('Ask the person a question');
  await page.getByText('Deferrable (a question for a person)').click();
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${SLUG}$`));
  await expect(page.getByRole('heading', { name: 'E2E analyst' })).toBeVisible();
  await expect(page.getByText('ask_user (deferrable)')).toBeVisible();
  await expect(page.getByText('client.agents.create(')).toBeVisible();
  await shot(page, 'agent');
  await page.goto(`${UI()}/agents`);
  await expect(page.getByRole('link', { name: 'E2E analyst' })).toBeVisible();
});

test('a stale edit gets the 409 explained and can be re-applied', async ({ page }) => {
  await page.goto(`${UI()}/agents/${SLUG}/edit`);
  await page.getByLabel('Description').fill('Edited in the browser');
  // Meanwhile someone else saves a new version.
  const current = await apiGet(`/api/agents/${SLUG}`);
  const r = await fetch(`${API()}/api/agents/${SLUG}`, { method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ version: current.version, instructions: 'Changed by a script.' }) });
  expect(r.ok).toBeTruthy();
  await page.getByRole('button', { name: 'Save' }).click();
  const conflict = page.getByTestId('conflict');
  await expect(conflict).toContainText(`version ${current.version + 1}`);
  await expect(conflict).toContainText('instructions');
  // The values in conflict, not only the field's name: theirs, and mine beside it.
  await expect(conflict.getByTestId('conflict-values')).toContainText('"Changed by a script."');
  await conflict.getByRole('button', { name: /Re-apply my changes/ }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${SLUG}$`));
  await expect(page.getByText('Edited in the browser', { exact: true })).toBeVisible();
  const after = await apiGet(`/api/agents/${SLUG}`);
  expect(after.version).toBe(current.version + 2);
  expect(after.description).toBe('Edited in the browser');
  expect(after.instructions).toBe('Changed by a script.'); // theirs, kept: I did not touch it
});

test('the memory tab edits the agent memory under its version, and a stale save offers to reload', async ({ page }) => {
  await page.goto(`${UI()}/agents/${SLUG}`);
  await page.getByRole('tab', { name: 'Memory' }).click();
  await expect(page.getByTestId('memory-capability-note')).toBeVisible();
  await expect(page.getByTestId('memory-version')).toContainText('version 0');
  await expect(page.getByText('No memory yet.')).toBeVisible();
  await page.getByLabel('Memory summary').fill('The build listens on port 8123.');
  await page.getByLabel('MEMORY.md').fill('# Memory\n- the build listens on port 8123');
  await page.getByRole('button', { name: 'Save memory' }).click();
  await expect(page.getByTestId('memory-version')).toContainText('version 1');
  const saved = await apiGet(`/api/agents/${SLUG}/memory`);
  expect(saved.version).toBe(1);
  expect(saved.summary).toBe('The build listens on port 8123.');
  expect(saved.memory).toContain('port 8123');
  await shot(page, 'agent-memory');

  // Meanwhile a consolidation (here a script) writes a newer version: the save is refused
  // and nothing of mine is written until I reload.
  const r = await fetch(`${API()}/api/agents/${SLUG}/memory`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ memory: '# Memory\n- written by a session', summary: 'From a session.', version: 1 }) });
  expect(r.status).toBe(200);
  await page.getByLabel('Memory summary').fill('My edit.');
  await page.getByRole('button', { name: 'Save memory' }).click();
  const conflict = page.getByTestId('memory-conflict');
  await expect(conflict).toContainText('Someone changed this memory');
  expect((await apiGet(`/api/agents/${SLUG}/memory`)).summary).toBe('From a session.');
  await conflict.getByRole('button', { name: 'Reload the current memory' }).click();
  await expect(page.getByTestId('memory-conflict')).toHaveCount(0);
  await expect(page.getByLabel('Memory summary')).toHaveValue('From a session.');
  await expect(page.getByTestId('memory-version')).toContainText('version 2');
});

test('create a webhook and see its secret once', async ({ page }) => {
  await page.goto(`${UI()}/webhooks`);
  await page.getByRole('button', { name: 'New webhook' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Name').fill('e2e receiver');
  await dialog.getByLabel('URL').fill(process.env.E2E_WEBHOOK_URL!);
  await dialog.getByRole('button', { name: 'Create webhook' }).click();
  await expect(page.getByTestId('shown-once')).toBeVisible();
  await expect(page.getByTestId('shown-once-value')).not.toBeEmpty();
  await page.reload();
  await expect(page.getByRole('link', { name: 'e2e receiver' })).toBeVisible();
  await expect(page.getByTestId('shown-once')).toHaveCount(0);
});

test('start a session, send a message and watch the answer stream in', async ({ page }) => {
  await page.goto(`${UI()}/agents/${SLUG}`);
  await page.getByRole('button', { name: 'Start a session' }).click();
  await page.getByRole('dialog').getByLabel('Title').fill('E2E session');
  await page.getByRole('dialog').getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  sessionId = page.url().split('/sessions/')[1];
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 90_000 });
  await expect(page.getByTestId('stream-status')).toHaveText('live');
  await page.getByTestId('composer').fill('Please answer slowly');
  await page.getByRole('button', { name: 'Send' }).click();
  // The deltas show before the stored message replaces them.
  await expect(page.getByTestId('streaming-message')).toBeVisible();
  await expect(page.getByTestId('streaming-message')).toContainText('word1');
  await expect(page.getByTestId('agent-message').last()).toContainText('word30', { timeout: 30_000 });
  await expect(page.getByTestId('streaming-message')).toHaveCount(0);
  await expect(page.getByTestId('run-end').last()).toContainText('Run finished');
});

test('a sandbox tool call folds open with its arguments and output, and thinking is folded', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await page.getByTestId('composer').fill('Write the report please');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('Done: output/report.md is written.');
  const call = page.locator('[data-testid="tool-call"][data-tool="shell"]').last();
  await expect(call).toContainText('done');
  await call.getByRole('button').first().click();
  await expect(call).toContainText('Arguments');
  await expect(call).toContainText('report.md');
  const thinking = page.getByRole('button', { name: 'Thinking' }).last();
  await expect(thinking).toHaveAttribute('aria-expanded', 'false');
  await thinking.click();
  await expect(page.getByText('The person wants a report file.')).toBeVisible();
  await page.getByTestId('transcript').evaluate((el) => (el.scrollTop = el.scrollHeight));
  await shot(page, 'session');
});

test('a running tool’s output shows as it is written, then gives way to its result', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await page.getByTestId('composer').fill('Run the build now');
  await page.getByRole('button', { name: 'Send' }).click();
  const call = page.locator('[data-testid="tool-call"][data-tool="shell"]').last();
  // The command waits for /tmp/e2e-go: this is its output while it runs.
  await expect(call.getByTestId('tool-live-output')).toContainText('compiling-1');
  await expect(call).toContainText('running');
  await shot(page, 'tool-live-output');
  const r = await fetch(`${API()}/api/sessions/${sessionId}/exec`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ command: 'touch /tmp/e2e-go' }) });
  expect(r.status).toBe(200);
  await expect(page.getByTestId('agent-message').last()).toContainText('The build finished.');
  await expect(call).toContainText('done');
  await expect(call.getByTestId('tool-live-output')).toHaveCount(0);
  await call.getByRole('button').first().click();
  await expect(call).toContainText('compiling-2');
});

test('answer a deferrable client tool call', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await page.getByTestId('composer').fill('Ask me a question');
  await page.getByRole('button', { name: 'Send' }).click();
  const banner = page.getByTestId('requires-action');
  await expect(banner).toBeVisible();
  await expect(banner).toContainText('Requires action');
  await expect(banner).toContainText('Proceed?');
  await shot(page, 'requires-action');
  await banner.getByLabel('Answer to ask_user').fill('yes');
  await banner.getByRole('button', { name: 'Send answer' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('Thanks, you said yes.');
  await expect(page.getByTestId('requires-action')).toHaveCount(0);
  await expect(page.locator('[data-testid="tool-call"][data-tool="ask_user"]').last()).toContainText('done');
});

test('a client tool for one turn, sent from the composer and answered from the UI', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await expect(page.getByTestId('stream-status')).toHaveText('live');
  await page.getByRole('button', { name: 'Client tools for this turn' }).click();
  const tools = page.getByLabel('Turn client tools (JSON)');
  // Checked as typed: a sandbox tool's name is refused here, as the server would, and Send
  // sends nothing.
  await tools.fill('[{"name": "shell"}]');
  await page.getByTestId('composer').fill('Please lookup order 42');
  await expect(page.getByTestId('turn-tools')).toContainText('sandbox tool');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('turn-tools')).toContainText('sandbox tool');
  await tools.fill(JSON.stringify([{ name: 'lookup_order', description: 'Look an order up', parameters: { type: 'object', properties: { order: { type: 'string' } } }, timeout_seconds: 300 }]));
  // The editor's text has reached the form before Send reads it.
  await expect(page.getByTestId('turn-tools-summary')).toHaveText('Sent with this turn: lookup_order');
  await page.getByRole('button', { name: 'Send' }).click();
  const banner = page.getByTestId('requires-action');
  await expect(banner).toContainText('Waiting for a client tool');
  await expect(banner).toContainText('lookup_order');
  await banner.getByLabel('Answer to lookup_order').fill('shipped-42');
  await banner.getByRole('button', { name: 'Send answer' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('Order 42 has shipped.');
  await expect(page.getByTestId('requires-action')).toHaveCount(0);
  // The tool went with that turn's request, and the agent itself does not have it.
  const agent = await apiGet(`/api/agents/${SLUG}`);
  expect((agent.client_tools as { name: string }[]).map((t) => t.name)).toEqual(['ask_user']);
});

test('a reconnect in the middle of a stream loses and repeats nothing', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await expect(page.getByTestId('stream-status')).toHaveText('live');
  const ends = async () => ((await apiGet(`/api/sessions/${sessionId}/events?limit=1000`)) as { type: string }[]).filter((e) => e.type === 'session.status_idle').length;
  const before = await ends();
  await page.getByTestId('composer').fill('Once more, slowly');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('streaming-message')).toBeVisible();
  for (let i = 0; i < 3; i++) {
    await page.getByTestId('reconnect').click();
    await page.waitForTimeout(400);
  }
  await expect.poll(ends, { timeout: 30_000 }).toBe(before + 1);
  await expect(page.getByTestId('streaming-message')).toHaveCount(0);
  await expect(page.getByTestId('stream-status')).toHaveText('live');
  const stored: { seq: number }[] = await apiGet(`/api/sessions/${sessionId}/events?limit=1000`);
  await page.getByRole('tab', { name: /Raw events/ }).click();
  await expect(page).toHaveURL(new RegExp(`/sessions/${sessionId}/events$`));
  const last = stored[stored.length - 1].seq;
  await expect(page.getByTestId('raw-summary')).toHaveText(`${stored.length} stored events · last seq ${last}`);
  await expect(page.getByTestId('event-count')).toHaveText(String(stored.length));
  // The answer that streamed across the reconnects is there whole, once.
  await page.getByRole('tab', { name: 'Transcript' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('word1 word2');
  await expect(page.getByTestId('agent-message').last()).toContainText('word30');
});

test('upload a file, preview it and download it', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}/files`);
  // Drag and drop…
  const dt = await page.evaluateHandle(() => {
    const d = new DataTransfer();
    d.items.add(new File(['# Field notes\n\nAll *good*.\n'], 'notes.md', { type: 'text/markdown' }));
    return d;
  });
  await page.getByTestId('dropzone').dispatchEvent('drop', { dataTransfer: dt });
  // …and the file picker.
  const chooser = page.waitForEvent('filechooser');
  await page.getByRole('button', { name: 'Upload files' }).click();
  await (await chooser).setFiles({ name: 'data.txt', mimeType: 'text/plain', buffer: Buffer.from('plain text') });
  await page.locator('[data-testid="file-entry"][data-path="uploads"]').click();
  await page.locator('[data-testid="file-entry"][data-path="uploads/data.txt"]').click();
  await expect(page.getByTestId('text-preview')).toHaveText('plain text');
  await page.locator('[data-testid="file-entry"][data-path="uploads/notes.md"]').click();
  await expect(page.getByTestId('markdown-preview').getByRole('heading', { name: 'Field notes' })).toBeVisible();
  await shot(page, 'files');
  const download = page.waitForEvent('download');
  await page.getByTestId('download').click();
  const file = await (await download).path();
  expect(readFileSync(file, 'utf8')).toBe('# Field notes\n\nAll *good*.\n');
  // The upload is in the transcript too.
  await page.getByRole('tab', { name: 'Transcript' }).click();
  await expect(page.getByText('File uploaded: uploads/notes.md')).toBeVisible();
});

// The terminal has a spec of its own (terminal.spec.ts), run in both modes of the harness.

test('take a snapshot and fork a new session from it', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}/snapshots`);
  await expect(page.getByText('No snapshots yet')).toBeVisible();
  await page.getByLabel('Label').fill('with the notes');
  await page.getByRole('button', { name: 'Take snapshot' }).click();
  await expect(page.getByRole('cell', { name: 'with the notes' })).toBeVisible({ timeout: 90_000 });
  await page.getByRole('button', { name: 'Fork into a new session' }).click();
  await expect(page).not.toHaveURL(new RegExp(sessionId));
  await expect(page.getByRole('heading', { name: 'E2E session (fork)' })).toBeVisible();
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 90_000 });
  await page.getByRole('tab', { name: 'Files' }).click();
  await page.locator('[data-testid="file-entry"][data-path="uploads"]').click();
  await expect(page.locator('[data-testid="file-entry"][data-path="uploads/notes.md"]')).toBeVisible();
  // Stop the fork: one running sandbox at a time is enough on CI.
  await page.getByRole('button', { name: 'Stop' }).click();
  await expect(page.getByTestId('session-status').first()).toHaveText('stopped', { timeout: 60_000 });
});

test('browse a stopped session’s files', async ({ page }) => {
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await page.getByRole('button', { name: 'Stop' }).click();
  await expect(page.getByTestId('session-status').first()).toHaveText('stopped', { timeout: 60_000 });
  await page.getByRole('tab', { name: 'Files' }).click();
  await expect(page.getByText('The sandbox is not running')).toBeVisible();
  await page.locator('[data-testid="file-entry"][data-path="uploads"]').click();
  await page.locator('[data-testid="file-entry"][data-path="uploads/notes.md"]').click();
  await expect(page.getByTestId('markdown-preview')).toContainText('Field notes');
  const detail = await apiGet(`/api/sessions/${sessionId}`);
  expect(detail.status).toBe('stopped'); // reading files booted nothing
});

test('read the webhook’s delivery log', async ({ page }) => {
  await page.goto(`${UI()}/webhooks`);
  await page.getByRole('link', { name: 'e2e receiver' }).click();
  await expect(page.getByTestId('delivery').first()).toBeVisible({ timeout: 30_000 });
  await page.getByRole('textbox', { name: 'Filter deliveries by status' }).click();
  await page.getByRole('option', { name: 'delivered' }).click();
  await expect(page.getByTestId('delivery').first()).toContainText('delivered', { timeout: 30_000 });
  await page.getByTestId('delivery').first().getByRole('button', { name: 'Attempts' }).click();
  await expect(page.getByTestId('attempts')).toContainText('200');
  await shot(page, 'webhook');
});

test('a skill bundle: create it, push by drag and drop, see a hostile archive refused, retire, delete', async ({ page }) => {
  const BUNDLE = 'e2e-skills';
  await page.goto(`${UI()}/sessions`);
  await page.getByRole('link', { name: 'Skill bundles' }).click();
  await expect(page.getByRole('heading', { name: 'Skill bundles' })).toBeVisible();
  await expect(page.getByText('No skill bundles yet')).toBeVisible();
  await expect(page.getByTestId('push-from-code')).toContainText('-F file=@bundle.tgz');
  await expect(page.getByTestId('push-from-code')).toContainText('client.skill_bundles.push(');
  // The slug is checked as the server checks it, before anything is sent.
  await page.getByLabel('Slug').fill('Not_A_Slug');
  await expect(page.getByText(/Lowercase letters, digits and -/)).toBeVisible();
  await page.getByLabel('Slug').fill('0195f3a2-7b1c-7d00-8a3e-0123456789ab');
  await expect(page.getByText(/shaped like a UUID/)).toBeVisible();
  await page.getByLabel('Slug').fill(BUNDLE);
  await page.getByLabel('Description').fill('Skills the e2e suite pushes');
  await page.getByRole('button', { name: 'Create bundle' }).click();
  await expect(page).toHaveURL(new RegExp(`/skill-bundles/${BUNDLE}$`));
  await expect(page.getByText(/nothing pushed yet/)).toBeVisible();
  await expect(page.getByText('No versions yet')).toBeVisible();

  // A valid tree, dropped on the page as a file from the desktop would be.
  const good = tgz([
    { name: 'skills/', type: 'dir' },
    { name: 'skills/report/', type: 'dir' },
    { name: 'skills/report/SKILL.md', content: '---\nname: report\ndescription: Write a report\n---\nWrite output/report.md.\n' },
    { name: 'skills/report/scripts/run.sh', content: '#!/bin/sh\necho ok\n' },
    { name: 'skills/triage/SKILL.md', content: '---\nname: triage\ndescription: Sort issues\n---\nSort them.\n' },
  ]);
  const dt = await page.evaluateHandle(({ data }) => {
    const t = new DataTransfer();
    t.items.add(new File([new Uint8Array(data)], 'bundle.tgz', { type: 'application/gzip' }));
    return t;
  }, { data: [...good] });
  const zone = page.getByTestId('push-zone');
  await zone.dispatchEvent('dragenter', { dataTransfer: dt });
  await expect(zone).toContainText('Drop to push it as the next version');
  await zone.dispatchEvent('drop', { dataTransfer: dt });
  const rows = page.getByTestId('bundle-version');
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toContainText('v1');
  await expect(rows.first()).toContainText('latest');
  await expect(rows.first().getByTestId('bundle-skill')).toHaveText(['skills/report', 'skills/triage']);
  await expect(rows.first()).toContainText(sha256(good).slice(0, 12));
  await expect(rows.first().getByRole('cell').nth(2)).toHaveText('3');
  await expect(page.getByText(/latest version 1/)).toBeVisible();

  // A hostile archive, picked with the file button: refused whole, with the member and the rule.
  const hostile = tar([{ name: 'SKILL.md', content: 'fine\n' }, { name: '../x', content: 'escape\n' }]);
  await page.getByLabel('Archive to push').setInputFiles({ name: 'hostile.tar', mimeType: 'application/x-tar', buffer: hostile });
  const refusal = page.getByTestId('push-error');
  await expect(refusal).toContainText('The archive was refused');
  await expect(refusal).toContainText('../x');
  await expect(refusal).toContainText("'..'");
  await expect(rows).toHaveCount(1);
  expect((await apiGet(`/api/skill-bundles/${BUNDLE}/versions`)).map((v: { version: number }) => v.version)).toEqual([1]);
  // And a symbolic link, dropped this time.
  const link = await page.evaluateHandle(({ data }) => {
    const t = new DataTransfer();
    t.items.add(new File([new Uint8Array(data)], 'link.tgz'));
    return t;
  }, { data: [...tgz([{ name: 'SKILL.md', content: 'x\n' }, { name: 'etc', type: 'symlink', linkname: '/etc' }])] });
  await zone.dispatchEvent('drop', { dataTransfer: link });
  await expect(refusal).toContainText('symbolic link');
  await expect(rows).toHaveCount(1);
  await shot(page, 'skill-bundles');

  // Retire the version: its number stays taken, and nothing is left to boot from.
  await rows.first().getByRole('button', { name: 'Retire' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Retire' }).click();
  await expect(page.getByText('No versions yet')).toBeVisible();
  expect((await apiGet(`/api/skill-bundles/${BUNDLE}`)).latest_version).toBeNull();

  // An agent's skills source names the bundle: the delete is refused, naming the agent.
  const created = await fetch(`${API()}/api/agents`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ slug: 'e2e-bundled', name: 'Bundled', skills_source: { kind: 'bundle', bundle: BUNDLE } }) });
  expect(created.status, await created.clone().text()).toBe(201);
  // Its form links the skills source to the bundle's page.
  await page.goto(`${UI()}/agents/e2e-bundled/edit`);
  await page.getByRole('tab', { name: 'Subagents & skills' }).click();
  await expect(page.getByRole('textbox', { name: 'Use a skill bundle' })).toHaveValue(BUNDLE);
  await expect(page.getByTestId('skills-not-announced')).toContainText('not told about them');
  await page.getByRole('link', { name: BUNDLE }).click();
  await expect(page).toHaveURL(new RegExp(`/skill-bundles/${BUNDLE}$`));
  await page.getByRole('button', { name: 'Delete bundle' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  const alert = page.getByRole('alert').filter({ hasText: 'The bundle was not deleted' });
  await expect(alert).toBeVisible();
  await expect(alert).toContainText('e2e-bundled');
  const agent = await created.json();
  const patched = await fetch(`${API()}/api/agents/e2e-bundled`, { method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ version: agent.version, skills_source: null }) });
  expect(patched.ok, await patched.clone().text()).toBeTruthy();
  expect((await fetch(`${API()}/api/agents/e2e-bundled`, { method: 'DELETE' })).ok).toBeTruthy();
  await page.getByRole('button', { name: 'Delete bundle' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await expect(page).toHaveURL(new RegExp('/skill-bundles$'));
  await expect(page.getByText('No skill bundles yet')).toBeVisible();
});

test('a session shows the skills its boot staged from its agent’s bundle', async ({ page }) => {
  const post = (p: string, body: unknown) => fetch(`${API()}${p}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  expect((await post('/api/skill-bundles', { slug: 'e2e-staged' })).status).toBe(201);
  const form = new FormData();
  const archive = tgz([
    { name: 'report/SKILL.md', content: '---\nname: report\ndescription: Write a report\n---\n' },
    { name: 'triage/SKILL.md', content: '# no front matter\n' },
  ]);
  form.append('file', new Blob([new Uint8Array(archive)]), 'bundle.tar.gz');
  const pushed = await fetch(`${API()}/api/skill-bundles/e2e-staged/versions`, { method: 'POST', body: form });
  expect(pushed.status, await pushed.clone().text()).toBe(201);
  const agent = await post('/api/agents', { slug: 'e2e-skilled', name: 'Skilled', capabilities: ['shell', 'skills'], skills_source: { kind: 'bundle', bundle: 'e2e-staged' } });
  expect(agent.status, await agent.clone().text()).toBe(201);
  const created = await post('/api/sessions', { agent_id: 'e2e-skilled', title: 'E2E skills' });
  expect(created.status).toBe(202);
  const id = (await created.json()).id as string;
  await expect.poll(async () => (await apiGet(`/api/sessions/${id}`)).status, { timeout: 90_000 }).toBe('running');

  await page.goto(`${UI()}/sessions/${id}/skills`);
  const panel = page.getByTestId('session-skills');
  await expect(panel).toContainText("skill bundle 'e2e-staged' version 1");
  await expect(panel).toContainText('loaded on demand (load_skill), announced to the model');
  await expect(panel.getByRole('row')).toHaveCount(3);
  await expect(panel.getByRole('row').nth(1)).toContainText('reportWrite a report.agents/report');
  await expect(panel.getByRole('row').nth(2)).toContainText('triageNo description provided..agents/triage');
  // Gone again: the pages after this one count the suite's sessions.
  expect((await fetch(`${API()}/api/sessions/${id}`, { method: 'DELETE' })).ok).toBeTruthy();
});

test('a background process: start it, read its output, kill it and see how it ended', async ({ page }) => {
  // A session of its own, so this runs alone too (-g); deleted at the end, as the pages after
  // this one count the suite's sessions.
  const post = (p: string, body: unknown) => fetch(`${API()}${p}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const agent = await post('/api/agents', { slug: 'e2e-processes', name: 'Processes', capabilities: ['shell'] });
  expect(agent.status, await agent.clone().text()).toBe(201);
  const created = await post('/api/sessions', { agent_id: 'e2e-processes', title: 'E2E processes' });
  expect(created.status).toBe(202);
  const id = (await created.json()).id as string;
  try {
    await expect.poll(async () => (await apiGet(`/api/sessions/${id}`)).status, { timeout: 90_000 }).toBe('running');
    await page.goto(`${UI()}/sessions/${id}`);
    await page.getByRole('tab', { name: 'Processes' }).click();
    await expect(page).toHaveURL(new RegExp(`/sessions/${id}/processes$`));
    await expect(page.getByText('No background processes')).toBeVisible();
    await page.getByRole('textbox', { name: 'Command' }).fill('echo hello-proc; sleep 600');
    await page.getByRole('button', { name: 'Start process' }).click();
    const row = page.getByTestId('process-row').filter({ hasText: 'echo hello-proc; sleep 600' });
    await expect(row.getByTestId('process-status')).toHaveText('running');
    const procId = (await row.getByRole('button', { name: /^Show the output of / }).textContent())!;
    expect(procId).toMatch(/^proc_/);
    // Started, it is shown; opened again from the list, the same.
    await row.getByRole('button', { name: `Show the output of ${procId}` }).click();
    await expect(page.getByRole('region', { name: `Standard output of ${procId}` })).toContainText('hello-proc');
    await shot(page, 'processes');
    await page.setViewportSize({ width: 390, height: 844 });
    await expect(row.getByRole('button', { name: `Kill ${procId}` })).toBeVisible();
    await shot(page, 'processes-phone');
    await page.setViewportSize({ width: 1280, height: 800 });
    await row.getByRole('button', { name: `Kill ${procId}` }).click();
    await expect(page.getByTestId('process-row')).toHaveCount(0);
    const ended = page.getByRole('region', { name: `Output of ${procId}` });
    await expect(ended.getByTestId('process-ended')).toContainText('Killed and removed');
    await expect(ended.getByTestId('process-status')).toHaveText('exited');
    await expect(ended.getByRole('region', { name: `Standard output of ${procId}` })).toContainText('hello-proc');
    expect((await fetch(`${API()}/api/sessions/${id}/processes/${procId}`)).status).toBe(404);
  } finally {
    expect((await fetch(`${API()}/api/sessions/${id}`, { method: 'DELETE' })).ok).toBeTruthy();
  }
});

test('an environment: create it with packages, see its build fail naming the manager, read the log, edit, archive, delete', async ({ page }) => {
  await page.goto(`${UI()}/sessions`);
  await page.getByRole('link', { name: 'Environments' }).click();
  await expect(page.getByRole('heading', { name: 'Environments' })).toBeVisible();
  await expect(page.getByText('No environments yet')).toBeVisible();
  await page.getByLabel('Name').fill('e2e-env');
  // Entries are checked as the server checks them, before anything is sent.
  await page.getByLabel('npm packages').fill('-g');
  await expect(page.getByText(/options are not accepted/)).toBeVisible();
  // The test image has no npm: the build fails, saying which manager and why.
  await page.getByLabel('npm packages').fill('express@4.18.0');
  await page.getByRole('button', { name: 'Create environment' }).click();
  await expect(page).toHaveURL(/\/environments\/[0-9a-f-]{36}$/);
  await expect(page.getByTestId('build-summary')).toContainText('has no npm', { timeout: 120_000 });
  await expect(page.getByTestId('build-status')).toHaveText('failed');
  await expect(page.getByTestId('build-log')).toContainText('manager=npm');
  await shot(page, 'environment');
  // Without packages there is nothing to build.
  await page.getByLabel('npm packages').fill('');
  await page.getByRole('button', { name: 'Save configuration' }).click();
  await expect(page.getByTestId('build-status')).toHaveText('none');
  await expect(page.getByText('Nothing to build: no packages.')).toBeVisible();
  // A session created in it names it, and links to it.
  const envUrl = page.url();
  const post = (p: string, body: unknown) => fetch(`${API()}${p}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  expect((await post('/api/agents', { slug: 'e2e-env-agent', name: 'Env agent' })).status).toBe(201);
  const created = await post('/api/sessions', { agent_id: 'e2e-env-agent', environment_id: 'e2e-env', title: 'E2E environment' });
  expect(created.status, await created.clone().text()).toBe(202);
  const sessionId = (await created.json()).id as string;
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await expect(page.getByTestId('session-environment')).toHaveText('e2e-env');
  await page.getByTestId('session-environment').click();
  await expect(page).toHaveURL(envUrl);
  // The sessions list says it too, on the session's row only.
  await page.goto(`${UI()}/sessions`);
  const row = page.getByRole('row').filter({ hasText: 'E2E environment' });
  await expect(row.getByTestId('session-row-environment')).toHaveText('e2e-env');
  await expect(page.getByTestId('session-row-environment')).toHaveCount(1);
  await row.getByTestId('session-row-environment').click();
  await expect(page).toHaveURL(envUrl);
  // And the environment lists its sessions: the list filtered to it, here the one.
  await page.getByTestId('environment-sessions').click();
  await expect(page).toHaveURL(/\/sessions\?environment=e2e-env$/);
  await expect(page.getByTestId('sessions-total')).toHaveText('1 session');
  await expect(page.getByRole('row').filter({ hasText: 'E2E environment' })).toHaveCount(1);
  await page.goto(envUrl);
  // Gone again (a session in it keeps it from being deleted; the pages after this one count
  // the suite's sessions and agents).
  expect((await fetch(`${API()}/api/sessions/${sessionId}`, { method: 'DELETE' })).ok).toBeTruthy();
  expect((await fetch(`${API()}/api/agents/e2e-env-agent`, { method: 'DELETE' })).ok).toBeTruthy();
  // Archived: read-only, and hidden from the list unless asked.
  await page.getByRole('button', { name: 'Archive' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Archive' }).click();
  await expect(page.getByText('archived', { exact: true })).toBeVisible();
  await expect(page.getByRole('button', { name: 'Save configuration' })).toBeDisabled();
  await page.getByRole('link', { name: 'Environments' }).click();
  await expect(page.getByText('No environments yet')).toBeVisible();
  await page.getByText('Show archived').click();
  await page.getByRole('link', { name: 'e2e-env' }).click();
  await page.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await expect(page).toHaveURL(/\/environments$/);
  await page.getByText('Show archived').click();
  await expect(page.getByText('No environments yet')).toBeVisible();
});

test('start a session with overrides from the sessions list, and open a port preview', async ({ page, context }) => {
  // An agent that exposes a port (made through the API: the agent form is covered above).
  const r = await fetch(`${API()}/api/agents`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ slug: 'e2e-web', name: 'E2E web', exposed_ports: [8080] }) });
  expect(r.status, await r.clone().text()).toBe(201);
  await page.goto(`${UI()}/sessions`);
  await page.getByRole('button', { name: 'Start a session' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('textbox', { name: 'Agent', exact: true }).click();
  await page.getByRole('option', { name: 'E2E web (e2e-web)' }).click();
  await dialog.getByLabel('Title').fill('E2E overrides');
  await dialog.getByLabel('First prompt').fill('Hello there');
  await dialog.getByRole('button', { name: /Advanced/ }).click();
  await dialog.getByRole('textbox', { name: 'Model', exact: true }).fill('e2e-override-model');
  await dialog.getByText('Replace the agent’s instructions').click();
  await dialog.getByLabel('Instructions override').fill('Speak like a pirate.');
  await dialog.getByRole('button', { name: 'Add metadata' }).click();
  await dialog.getByLabel('Metadata key 1').fill('ticket');
  await dialog.getByLabel('Metadata value 1').fill('42');
  // Checked as the server checks, next to the field…
  await dialog.getByRole('button', { name: 'Bind a secret' }).click();
  await dialog.getByRole('textbox', { name: 'Secret 1', exact: true }).fill('NOPE');
  await dialog.getByLabel('Environment variable 1').fill('1BAD');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(dialog.getByLabel('Environment variable 1')).toHaveAccessibleDescription('Letters, digits and _, not starting with a digit.');
  // …and the server's 422 lands on the binding that names the missing secret.
  await dialog.getByLabel('Environment variable 1').fill('TOKEN');
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(dialog.getByRole('textbox', { name: 'Secret 1', exact: true })).toHaveAccessibleDescription(/no secret named 'NOPE'/);
  await dialog.getByRole('button', { name: 'Remove binding 1' }).click();
  await dialog.getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  const id = page.url().split('/sessions/')[1];
  const detail = await apiGet(`/api/sessions/${id}`);
  expect(detail.model).toBe('e2e-override-model');
  expect(detail.metadata).toEqual({ ticket: 42 });
  expect(detail.title).toBe('E2E overrides');
  // The fake model answers so only to that model with those instructions.
  await expect(page.getByTestId('agent-message').last()).toContainText('Arr, the overrides reached me.', { timeout: 90_000 });

  // A web server in the sandbox, and its preview in a new tab.
  const exec = await fetch(`${API()}/api/sessions/${id}/exec`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ command: 'mkdir -p site && echo hi > site/hello.txt && (nohup python3 -m http.server 8080 >/dev/null 2>&1 &)' }),
  });
  expect(exec.ok, await exec.clone().text()).toBeTruthy();
  expect((await exec.json()).exit_code).toBe(0);
  const { url } = await apiGet(`/api/sessions/${id}/ports/8080`);
  await expect.poll(async () => (await fetch(url).catch(() => null))?.status ?? 0, { timeout: 30_000 }).toBe(200);
  await page.getByRole('tab', { name: 'Ports' }).click();
  const popup = context.waitForEvent('page');
  await page.getByRole('button', { name: 'Open port 8080' }).click();
  const preview = await popup;
  await preview.waitForLoadState();
  await expect(preview.locator('body')).toContainText('Directory listing');
  await expect(preview.locator('body')).toContainText('site/');
  expect(new URL(preview.url()).pathname).toBe(new URL(url).pathname);
  expect(await preview.evaluate(() => window.opener === null && document.referrer === '')).toBe(true);
  await preview.close();
  await expect(page.getByTestId('preview-link')).toHaveAttribute('rel', 'noopener noreferrer');
  // Gone again, so the list below counts the story's two sessions.
  const del = await fetch(`${API()}/api/sessions/${id}`, { method: 'DELETE' });
  expect(del.ok).toBeTruthy();
});

test('subagents: chosen in the form; a subagent’s steps fold under its call, and a handoff says who holds the conversation', async ({ page }) => {
  for (const [slug, instructions] of [
    ['e2e-researcher', 'You are the e2e researcher.'],
    ['e2e-closer', 'You are the e2e closer.'],
  ]) {
    const r = await fetch(`${API()}/api/agents`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ slug, name: slug, instructions }) });
    expect(r.status).toBe(201);
  }
  await page.goto(`${UI()}/agents/new`);
  await page.getByLabel('Slug').fill('e2e-lead');
  await page.getByLabel('Name', { exact: false }).first().fill('E2E lead');
  await page.getByRole('tab', { name: 'Subagents & skills' }).click();
  const add = page.getByRole('button', { name: 'Add a subagent' });
  await add.click();
  await add.click();
  await page.getByLabel('Subagent', { exact: true }).nth(0).click();
  await page.getByRole('option', { name: /e2e-researcher/ }).click();
  await page.getByLabel('Subagent', { exact: true }).nth(1).click();
  await page.getByRole('option', { name: /e2e-closer/ }).click();
  await page.getByLabel('Mode', { exact: true }).nth(1).click();
  await page.getByRole('option', { name: 'handoff' }).click();
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page).toHaveURL(/\/agents\/e2e-lead$/);
  await expect(page.getByText('e2e-researcher (tool), e2e-closer (handoff)')).toBeVisible();
  const saved = await apiGet('/api/agents/e2e-lead');
  expect(saved.subagents).toEqual([
    { agent: 'e2e-researcher', mode: 'tool', tool_name: null, description: '' },
    { agent: 'e2e-closer', mode: 'handoff', tool_name: null, description: '' },
  ]);

  await page.getByRole('button', { name: 'Start a session' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Start session' }).click();
  await expect(page).toHaveURL(/\/sessions\/[0-9a-f-]{36}$/);
  await expect(page.getByTestId('session-status').first()).toHaveText('running', { timeout: 90_000 });
  await page.getByTestId('composer').fill('Please research it');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('agent-message').last()).toContainText('The research is in: 3 facts.');
  const call = page.locator('[data-testid="tool-call"][data-tool="e2e-researcher"]').last();
  await expect(call).toContainText('subagent · 1 steps');
  await call.getByRole('button').first().click();
  await expect(call.getByTestId('subagent-steps')).toContainText('Research says: 3 facts.');
  await expect(page.getByTestId('conversation-agent')).toHaveCount(0);

  await page.getByTestId('composer').fill('Time to wrap up');
  await page.getByRole('button', { name: 'Send' }).click();
  await expect(page.getByTestId('handoff')).toContainText('e2e-lead → e2e-closer');
  await expect(page.getByTestId('agent-message').last()).toContainText('Closer here, all wrapped up.');
  await expect(page.getByTestId('conversation-agent')).toHaveText('talking to e2e-closer');
  // Leave the deployment as the later tests expect it (they count sessions).
  const id = page.url().split('/sessions/')[1];
  const r = await fetch(`${API()}/api/sessions/${id}`, { method: 'DELETE' });
  expect(r.ok).toBeTruthy();
});

test('the main pages, for the README', async ({ page }) => {
  await page.goto(`${UI()}/sessions`);
  await expect(page.getByRole('link', { name: 'E2E session', exact: true })).toBeVisible();
  await expect(page.getByTestId('sessions-total')).toHaveText('2 sessions');
  await shot(page, 'sessions');
  // Filters live in the URL, so a filtered list can be bookmarked.
  await page.goto(`${UI()}/sessions?agent=${SLUG}&status=stopped`);
  await expect(page.getByRole('link', { name: 'E2E session', exact: true })).toBeVisible();
  await page.goto(`${UI()}/sessions?status=error`);
  await expect(page.getByText('No session matches these filters')).toBeVisible();
  await page.goto(`${UI()}/agents`);
  await expect(page.getByRole('link', { name: 'E2E analyst' })).toBeVisible();
  await shot(page, 'agents');
  await page.goto(`${UI()}/developers`);
  await expect(page.getByText('pip install sandbox-agents')).toBeVisible();
  await expect(page.getByText('session.status_idle').first()).toBeVisible();
  await shot(page, 'developers');
  await page.goto(`${UI()}/models`);
  await expect(page.getByRole('cell', { name: 'fake-model' }).first()).toBeVisible();
  // Dark from the system.
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await expect(page.getByTestId('agent-message').first()).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.getAttribute('data-mantine-color-scheme'))).toBe('dark');
  await shot(page, 'session-dark');
  // A phone-width screen: the navigation folds behind a burger and nothing overflows sideways.
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${UI()}/sessions`);
  await expect(page.getByRole('link', { name: 'E2E session', exact: true })).toBeVisible();
  // Cards, not a table scrolled sideways: each shows its status whole.
  await expect(page.getByRole('table')).toHaveCount(0);
  await expect(page.getByTestId('session-card').filter({ hasText: 'E2E session' }).first()).toContainText(/running|stopped/);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await shot(page, 'sessions-phone');
  await page.goto(`${UI()}/sessions/${sessionId}`);
  await expect(page.getByTestId('agent-message').first()).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await shot(page, 'session-phone');
  await page.goto(`${UI()}/sessions`);
  await page.getByRole('button', { name: 'Toggle navigation' }).click();
  await page.getByRole('link', { name: 'Agents' }).click();
  await expect(page.getByRole('heading', { name: 'Agents' })).toBeVisible();
  await page.setViewportSize({ width: 1280, height: 800 });
});

test('the Developers page shows the sandbox backend the server runs and what it declares it can do', async ({ page }) => {
  const backends: BackendInfo[] = await apiGet('/api/backends');
  // This server runs the Docker backend, as the default.
  expect(backends.filter((b) => b.default).map((b) => b.name)).toEqual(['docker']);
  await page.goto(`${UI()}/developers`);
  const card = page.getByTestId('backend-card');
  await expect(card.getByRole('heading', { name: 'Sandbox backend' })).toBeVisible();
  await expect(card.getByTestId('backend')).toHaveCount(backends.length);
  for (const b of backends) {
    const shown = card.locator(`[data-backend="${b.name}"]`);
    await expect(shown.getByTestId('backend-name')).toHaveText(b.name);
    await expect(shown.getByText('default', { exact: true })).toHaveCount(b.default ? 1 : 0);
    // Every field the server declares has its row, with its mark and words.
    const rows = capabilityRows(b.capabilities);
    expect(rows.map((r) => r.field).sort()).toEqual(Object.keys(b.capabilities).sort());
    await expect(shown.getByRole('row')).toHaveCount(rows.length);
    for (const row of rows) {
      const tr = shown.getByTestId(`capability-${row.field}`);
      await expect(tr).toHaveAttribute('data-mark', row.mark);
      await expect(tr).toContainText(row.label);
      if (row.mark !== 'value') await expect(tr.getByLabel(row.mark, { exact: true })).toBeVisible();
    }
  }
  // What the Docker backend with the daemon declares, in the card's words.
  const docker = card.locator('[data-backend="docker"]');
  // Docker offers no runtime class to choose; the card says so and how one is offered.
  expect(backends.find((b) => b.name === 'docker')!.runtime_classes).toEqual([]);
  await expect(docker.getByTestId('backend-runtime-classes')).toContainText('none (an operator lists them with --kubernetes-runtime-classes)');
  const declared = backends.find((b) => b.name === 'docker')!.capabilities;
  await expect(docker.getByTestId('capability-snapshots')).toContainText(declared.snapshots === 'image' ? 'Snapshots keep installed packages' : 'Snapshots keep the workspace only');
  await expect(docker.getByTestId('capability-daemon')).toHaveAttribute('data-mark', declared.daemon ? 'yes' : 'no');
  await expect(docker.getByTestId('capability-daemon')).toContainText('Terminals and background processes');
});

/** One JSON-RPC call to an MCP endpoint; the answer comes as JSON or as an SSE stream of one message. */
async function mcpCall(url: string, method: string, params: unknown, headers: Record<string, string> = {}): Promise<any> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await r.text();
  expect(r.ok, `${method} at ${url}: ${r.status} ${text}`).toBeTruthy();
  const messages = (r.headers.get('content-type') ?? '').includes('text/event-stream')
    ? text.split('\n').filter((l) => l.startsWith('data:') && l.slice(5).trim()).map((l) => JSON.parse(l.slice(5)))
    : [JSON.parse(text)];
  const answer = messages.find((m) => m.id === 1);
  expect(answer?.result, `${method}: ${text}`).toBeTruthy();
  return answer.result;
}

test('the Developers page shows how an MCP client connects, at a URL the server answers MCP on', async ({ page }) => {
  await page.goto(`${UI()}/developers`);
  const card = page.getByTestId('mcp-card');
  await expect(card.getByRole('heading', { name: 'Connect an MCP client' })).toBeVisible();
  // The deployment's own origin, as the browser reached it.
  const url = `${new URL(UI()).origin}/mcp`;
  await expect(card.getByTestId('mcp-url')).toHaveText(url);
  // Open mode: no key to send, so the command names none; the project as the API reads it.
  const [project] = await apiGet('/api/projects');
  const claude = card.getByText('claude mcp add');
  await expect(claude).toContainText(`claude mcp add --transport http sandbox-agents ${url}`);
  await expect(claude).toContainText(`--header "X-Project: ${project.slug}"`);
  await expect(claude).not.toContainText('Authorization');
  await expect(card.getByText('.cursor/mcp.json')).toBeVisible();
  await expect(card.getByText(`"url": "${url}"`)).toBeVisible();
  await expect(card.getByText('from mcp import Client')).toBeVisible();
  for (const t of MCP_TOOLS) await expect(card.getByRole('listitem').filter({ hasText: `${t.name}:` })).toHaveCount(1);
  await card.scrollIntoViewIfNeeded();
  await shot(page, 'developers-mcp');
  // The page only shows the way; the server at that URL speaks MCP and lists the very tools shown.
  const init = await mcpCall(url, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e', version: '0' } });
  expect(init.capabilities.tools).toBeTruthy();
  const listed = await mcpCall(url, 'tools/list', {});
  expect(listed.tools.map((t: { name: string }) => t.name)).toEqual(MCP_TOOLS.map((t) => t.name));
  // A tool called with the headers the snippets give answers as the API does.
  const agents = await mcpCall(url, 'tools/call', { name: 'list_agents', arguments: {} }, { 'X-Project': project.slug });
  expect(agents.isError ?? false, JSON.stringify(agents)).toBe(false);
  expect(JSON.parse(agents.content[0].text).map((a: { slug: string }) => a.slug)).toEqual((await apiGet('/api/agents')).map((a: { slug: string }) => a.slug));
});

test('the Developers page shows how the E2B SDKs connect, at URLs the server answers E2B on', async ({ page }) => {
  await page.goto(`${UI()}/developers`);
  const card = page.getByTestId('e2b-card');
  await expect(card.getByRole('heading', { name: 'E2B SDKs' })).toBeVisible();
  // The deployment's own origin, as the browser reached it, in the three variables.
  const origin = new URL(UI()).origin;
  await expect(card.getByTestId('e2b-api-url')).toHaveText(`${origin}/e2b`);
  await expect(card.getByTestId('e2b-sandbox-url')).toHaveText(`${origin}/e2b-sandbox`);
  const env = card.getByText('export E2B_API_URL=');
  await expect(env).toContainText(`export E2B_API_URL=${origin}/e2b`);
  await expect(env).toContainText(`export E2B_SANDBOX_URL=${origin}/e2b-sandbox`);
  // Open mode: the SDKs want a key set, and any value that is not one of ours is let in.
  await expect(env).toContainText('export E2B_API_KEY=open');
  await expect(card.getByRole('link', { name: 'API key' })).toHaveAttribute('href', '/keys');
  // The Python and JavaScript flows.
  await expect(card.getByText('pip install e2b', { exact: true })).toBeVisible();
  const py = card.getByText('from e2b import Sandbox');
  await expect(py).toContainText('sbx = Sandbox.create()');
  await expect(py).toContainText('print(sbx.commands.run("echo hello").stdout)');
  await expect(py).toContainText('sbx.files.write("notes.txt", "hi")');
  await expect(py).toContainText('sbx.kill()');
  await expect(card.getByText('npm i e2b')).toBeVisible();
  await expect(card.getByText("import { Sandbox } from 'e2b'")).toContainText("await sbx.commands.run('echo hello')");
  await expect(card.getByText('pip install e2b-code-interpreter', { exact: true })).toBeVisible();
  await expect(card.getByText('from e2b_code_interpreter import Sandbox')).toContainText('print(sbx.run_code("x + 1").text)');
  // Each sandbox is a session: the link goes to the Sessions page.
  await expect(card.getByTestId('e2b-mapping').getByRole('link', { name: 'session' })).toHaveAttribute('href', '/sessions');
  await card.scrollIntoViewIfNeeded();
  await shot(page, 'developers-e2b');
  // The page only shows the way; the server at that URL answers E2B's list with the key shown.
  const [project] = await apiGet('/api/projects');
  const r = await fetch(`${origin}/e2b/v2/sandboxes`, { headers: { 'X-API-KEY': 'open', 'X-Project': project.slug } });
  const text = await r.text();
  expect(r.status, text).toBe(200);
  expect(Array.isArray(JSON.parse(text)), text).toBe(true);
});

test('create the first person (it closes the open deployment)', async ({ page }) => {
  await page.goto(`${UI()}/users`);
  await page.getByLabel('Email').fill(ADA.email);
  await page.getByLabel('Name', { exact: true }).fill('Ada');
  await page.getByLabel('Password').fill(ADA.password);
  await page.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByTestId('deployment-closed')).toContainText(ADA.email);
  await page.reload();
  await expect(page).toHaveURL(/\/login/);
});

test('sign in as a person and act with the cookie session', async ({ page }) => {
  const { email, password } = ADA;
  await page.goto(`${UI()}/sessions`);
  await expect(page).toHaveURL(/\/login/);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => !u.pathname.startsWith('/login'));
  await page.goto(`${UI()}/sessions`);
  await expect(page.getByTestId('me-label')).toHaveText(email);
  // A person reaches projects through memberships: Ada has none yet, and the UI says so.
  await expect(page.getByText('you are not in any project yet')).toBeVisible();
  // A change with the cookie alone (the UI sends X-Requested-With, so the server takes it):
  // a project of her own, which the switcher then selects.
  await page.getByRole('link', { name: 'Projects' }).click();
  await page.getByLabel('Name').fill('E2E team');
  await page.getByRole('button', { name: 'Create project' }).click();
  await expect(page.getByRole('link', { name: 'E2E team' })).toBeVisible();
  await expect(page.getByTestId('project-switcher')).toHaveValue('E2E team');
  await page.getByRole('link', { name: 'Secrets' }).click();
  await page.getByLabel('Name').fill('E2E_TOKEN');
  await page.getByLabel('Value').fill('s3cret-value');
  await page.getByRole('button', { name: 'Add secret' }).click();
  await expect(page.getByRole('cell', { name: 'E2E_TOKEN' })).toBeVisible();
  await expect(page.getByText('s3cret-value')).toHaveCount(0);
  await shot(page, 'secrets');
  // Her project's members: she is its admin.
  await page.getByRole('link', { name: 'Projects' }).click();
  await page.getByRole('link', { name: 'E2E team' }).click();
  await expect(page.getByRole('cell', { name: email })).toBeVisible();
});

test('create an API key and see it once', async ({ page }) => {
  await page.goto(`${UI()}/sessions`);
  await page.getByLabel('Email').fill(ADA.email);
  await page.getByLabel('Password').fill(ADA.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => !u.pathname.startsWith('/login'));
  await page.goto(`${UI()}/keys`);
  await page.getByLabel('Name').fill('ci');
  await page.getByRole('button', { name: 'Create key' }).click();
  const value = page.getByTestId('shown-once-value');
  await expect(value).toHaveText(/^ak_/);
  const key = (await value.textContent())!;
  writeFileSync(`${process.env.E2E_SERVER_LOG}.key`, key);
  await expect(page.getByTestId('api-keys')).toContainText(key.slice(0, 11));
  await page.getByRole('link', { name: 'Secrets' }).click();
  await page.getByRole('link', { name: 'API keys' }).click();
  await expect(page.getByTestId('api-keys')).toContainText('ci');
  await expect(page.getByTestId('shown-once')).toHaveCount(0);
  await expect(page.getByText(key)).toHaveCount(0);
  await shot(page, 'api-keys');
});
