// sandbox.commands: processes run in the sandbox (the daemon's execs),
// waited, streamed to callbacks, or in the background behind a handle.

import type * as http from 'node:http';

import { SandboxApi, seconds } from './api.js';
import { CommandExitError, LIMIT_REASONS, LimitError, NotFoundError } from './errors.js';
import { ndjson } from './http.js';

/** How a command ended. `reason` is the record's: exited, signaled,
 * timeout, memory, output, killed, exec-failed. `denials` are the audit
 * lines of what was refused while it ran (a connection, a DNS name, a
 * system call). */
export interface CommandResult {
  execId: string;
  exitCode: number | null;
  stdout: string;
  stderr: string;
  reason: string;
  denials: Record<string, unknown>[];
  durationMs: number;
  /** The exec's whole record as the daemon gave it. */
  record: Record<string, unknown>;
}

export interface CommandStartOpts {
  /** Called with each piece of its output as it comes. */
  onStdout?: (data: string) => void;
  onStderr?: (data: string) => void;
  /** Ends it (reason `timeout`, LimitError) after this long. */
  timeoutMs?: number;
  /** Its working directory, an absolute path (default: /work). */
  cwd?: string;
  /** Variables added to the sandbox's (held to the operator's env rules). */
  envs?: Record<string, string>;
  /** Its whole stdin, closed after. Without it a background command's
   * stdin stays open for sendStdin. E2B's `stdin: true` is taken with
   * `background: true` (its stdin is open then) and refused without. */
  stdin?: string | boolean;
  /** Its own limits, at most the sandbox's: bytes or "64M". */
  memory?: string | number;
  output?: string | number;
}

export interface CommandRunOpts extends CommandStartOpts {
  /** Start it and answer with a handle at once. */
  background?: boolean;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** The output in an event or answer, decoded when the daemon sent base64. */
function text(v: unknown, base64: unknown): string {
  const s = str(v);
  return base64 === true ? Buffer.from(s, 'base64').toString('utf8') : s;
}

/** A result from the exec's record and what was collected of it. */
export function resultOf(rec: Record<string, unknown>, stdout: string, stderr: string, denials: Record<string, unknown>[]): CommandResult {
  return {
    execId: str(rec['exec_id']),
    exitCode: typeof rec['exit_code'] === 'number' ? (rec['exit_code'] as number) : null,
    stdout,
    stderr,
    reason: str(rec['reason']),
    denials,
    durationMs: typeof rec['duration_ms'] === 'number' ? (rec['duration_ms'] as number) : 0,
    record: rec,
  };
}

/** Throws what E2B throws for a command that did not end well: a limit
 * (LimitError with its reason), else an exit code other than 0 or a
 * signal (CommandExitError). */
export function check(r: CommandResult, what: string): CommandResult {
  if (LIMIT_REASONS.has(r.reason)) throw new LimitError(`${what}: ended by its ${r.reason} limit`, r.reason, r);
  if (r.reason !== 'exited' || r.exitCode !== 0) {
    const how = r.reason === 'exited' ? `exit code ${r.exitCode}` : r.reason;
    throw new CommandExitError(`${what}: ${how}${r.stderr ? `: ${r.stderr.trim().slice(-500)}` : ''}`, r);
  }
  return r;
}

/** Reads an exec's event stream to its end, calling the callbacks as the
 * output comes; resolves with the result. */
export async function follow(
  res: http.IncomingMessage,
  cbs: {
    onStdout?: (d: string) => void;
    onStderr?: (d: string) => void;
    onStart?: (id: string) => void;
    /** stdout's bytes as they came (a terminal's output), undecoded. */
    onStdoutBytes?: (d: Uint8Array) => void;
  },
): Promise<CommandResult> {
  let out = '';
  let err = '';
  const denials: Record<string, unknown>[] = [];
  for await (const ev of ndjson(res)) {
    switch (ev['type']) {
      case 'start':
        cbs.onStart?.(str(ev['exec_id']));
        break;
      case 'stdout': {
        if (cbs.onStdoutBytes) {
          const raw = ev['data_base64'] === true ? Buffer.from(str(ev['data']), 'base64') : Buffer.from(str(ev['data']));
          cbs.onStdoutBytes(raw);
        }
        const d = text(ev['data'], ev['data_base64']);
        out += d;
        cbs.onStdout?.(d);
        break;
      }
      case 'stderr': {
        const d = text(ev['data'], ev['data_base64']);
        err += d;
        cbs.onStderr?.(d);
        break;
      }
      case 'denial':
        if (typeof ev['event'] === 'object' && ev['event'] !== null) denials.push(ev['event'] as Record<string, unknown>);
        break;
      case 'end': {
        const rec = (ev['result'] ?? {}) as Record<string, unknown>;
        return resultOf(rec, out, err, denials);
      }
      default:
        break; // "dropped" and kinds this client does not know
    }
  }
  throw new Error('the exec stream ended before its end event');
}

/** A command running in the background. */
export class CommandHandle {
  private ending?: Promise<CommandResult>;

  constructor(
    private readonly api: SandboxApi,
    /** The daemon's exec id (E2B calls it `pid`). */
    readonly execId: string,
    private readonly cbs: { onStdout?: (d: string) => void; onStderr?: (d: string) => void },
  ) {
    if (cbs.onStdout || cbs.onStderr) {
      this.ending = this.follow();
      // wait() reports a failure; unawaited, it must not end the program.
      this.ending.catch(() => undefined);
    }
  }

  /** E2B's name for the handle's id. */
  get pid(): string {
    return this.execId;
  }

  private async follow(): Promise<CommandResult> {
    const res = await this.api.stream('GET', `/execs/${encodeURIComponent(this.execId)}`, undefined, `exec ${this.execId}`);
    return follow(res, this.cbs);
  }

  /** Waits for its end: the result, or the error check() throws. */
  async wait(): Promise<CommandResult> {
    if (this.ending === undefined) this.ending = this.follow();
    return check(await this.ending, `command ${this.execId}`);
  }

  /** Queues bytes for its stdin; `close` closes it after them. */
  async sendStdin(data: string | Uint8Array, close = false): Promise<void> {
    const body = typeof data === 'string' ? Buffer.from(data) : data;
    await this.api.json('POST', `/execs/${encodeURIComponent(this.execId)}/stdin${close ? '?close=1' : ''}`, body, `stdin of exec ${this.execId}`);
  }

  /** Closes its stdin (a terminal gets ^D). */
  async closeStdin(): Promise<void> {
    await this.sendStdin(new Uint8Array(0), true);
  }

  /** Kills it (its reason becomes `killed`); false when it had ended. */
  async kill(): Promise<boolean> {
    return killExec(this.api, this.execId);
  }
}

/** Kills an exec. The daemon answers the exec's entry as it was: `ended`
 * when there was nothing left to kill (then false, as for an exec id the
 * sandbox does not have); a sandbox that is gone throws. */
export async function killExec(api: SandboxApi, execId: string): Promise<boolean> {
  try {
    const doc = await api.json<{ state?: string }>('DELETE', `/execs/${encodeURIComponent(execId)}`, undefined, `kill exec ${execId}`, [200]);
    return doc.state !== 'ended';
  } catch (e) {
    if (e instanceof NotFoundError) return false;
    throw e;
  }
}

/** One entry of commands.list(). */
export interface ProcessInfo {
  execId: string;
  pid: string;
  /** E2B's: argv[0] and the rest of argv. */
  cmd: string;
  args: string[];
  state: string;
  argv: string[];
  background: boolean;
  tty: boolean;
}

export class Commands {
  constructor(private readonly api: SandboxApi) {}

  /** The exec request's body for a shell command line. */
  static body(cmd: string, opts: CommandStartOpts): Record<string, unknown> {
    const b: Record<string, unknown> = { code: cmd, language: 'bash' };
    if (opts.cwd !== undefined) b['cwd'] = opts.cwd;
    if (opts.envs !== undefined) b['env'] = opts.envs;
    if (opts.timeoutMs !== undefined) b['timeout'] = seconds(opts.timeoutMs, 'timeoutMs');
    if (typeof opts.stdin === 'string') b['stdin'] = opts.stdin;
    else if (opts.stdin === true && !(opts as CommandRunOpts).background)
      throw new TypeError("stdin: true: only a background command's stdin stays open for sendStdin " +
        '(give background: true, or the text itself as stdin)');
    if (opts.memory !== undefined) b['memory'] = opts.memory;
    if (opts.output !== undefined) b['output'] = opts.output;
    return b;
  }

  /** Runs `cmd` with `bash -c` and waits for it; with `background: true`
   * answers a handle at once. A limit throws LimitError, an exit code
   * other than 0 CommandExitError (both carry the result). */
  run(cmd: string, opts: CommandRunOpts & { background: true }): Promise<CommandHandle>;
  run(cmd: string, opts?: CommandRunOpts & { background?: false }): Promise<CommandResult>;
  async run(cmd: string, opts: CommandRunOpts = {}): Promise<CommandResult | CommandHandle> {
    const body = Commands.body(cmd, opts);
    const what = `command ${JSON.stringify(cmd.length > 60 ? `${cmd.slice(0, 57)}...` : cmd)}`;
    if (opts.background) {
      body['background'] = true;
      const doc = await this.api.json<{ exec_id: string }>('POST', '/exec', body, what);
      return new CommandHandle(this.api, doc.exec_id, opts);
    }
    if (opts.onStdout || opts.onStderr) {
      const res = await this.api.stream('POST', '/exec', body, what);
      return check(await follow(res, opts), what);
    }
    body['wait'] = true;
    const wait = opts.timeoutMs !== undefined ? opts.timeoutMs + this.api.transport.requestTimeoutMs : 24 * 3600_000;
    const rec = await this.api.json<Record<string, unknown>>('POST', '/exec', body, what, [200], wait);
    const denials = Array.isArray(rec['denials']) ? (rec['denials'] as Record<string, unknown>[]) : [];
    return check(resultOf(rec, text(rec['stdout'], rec['stdout_base64']), text(rec['stderr'], rec['stderr_base64']), denials), what);
  }

  /** A handle on an exec already running (its output replayed to the
   * callbacks, then followed). */
  async connect(execId: string, opts: { onStdout?: (d: string) => void; onStderr?: (d: string) => void } = {}): Promise<CommandHandle> {
    return new CommandHandle(this.api, execId, opts);
  }

  /** The sandbox's execs: running ones and the last ended ones. */
  async list(): Promise<ProcessInfo[]> {
    const doc = await this.api.json<{ execs: Record<string, unknown>[] }>('GET', '/execs', undefined, 'list execs');
    return doc.execs.map((e) => ({
      execId: str(e['exec_id']),
      pid: str(e['exec_id']),
      cmd: Array.isArray(e['argv']) && e['argv'].length ? str(e['argv'][0]) : '',
      args: Array.isArray(e['argv']) ? (e['argv'] as string[]).slice(1) : [],
      state: str(e['state']),
      argv: Array.isArray(e['argv']) ? (e['argv'] as string[]) : [],
      background: e['background'] === true,
      tty: e['tty'] === true,
    }));
  }

  /** Queues bytes for an exec's stdin (E2B's commands.sendStdin). */
  async sendStdin(execId: string, data: string | Uint8Array): Promise<void> {
    await new CommandHandle(this.api, execId, {}).sendStdin(data);
  }

  /** Kills an exec; false when it had ended. */
  async kill(execId: string): Promise<boolean> {
    return killExec(this.api, execId);
  }
}
