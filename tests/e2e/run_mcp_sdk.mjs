// airlock mcp with the official TypeScript SDK's client
// (@modelcontextprotocol/sdk: Client + StdioClientTransport), TAP on stdout.
// usage: node run_mcp_sdk.mjs AIRLOCK PACKAGE_DIR INSTALL_DIR
// PACKAGE_DIR holds the committed package.json and package-lock.json; they
// are installed (npm ci) into INSTALL_DIR in the build tree, never in the
// source tree. An install that fails fails the test.
// Mode 1: one MCP server on the socket of a daemon this test starts, for
// most cases. Mode 2: without --socket (the private daemon); after the
// client closes, neither its process nor its socket directory is left.
// Network: only a loopback HTTP server of this test's; the denied host is
// asked for through the sandbox's gateway, which refuses it by name.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [airlock, pkgDir, installDir] = process.argv.slice(2);
let n = 0, failed = 0;
const cleanups = [];

function ok(cond, name, why) {
  n++;
  if (cond) {
    console.log(`ok ${n} - ${name}`);
  } else {
    failed++;
    console.log(`not ok ${n} - ${name}`);
    console.log(`# ${String(why).split('\n').join('\n# ')}`);
  }
}

// npm ci into the build directory when the lock file changed.
function installSdk() {
  fs.mkdirSync(installDir, { recursive: true });
  const lock = fs.readFileSync(path.join(pkgDir, 'package-lock.json'));
  const stamp = path.join(installDir, 'node_modules', '.airlock-lock');
  if (fs.existsSync(stamp) && fs.readFileSync(stamp).equals(lock)) return;
  for (const f of ['package.json', 'package-lock.json'])
    fs.copyFileSync(path.join(pkgDir, f), path.join(installDir, f));
  try {
    execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'],
                 { cwd: installDir, stdio: ['ignore', 'pipe', 'pipe'], timeout: 300000 });
  } catch (e) {
    throw new Error(`npm ci of @modelcontextprotocol/sdk into ${installDir} failed: ` +
                    `${e.stderr || e.message}`);
  }
  fs.writeFileSync(stamp, lock);
}

function sleep(ms) { return new Promise(r => setTimeout(r, ms)); }

async function waitFor(fn, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20))
    if (await fn()) return true;
  return !!(await fn());
}

function health(sock) {
  return new Promise(resolve => {
    const req = http.get({ socketPath: sock, path: '/v1/health', timeout: 2000 }, res => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => { req.destroy(); resolve(false); });
  });
}

// The daemon for mode 1, ended by pid (SIGTERM, then SIGKILL and airlock gc).
async function startDaemon(dir) {
  const sock = path.join(dir, 's');
  const log = fs.openSync(path.join(dir, 'daemon.log'), 'w');
  const p = spawn(airlock, ['serve', '--socket', sock], { stdio: ['ignore', log, log] });
  let exited = false;
  p.on('exit', () => { exited = true; });
  cleanups.push(async () => {
    if (exited) return;
    p.kill('SIGTERM');
    if (!(await waitFor(() => exited, 15000))) {
      p.kill('SIGKILL');
      await waitFor(() => exited, 5000);
      execFileSync(airlock, ['gc'], { stdio: 'ignore' });
    }
  });
  if (!(await waitFor(() => exited || health(sock), 15000)) || exited)
    throw new Error('the daemon did not start: ' + fs.readFileSync(path.join(dir, 'daemon.log')));
  return sock;
}

function childrenOf(pid) {
  const kids = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) kids.push(Number(d));
    } catch { /* gone meanwhile */ }
  }
  return kids;
}

function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch { return false; }
}

function text(r) { return (r.content || []).map(c => c.text).join('\n'); }

async function rejects(p) {
  try { await p; return null; } catch (e) { return e; }
}

async function main() {
  installSdk();
  const sdk = path.resolve(installDir, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
  const { Client } = await import(pathToFileURL(path.join(sdk, 'client', 'index.js')).href);
  const { StdioClientTransport } = await import(pathToFileURL(path.join(sdk, 'client', 'stdio.js')).href);

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-mcp-sdk-'));
  fs.chmodSync(tmp, 0o755);
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));

  // The allowed API: a loopback server of this test's.
  let hits = 0;
  const api = http.createServer((req, res) => { hits++; res.end('api says hi\n'); });
  await new Promise(r => api.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise(r => api.close(r)));
  const port = api.address().port;
  const policy = path.join(tmp, 'policy.json');
  fs.writeFileSync(policy, JSON.stringify({
    lifetime: 300,
    network: { allow: [`api.example.test:${port}`], hosts: { 'api.example.test': '127.0.0.1' } },
  }));

  const sock = await startDaemon(tmp);
  const client = new Client({ name: 'airlock-e2e', version: '1.0.0' });
  const transport = new StdioClientTransport({
    command: airlock, args: ['mcp', '--socket', sock, '--policy', policy], stderr: 'inherit',
  });
  await client.connect(transport);
  cleanups.push(() => client.close());

  // tools/list: the names, and each input schema an object schema.
  const { tools } = await client.listTools();
  const names = tools.map(t => t.name).sort();
  ok(JSON.stringify(names) === JSON.stringify(
       ['list_files', 'read_file', 'run_code', 'run_command', 'write_file']),
     'tools/list names the five tools', names);
  const byName = Object.fromEntries(tools.map(t => [t.name, t]));
  ok(tools.every(t => t.inputSchema.type === 'object' && t.outputSchema?.type === 'object' &&
                      t.inputSchema.additionalProperties === false),
     'each tool has an object input schema (no other properties) and an output schema',
     JSON.stringify(tools));
  ok(JSON.stringify(byName.run_code.inputSchema.required) === '["language","code"]' &&
     JSON.stringify(byName.run_code.inputSchema.properties.language.enum) ===
       '["python","node","bash"]',
     'run_code needs language (python, node, bash) and code',
     JSON.stringify(byName.run_code.inputSchema));

  // Every tool with valid arguments.
  let r = await client.callTool({ name: 'write_file',
                                  arguments: { path: '/work/d/hello.txt', content: 'hello\n' } });
  ok(!r.isError && r.structuredContent.size === 6, 'write_file writes (making /work/d)',
     JSON.stringify(r));
  r = await client.callTool({ name: 'read_file', arguments: { path: '/work/d/hello.txt' } });
  ok(!r.isError && r.structuredContent.content === 'hello\n', 'read_file reads it back',
     JSON.stringify(r));
  r = await client.callTool({ name: 'read_file',
                              arguments: { path: '/work/d/hello.txt', encoding: 'base64' } });
  ok(!r.isError && r.structuredContent.content === 'aGVsbG8K', 'read_file in base64',
     JSON.stringify(r));
  r = await client.callTool({ name: 'list_files', arguments: { path: '/work/d' } });
  ok(!r.isError && r.structuredContent.entries.some(e => e.name === 'hello.txt'),
     'list_files lists it', JSON.stringify(r));
  r = await client.callTool({ name: 'run_command',
                              arguments: { command: 'cat /work/d/hello.txt; echo err >&2; exit 3' } });
  ok(r.isError && r.structuredContent.exit_code === 3 && r.structuredContent.reason === 'exited' &&
     r.structuredContent.stdout === 'hello\n' && r.structuredContent.stderr === 'err\n' &&
     /exit code 3/.test(text(r)),
     'run_command: output, exit code 3 and isError', JSON.stringify(r));
  r = await client.callTool({ name: 'run_command', arguments: { command: 'pwd', cwd: '/tmp' } });
  ok(!r.isError && r.structuredContent.stdout === '/tmp\n', 'run_command in cwd /tmp',
     JSON.stringify(r));
  r = await client.callTool({ name: 'run_code', arguments: { language: 'bash', code: 'echo $((6*7))' } });
  ok(!r.isError && r.structuredContent.stdout === '42\n', 'run_code bash', JSON.stringify(r));

  // A long output: whole in structuredContent, cut in the text.
  r = await client.callTool({ name: 'run_command', arguments: { command: 'head -c 100000 /dev/zero | tr "\\0" a' } });
  ok(!r.isError && r.structuredContent.stdout.length === 100000 && text(r).length < 70000 &&
     text(r).includes('[cut: the first 65536 of 100000 bytes; structuredContent.stdout has all]'),
     'a long output is whole in structuredContent and cut in the text',
     `${r.structuredContent?.stdout?.length} ${text(r).length} ${text(r).slice(-200)}`);

  // run_code keeps a variable between calls (python and node contexts).
  for (const [lang, set, get] of [['python', 'x = 41', 'x + 1'], ['node', 'var x = 41', 'x + 1']]) {
    await client.callTool({ name: 'run_code', arguments: { language: lang, code: set } });
    r = await client.callTool({ name: 'run_code', arguments: { language: lang, code: get } });
    ok(!r.isError && r.structuredContent.value === '42',
       `run_code ${lang} keeps a variable between calls`, JSON.stringify(r));
  }

  // Egress: the allowed API answers; a host not allowed is denied and said so.
  const fetchPy = host => `python3 -c "import urllib.request as u; ` +
    `print(u.urlopen('http://${host}:${port}/', timeout=10).read().decode())"`;
  r = await client.callTool({ name: 'run_command', arguments: { command: fetchPy('api.example.test') } });
  ok(!r.isError && r.structuredContent.stdout.includes('api says hi') && hits === 1,
     'an allowed host is reached', JSON.stringify(r));
  r = await client.callTool({ name: 'run_command', arguments: { command: fetchPy('evil.example') } });
  ok(r.isError && r.structuredContent.denials.some(d => d.includes('evil.example')) &&
     /denied: connection to evil\.example:\d+/.test(text(r)) && hits === 1,
     'a host not allowed is denied, and the result says so', JSON.stringify(r));

  // A limit: the timeout, with isError and the reason.
  r = await client.callTool({ name: 'run_command', arguments: { command: 'sleep 30', timeout: 1 } });
  ok(r.isError && r.structuredContent.reason === 'timeout' && /ended: timeout/.test(text(r)),
     'a timeout is reported with isError and reason timeout', JSON.stringify(r));

  // Invalid arguments: refused, naming the argument.
  const bad = [
    ['run_code', { code: 'print(1)' }, 'language'],
    ['run_code', { language: 'ruby', code: '1' }, 'language'],
    ['run_code', { language: 'python', code: 7 }, 'code'],
    ['run_command', { command: 'true', bogus: 1 }, 'bogus'],
    ['run_command', { command: 'true', timeout: 'soon' }, 'timeout'],
    ['run_command', { command: 'true', cwd: 'tmp' }, 'cwd'],
    ['write_file', { path: '/work/x' }, 'content'],
    ['write_file', { path: '/work/x', content: 'a', encoding: 'base64' }, 'content'],
    ['read_file', { path: 3 }, 'path'],
    ['read_file', { path: '/work/x', encoding: 'latin1' }, 'encoding'],
    ['list_files', { path: 'relative' }, 'path'],
    ['list_files', { recursive: true }, 'recursive'],
  ];
  for (const [name, args, arg] of bad) {
    const e = await rejects(client.callTool({ name, arguments: args }));
    ok(e && e.code === -32602 && e.message.includes(`"${arg}"`),
       `${name} ${JSON.stringify(args)} is refused naming "${arg}"`, e ? e.message : 'accepted');
  }
  await client.close();

  // Mode 2: the private daemon, and nothing of it left after the close.
  const tmpdir = path.join(tmp, 'private');
  fs.mkdirSync(tmpdir, { mode: 0o700 });
  const client2 = new Client({ name: 'airlock-e2e-private', version: '1.0.0' });
  const t2 = new StdioClientTransport({
    command: airlock, args: ['mcp'], stderr: 'inherit',
    env: { ...process.env, TMPDIR: tmpdir },
  });
  await client2.connect(t2);
  cleanups.push(() => client2.close());
  r = await client2.callTool({ name: 'run_code', arguments: { language: 'bash', code: 'echo private' } });
  ok(!r.isError && r.structuredContent.stdout === 'private\n', 'without --socket: a private daemon runs it',
     JSON.stringify(r));
  const mcpPid = t2.pid;
  const kids = childrenOf(mcpPid);
  const dirs = fs.readdirSync(tmpdir);
  ok(kids.length === 1 && dirs.length === 1 && dirs[0].startsWith('airlock-mcp-') &&
     (fs.statSync(path.join(tmpdir, dirs[0])).mode & 0o777) === 0o700,
     'the private daemon is the MCP server\'s child, in a 0700 directory', `${kids} ${dirs}`);
  await client2.close();
  const gone = await waitFor(() => !alive(mcpPid) && kids.every(k => !alive(k)), 20000);
  ok(gone && fs.readdirSync(tmpdir).length === 0,
     'after stdin closes: no process of it and no socket directory left',
     `alive: ${[mcpPid, ...kids].filter(alive)}; left: ${fs.readdirSync(tmpdir)}`);
}

try {
  await main();
} catch (e) {
  ok(false, 'the test ran to its end', e.stack || e);
}
for (const c of cleanups.reverse()) {
  try { await c(); } catch (e) { console.log(`# cleanup: ${e}`); }
}
console.log(`1..${n}`);
console.log(`# ${n - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
