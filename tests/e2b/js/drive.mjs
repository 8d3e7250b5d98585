// Drives our E2B-compatible API with the real npm E2B SDKs (`e2b`, `@e2b/code-interpreter`),
// exactly as a user does: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY in the environment.
// Prints what it saw as one JSON object; crates/server/tests/api/e2b.rs asserts on it.
//
//   E2B_API_URL=http://127.0.0.1:PORT/e2b E2B_SANDBOX_URL=.../e2b-sandbox E2B_API_KEY=ak_... node drive.mjs
//
// The basic flow: create with metadata and envs, commands (foreground, a failing one,
// background with streamed output), files (write, read, a binary file byte for byte, list,
// remove), list by metadata, a wrong key, kill; and run_code keeping state in a
// code-interpreter sandbox.
import { randomBytes, randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const require = createRequire(import.meta.url)
const seen = {
  sdk: require('e2b/package.json').version,
  interpreterSdk: require('@e2b/code-interpreter/package.json').version,
}

async function failure(f) {
  try {
    await f()
  } catch (e) {
    return { type: e.constructor.name, message: String(e.message) }
  }
  return null
}

const run = randomUUID()
const sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { run }, envs: { GREETING: 'hello' } })
const info = await sbx.getInfo()
seen.created = { template: info.templateId, metadata: info.metadata }

const r = await sbx.commands.run('echo "$GREETING from $(pwd)"; echo oops >&2')
seen.run = { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode }
seen.failed = await failure(() => sbx.commands.run('echo partial; exit 3'))
const lines = []
const handle = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.2; done', {
  background: true,
  onStdout: (data) => lines.push(data),
})
seen.background = { exitCode: (await handle.wait()).exitCode, lines }

await sbx.files.write('/home/user/notes/a.txt', 'hello from js')
seen.read = await sbx.files.read('/home/user/notes/a.txt')
const big = randomBytes(2 * 1024 * 1024 + 3)
await sbx.files.write('big.bin', big.buffer.slice(big.byteOffset, big.byteOffset + big.length))
const back = await sbx.files.read('big.bin', { format: 'bytes' })
seen.bigEqual = Buffer.from(back).equals(big)
seen.list = (await sbx.files.list('/home/user/notes')).map((e) => e.name).sort()
await sbx.files.remove('/home/user/notes/a.txt')
seen.afterRemove = await sbx.files.exists('/home/user/notes/a.txt')

const listed = Sandbox.list({ query: { metadata: { run } } })
seen.listed = (await listed.nextItems()).map((s) => s.sandboxId)
seen.wrongKey = await failure(() => Sandbox.create({ apiKey: 'ak_not_a_key_of_this_server' }))
seen.id = sbx.sandboxId
seen.kill = await sbx.kill()
seen.afterKill = await failure(() => sbx.commands.run('true'))

const code = await CodeSandbox.create({ timeoutMs: 300_000 })
await code.runCode('x = 41')
const answer = await code.runCode('x + 1')
const printed = await code.runCode("print('from js')")
seen.code = { text: answer.text, stdout: printed.logs.stdout }
await code.kill()

console.log(JSON.stringify(seen))
