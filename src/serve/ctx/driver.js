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

// A thrown value as {name, message, traceback}: the driver's own frames
// (node:vm, [eval]) are left out of the stack.
function errorOf(e) {
  const isObj = e !== null && (typeof e === 'object' || typeof e === 'function');
  const name = isObj && typeof e.name === 'string' ? e.name : 'Error';
  const message = isObj && typeof e.message === 'string' ? e.message : util.inspect(e);
  const stack = isObj && typeof e.stack === 'string' ? e.stack : name + ': ' + message;
  const lines = stack.split('\n').filter((l) => !/node:(vm|internal)|\[eval\]/.test(l));
  return { name, message, traceback: lines.join('\n') };
}

async function run(code) {
  try {
    let v = vm.runInContext(code, ctx, { filename: '<cell>' });
    if (v !== null && (typeof v === 'object' || typeof v === 'function') &&
        typeof v.then === 'function')
      v = await v;
    return { value: v === undefined ? null : util.inspect(v).slice(0, 1 << 20), error: null };
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
