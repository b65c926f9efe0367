// The wasm backend's driver (src/backend/wasm/wasm.c): Node runs it with
// `node --input-type=module -e DRIVER -- CONFIG ARGS...` inside the native
// sandbox. CONFIG is JSON written by airlock:
//   mode      "wasi": run the module under WASI preview 1;
//             "python": run ARGS (-c CODE, or a script and its arguments)
//             under Pyodide
//   module    the module's path (wasi)
//   name      argv[0] the module sees (wasi)
//   pyodide   Pyodide's directory (python)
//   preopens  sandbox directories the code may reach: {guest: path}
//   memory    the linear memory cap in bytes (also node's
//             --wasm-max-mem-pages, which V8 enforces on every memory)
// Node's WASI is no sandbox on its own (it follows symlinks out of a
// preopen); the native layer around it keeps the promises. Here the module
// gets only the preopens, no socket calls and no signals.
import { readFileSync, writeSync } from 'node:fs';
import { basename } from 'node:path';

const cfg = JSON.parse(process.argv[1]);
const args = process.argv.slice(2);
// The plan's environment: node got it prefixed (wasm.c's WASM_ENV_PREFIX)
// so that none of it configures node itself (NODE_OPTIONS, OPENSSL_CONF).
const PREFIX = 'AIRLOCK_WASM_ENV_';
const env = {};
for (const [k, v] of Object.entries(process.env))
	if (k.startsWith(PREFIX))
		env[k.slice(PREFIX.length)] = v;
// WASI errno ENOSYS: what every call the module may not use answers.
const ENOSYS = 52;
// A module that failed with its memory this close to the cap ran out of it.
const NEAR_CAP = Math.max(cfg.memory / 8, 1 << 20);

function say(msg) {
	writeSync(2, `airlock-wasm: ${msg}\n`);
}

// The memory verdict goes out as a signal the module cannot raise (its
// proc_raise answers ENOSYS): the backend ends the run for memory.
function outOfMemory(bytes) {
	say(`the module's linear memory reached ${bytes} of its ${cfg.memory} bytes`);
	process.kill(process.pid, 'SIGUSR2');
}

// A module that failed with its memory near the cap ran out of it.
function verdict(code, memory) {
	if (code !== 0 && memory instanceof WebAssembly.Memory &&
	    memory.buffer.byteLength + NEAR_CAP >= cfg.memory)
		outOfMemory(memory.buffer.byteLength);
	return code;
}

// What the module may import: the WASI calls by name, in objects with no
// prototype. Node's own import object is its internal WASI binding, whose
// other properties (constructor, _setMemory) are C++ functions the module
// could import and call with numbers (node aborts on a failed CHECK).
function moduleImports(calls) {
	const wasi = Object.create(null);
	for (const [name, fn] of Object.entries(calls))
		if (/^[a-z]/.test(name) && typeof fn === 'function')
			wasi[name] = fn;
	return Object.assign(Object.create(null), { wasi_snapshot_preview1: wasi });
}

async function runWasi() {
	const { WASI } = await import('node:wasi');
	const wasi = new WASI({
		version: 'preview1',
		args: [cfg.name, ...args],
		env,
		preopens: cfg.preopens,
	});
	// Held from the global object: Node 20 lets a collection free the WASI
	// object while start() runs (a crash once the module's memory grew).
	globalThis.airlockWasi = wasi;
	const imports = wasi.getImportObject();
	const calls = imports.wasi_snapshot_preview1;
	for (const name of ['sock_accept', 'sock_recv', 'sock_send', 'sock_shutdown', 'sock_open',
		'sock_connect', 'sock_bind', 'sock_listen', 'proc_raise'])
		calls[name] = () => ENOSYS;
	// proc_exit ends the process here, in the call: Node 20's own
	// (returnOnExit) can crash on the way out of start() once the
	// module's memory has grown.
	let memory;
	calls.proc_exit = (rc) => process.exit(verdict(rc, memory));
	let module;
	try {
		module = await WebAssembly.compile(readFileSync(cfg.module));
	} catch (e) {
		say(`${basename(cfg.name)} is not a module this engine can compile: ${e.message}`);
		return 126;
	}
	let instance;
	try {
		instance = await WebAssembly.instantiate(module, moduleImports(calls));
	} catch (e) {
		say(`${basename(cfg.name)} cannot be instantiated: ${e.message}`);
		return 126;
	}
	memory = instance.exports.memory;
	if (typeof instance.exports._start !== 'function') {
		say(`${basename(cfg.name)} exports no _start function (not a WASI command)`);
		return 126;
	}
	let code;
	try {
		wasi.start(instance);
		code = 0;
	} catch (e) {
		// A trap (unreachable, out of bounds, stack overflow): like an abort.
		say(`the module trapped: ${e.message}`);
		code = 134;
	}
	code = verdict(code, memory);
	return code;
}

// Python under Pyodide: the preopens mounted through NODEFS at the same
// paths, the working directory the sandbox's, exit codes as CPython's.
const RUNNER = `
import sys, traceback
def _airlock_run(argv, code, filename):
    sys.argv = list(argv)
    g = {"__name__": "__main__", "__file__": filename}
    try:
        exec(compile(code, filename, "exec"), g)
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code & 0xff
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0
`;

async function runPython() {
	const { loadPyodide } = await import(`${cfg.pyodide}/pyodide.mjs`);
	let code, filename, argv;
	if (args[0] === '-c' && args.length >= 2) {
		code = args[1];
		filename = '<string>';
		argv = ['-c', ...args.slice(2)];
	} else if (args.length >= 1 && !args[0].startsWith('-')) {
		try {
			code = readFileSync(args[0], 'utf8');
		} catch (e) {
			say(`cannot read the script ${args[0]}: ${e.message}`);
			return 2;
		}
		filename = args[0];
		argv = args;
	} else {
		say('--language python takes -c CODE or a script and its arguments');
		return 2;
	}
	const py = await loadPyodide({ indexURL: `${cfg.pyodide}/`, env: { ...env },
		stdout: () => {}, stderr: () => {} });
	const out = (fd) => ({ write: (buf) => writeSync(fd, buf) });
	py.setStdout(out(1));
	py.setStderr(out(2));
	for (const dir of Object.values(cfg.preopens)) {
		py.FS.mkdirTree(dir);
		py.FS.mount(py.FS.filesystems.NODEFS, { root: dir }, dir);
	}
	py.FS.chdir(process.cwd());
	py.runPython(RUNNER);
	const run = py.globals.get('_airlock_run');
	return run(py.toPy(argv), code, filename);
}

const code = await (cfg.mode === 'python' ? runPython() : runWasi());
process.exit(code);
