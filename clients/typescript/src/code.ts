// Code contexts: a long-lived interpreter in the sandbox (the daemon's
// /contexts), so that variables, imports and loaded data stay between
// runCode calls.

import { SandboxApi, seconds } from './api.js';
import { LIMIT_REASONS, LimitError } from './errors.js';

export type Language = 'python' | 'node';

/** A context as the daemon describes it. */
export interface Context {
  id: string;
  language: Language;
  cwd?: string;
  state?: string;
  runs?: number;
  restarts?: number;
}

export interface CreateCodeContextOpts {
  language?: Language;
  /** Its interpreter's working directory (default: /work). */
  cwd?: string;
  envs?: Record<string, string>;
  /** Its interpreter's own limits, at most the sandbox's. */
  memory?: string | number;
  output?: string | number;
}

/** An exception the code raised (not a failed run). E2B's names: `value`
 * is the message. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/** What one runCode did. */
export interface Execution {
  /** The last expression's value as text (Python repr, Node
   * util.inspect); undefined when there was none. */
  text?: string;
  /** E2B's list of results: the value as its one text result. */
  results: { text: string }[];
  logs: { stdout: string[]; stderr: string[] };
  error?: ExecutionError;
  /** ok, error (an exception), timeout, memory, output, killed, exited,
   * protocol. */
  reason: string;
  /** The interpreter was started anew: this run ended it (a limit, its
   * exit) or found it gone; its state is lost. */
  restarted: boolean;
  restartReason?: string;
  denials: Record<string, unknown>[];
  durationMs: number;
  contextId: string;
}

/** A chunk of a run's output as onStdout/onStderr get it (E2B's shape):
 * `line` the text, `error` true for stderr, `timestamp` when the client
 * got it (microseconds since the epoch). */
export class OutputMessage {
  constructor(
    readonly line: string,
    readonly timestamp: number,
    readonly error: boolean,
  ) {}

  toString(): string {
    return this.line;
  }
}

export interface RunCodeOpts {
  /** Default: python. Ignored when a context is given. */
  language?: Language;
  /** A context from createCodeContext (default: one per language per
   * Sandbox object, made at the first run). */
  context?: Context;
  /** Ends the run (and restarts its interpreter) after this long. */
  timeoutMs?: number;
  /** Called when the run has ended (the daemon answers a run whole), in
   * this order: each chunk of output, the last expression's result, the
   * exception the code raised. */
  onStdout?: (msg: OutputMessage) => unknown;
  onStderr?: (msg: OutputMessage) => unknown;
  onResult?: (result: { text: string }) => unknown;
  onError?: (error: ExecutionError) => unknown;
  /** Not taken per run: a context's environment is set when it is made
   * (createCodeContext({envs})); given, the run throws saying so. */
  envs?: Record<string, string>;
  /** Taken for E2B's signature; the run is bounded by timeoutMs. */
  requestTimeoutMs?: number;
}

function contextOf(doc: Record<string, unknown>, cwd?: string): Context {
  return {
    id: String(doc['context_id']),
    language: String(doc['language']) as Language,
    cwd,
    state: typeof doc['state'] === 'string' ? (doc['state'] as string) : undefined,
    runs: typeof doc['runs'] === 'number' ? (doc['runs'] as number) : undefined,
    restarts: typeof doc['restarts'] === 'number' ? (doc['restarts'] as number) : undefined,
  };
}

export class CodeContexts {
  private readonly defaults = new Map<Language, Promise<Context>>();

  constructor(private readonly api: SandboxApi) {}

  async create(opts: CreateCodeContextOpts = {}): Promise<Context> {
    const body: Record<string, unknown> = { language: opts.language ?? 'python' };
    if (opts.cwd !== undefined) body['cwd'] = opts.cwd;
    if (opts.envs !== undefined) body['env'] = opts.envs;
    if (opts.memory !== undefined) body['memory'] = opts.memory;
    if (opts.output !== undefined) body['output'] = opts.output;
    const doc = await this.api.json<Record<string, unknown>>('POST', '/contexts', body, `create a ${String(body['language'])} context`, [201]);
    return contextOf(doc, opts.cwd);
  }

  async list(): Promise<Context[]> {
    const doc = await this.api.json<{ contexts: Record<string, unknown>[] }>('GET', '/contexts', undefined, 'list contexts');
    return doc.contexts.map((c) => contextOf(c));
  }

  async remove(context: Context | string): Promise<void> {
    const id = typeof context === 'string' ? context : context.id;
    await this.api.json('DELETE', `/contexts/${encodeURIComponent(id)}`, undefined, `remove context ${id}`);
    for (const [lang, p] of this.defaults) {
      if ((await p.catch(() => undefined))?.id === id) this.defaults.delete(lang);
    }
  }

  private defaultFor(language: Language): Promise<Context> {
    let p = this.defaults.get(language);
    if (p === undefined) {
      p = this.create({ language });
      this.defaults.set(language, p);
      p.catch(() => this.defaults.delete(language));
    }
    return p;
  }

  /** Runs code in a context. An exception the code raised is in
   * `error`; a limit that ended the run throws LimitError (its `result`
   * the Execution, `restarted` true). */
  async run(code: string, opts: RunCodeOpts = {}): Promise<Execution> {
    if (opts.envs !== undefined && Object.keys(opts.envs).length > 0) {
      throw new TypeError("runCode's envs: a code context's environment is set when it is made: pass envs to createCodeContext() and run in that context");
    }
    const ctx = opts.context ?? (await this.defaultFor(opts.language ?? 'python'));
    const body: Record<string, unknown> = { code };
    if (opts.timeoutMs !== undefined) body['timeout'] = seconds(opts.timeoutMs, 'timeoutMs');
    const wait = opts.timeoutMs !== undefined ? opts.timeoutMs + this.api.transport.requestTimeoutMs : 24 * 3600_000;
    const doc = await this.api.json<Record<string, unknown>>('POST', `/contexts/${encodeURIComponent(ctx.id)}/run`, body, `run code in context ${ctx.id}`, [200], wait);
    const out = outText(doc, 'stdout');
    const err = outText(doc, 'stderr');
    const value = typeof doc['value'] === 'string' ? (doc['value'] as string) : undefined;
    const e = doc['error'] as Record<string, unknown> | null | undefined;
    const ex: Execution = {
      text: value,
      results: value !== undefined ? [{ text: value }] : [],
      logs: { stdout: out ? [out] : [], stderr: err ? [err] : [] },
      error: e ? { name: String(e['name'] ?? ''), value: String(e['message'] ?? ''), traceback: String(e['traceback'] ?? '') } : undefined,
      reason: String(doc['reason'] ?? ''),
      restarted: doc['restarted'] === true,
      restartReason: typeof doc['restart_reason'] === 'string' ? (doc['restart_reason'] as string) : undefined,
      denials: Array.isArray(doc['denials']) ? (doc['denials'] as Record<string, unknown>[]) : [],
      durationMs: typeof doc['duration_ms'] === 'number' ? (doc['duration_ms'] as number) : 0,
      contextId: ctx.id,
    };
    if (LIMIT_REASONS.has(ex.reason)) {
      throw new LimitError(`run code in context ${ctx.id}: ended by its ${ex.reason} limit; the interpreter was restarted`, ex.reason, ex);
    }
    const now = Date.now() * 1000;
    for (const c of ex.logs.stdout) await opts.onStdout?.(new OutputMessage(c, now, false));
    for (const c of ex.logs.stderr) await opts.onStderr?.(new OutputMessage(c, now, true));
    for (const r of ex.results) await opts.onResult?.(r);
    if (ex.error) await opts.onError?.(ex.error);
    return ex;
  }
}

/** A run's stdout or stderr as text: the daemon gives output that is not
 * UTF-8 in base64 (NAME_base64 true), decoded here with U+FFFD for the
 * bytes that are not. */
function outText(doc: Record<string, unknown>, name: string): string {
  const v = typeof doc[name] === 'string' ? (doc[name] as string) : '';
  return doc[`${name}_base64`] === true ? Buffer.from(v, 'base64').toString('utf8') : v;
}
