// airlock's Node context driver (docs/api.md, "Code contexts"), run as
// `node -e DRIVER` by the session process. Each line on stdin is one run:
// {"id": N, "code": TEXT, "nonce": HEX}. The code runs in one vm context
// kept for the interpreter's life (console, require, process, timers in
// it); its completion value (a promise awaited) is shown by util.inspect;
// then the run's frame goes on stdout and the end marker on stderr, both
// tagged with the run's nonce. Writes to pipes are synchronous on Linux,
// so the frame comes after everything the code wrote.
'use strict';
const fs = require('fs');
const readline = require('readline');
const util = require('util');
const vm = require('vm');

const ctx = vm.createContext({
  console, require, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, fetch: globalThis.fetch,
});
ctx.globalThis = ctx;

// A frame's text field (value, message, traceback) at most, as JSON bytes:
// the session refuses a frame whose fields are over 1 MiB.
const CAP = 1 << 20;

// s as a frame's field: a NUL or a lone surrogate (which the session's JSON
// parser refuses) written as its escape, \x00 or \udXXX, and the text cut
// until its JSON is at most CAP bytes (never inside a surrogate pair).
function text(s) {
  s = String(s).replace(/\0/g, '\\x00').replace(
    /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16));
  let n = Buffer.byteLength(JSON.stringify(s));
  while (n > CAP) {
    s = s.slice(0, Math.max(0, Math.floor((s.length * CAP) / n) - 16));
    if (/[\ud800-\udbff]$/.test(s)) s = s.slice(0, -1);
    n = Buffer.byteLength(JSON.stringify(s));
  }
  return s;
}

// f() as a frame's text, or fallback when f throws (a getter, a Proxy).
function shown(f, fallback) {
  try {
    return text(f());
  } catch {
    return fallback;
  }
}

// A thrown value as {name, message, traceback}: the driver's own frames
// (node:vm, [eval]) are left out of the stack. Every read of the thrown
// value may throw, and is guarded.
function errorOf(e) {
  const isObj = e !== null && (typeof e === 'object' || typeof e === 'function');
  const get = (k) => { try { return isObj ? e[k] : undefined; } catch { return undefined; } };
  const n = get('name'), m = get('message'), st = get('stack');
  const name = typeof n === 'string' ? text(n) : 'Error';
  const message = typeof m === 'string' ? text(m)
                                        : shown(() => util.inspect(e), '<the thrown value>');
  const stack = typeof st === 'string' ? st : name + ': ' + message;
  const traceback = shown(
    () => stack.split('\n').filter((l) => !/node:(vm|internal)|\[eval\]/.test(l)).join('\n'),
    name + ': ' + message);
  return { name, message, traceback };
}

async function run(code) {
  try {
    let v = vm.runInContext(code, ctx, { filename: '<cell>' });
    if (v !== null && (typeof v === 'object' || typeof v === 'function') &&
        typeof v.then === 'function')
      v = await v;
    return { value: v === undefined ? null : text(util.inspect(v)), error: null };
  } catch (e) {
    return { value: null, error: errorOf(e) };
  }
}

// The protocol's stdin; the code's own process.stdin is not read here.
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(async () => {
    const req = JSON.parse(line);
    const r = await run(req.code);
    const tag = '\x1eALCTX:' + req.nonce + ':';
    fs.writeSync(1, tag + JSON.stringify({ id: req.id, value: r.value, error: r.error }) + '\n');
    fs.writeSync(2, tag + 'end\n');
  });
});
