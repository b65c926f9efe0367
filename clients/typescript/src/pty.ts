// sandbox.pty: an exec with a terminal of its own (a shell by default),
// its output streamed to onData, typed to with sendStdin, resized.

import type * as http from 'node:http';

import { SandboxApi, seconds } from './api.js';
import { CommandResult, follow, killExec } from './commands.js';

export interface PtySize {
  rows: number;
  cols: number;
}

export interface PtyCreateOpts extends Partial<PtySize> {
  /** Each piece of the terminal's output as it comes. */
  onData?: (data: Uint8Array) => void;
  /** The program (default: bash -i without rc files). */
  cmd?: string[];
  cwd?: string;
  envs?: Record<string, string>;
  timeoutMs?: number;
  /** false: the output is passed as the program wrote it, queries and
   * reporting modes included (default: re-encoded with only what acts on
   * the screen). */
  ttyfilter?: boolean;
}

/** A terminal in the sandbox. */
export class PtyHandle {
  private readonly ending: Promise<CommandResult>;

  constructor(
    private readonly api: SandboxApi,
    readonly execId: string,
    res: http.IncomingMessage,
    onData?: (data: Uint8Array) => void,
  ) {
    // A terminal's output is one stream, given as stdout.
    this.ending = follow(res, { onStdoutBytes: onData });
    this.ending.catch(() => undefined); // wait() reports it
  }

  /** E2B's name for the handle's id. */
  get pid(): string {
    return this.execId;
  }

  /** Types bytes to it. */
  async sendStdin(data: string | Uint8Array): Promise<void> {
    const body = typeof data === 'string' ? Buffer.from(data) : data;
    await this.api.json('POST', `/execs/${encodeURIComponent(this.execId)}/stdin`, body, `stdin of pty ${this.execId}`);
  }

  /** Its new size; its process group gets SIGWINCH. */
  async resize(size: PtySize): Promise<void> {
    await this.api.json('POST', `/execs/${encodeURIComponent(this.execId)}/resize`, { rows: size.rows, cols: size.cols }, `resize pty ${this.execId}`);
  }

  /** Kills it; false when it had ended. */
  async kill(): Promise<boolean> {
    return killExec(this.api, this.execId);
  }

  /** Its end (the output was given to onData; `stdout` holds it too). */
  wait(): Promise<CommandResult> {
    return this.ending;
  }
}

export class Pty {
  constructor(private readonly api: SandboxApi) {}

  /** Starts a terminal (default 24 x 80) and answers its handle. */
  async create(opts: PtyCreateOpts = {}): Promise<PtyHandle> {
    const body: Record<string, unknown> = {
      argv: opts.cmd ?? ['/bin/bash', '--norc', '--noprofile', '-i'],
      tty: true,
      rows: opts.rows ?? 24,
      cols: opts.cols ?? 80,
    };
    if (opts.cwd !== undefined) body['cwd'] = opts.cwd;
    if (opts.envs !== undefined) body['env'] = opts.envs;
    if (opts.timeoutMs !== undefined) body['timeout'] = seconds(opts.timeoutMs, 'timeoutMs');
    if (opts.ttyfilter !== undefined) body['ttyfilter'] = opts.ttyfilter;
    const res = await this.api.stream('POST', '/exec', body, 'pty');
    // The stream's first line names the exec; the handle reads the rest.
    const execId = await firstExecId(res);
    return new PtyHandle(this.api, execId, res, opts.onData);
  }

  /** E2B's calls by id: any terminal of the sandbox, also one made by
   * another client (NotFoundError for an exec it does not have). */
  async sendInput(pid: string, data: Uint8Array | string): Promise<void> {
    const body = typeof data === 'string' ? Buffer.from(data) : data;
    await this.api.json('POST', `/execs/${encodeURIComponent(pid)}/stdin`, body, `stdin of pty ${pid}`);
  }

  async resize(pid: string, size: PtySize): Promise<void> {
    await this.api.json('POST', `/execs/${encodeURIComponent(pid)}/resize`, { rows: size.rows, cols: size.cols }, `resize pty ${pid}`);
  }

  async kill(pid: string): Promise<boolean> {
    return killExec(this.api, pid);
  }
}

/** Reads the stream's start line without taking more of the body (the
 * rest is left in the stream, unshifted, for follow()). */
function firstExecId(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      const nl = buf.indexOf(10);
      if (nl < 0) return;
      res.off('data', onData);
      res.off('end', onEnd);
      res.pause();
      const rest = buf.subarray(nl + 1);
      if (rest.length) res.unshift(rest);
      try {
        const ev = JSON.parse(buf.subarray(0, nl).toString('utf8')) as Record<string, unknown>;
        if (ev['type'] !== 'start' || typeof ev['exec_id'] !== 'string') throw new Error(`not a start event: ${buf.subarray(0, nl)}`);
        resolve(ev['exec_id']);
      } catch (e) {
        reject(e);
      }
    };
    const onEnd = (): void => reject(new Error('the pty stream ended before its start event'));
    res.on('data', onData);
    res.on('end', onEnd);
    res.on('error', reject);
  });
}
