// Sandbox: one live sandbox of the daemon (POST /v1/sandboxes), with the
// E2B-shaped handles on it: commands, files, pty, runCode.

import { SandboxApi, seconds } from './api.js';
import { CodeContexts, Context, CreateCodeContextOpts, Execution, RunCodeOpts } from './code.js';
import { Commands } from './commands.js';
import { AirlockError, errorFromAnswer } from './errors.js';
import { Files } from './files.js';
import { ConnectionOpts, Transport, parseJson } from './http.js';
import { Pty } from './pty.js';

export interface SandboxOpts extends ConnectionOpts {
  /** A task policy (the JSON `airlock run --policy` reads): network,
   * limits, filesystem, secrets, env. Default: airlock's defaults. */
  policy?: Record<string, unknown>;
  /** The operator policy's profile to be held to. */
  profile?: string;
  /** Variables set in the sandbox (the task policy's `env`, added to
   * `policy.env`; held to the profile's env rules). */
  envs?: Record<string, string>;
  /** Its lifetime from now (default 300 s, as E2B's). */
  timeoutMs?: number;
  /** What setTimeout may extend it to (the daemon's default when left
   * out); the operator's profile bounds both. */
  maxLifetimeMs?: number;
  /** Ended (or paused, idleAction 'pause') after this long with no exec
   * running and no request. */
  idleTimeoutMs?: number;
  idleAction?: 'kill' | 'pause';
  /** String values to find it by with Sandbox.list. */
  metadata?: Record<string, string>;
  /** Execs running at once (1 to 64, default 8). */
  maxExecs?: number;
}

/** A sandbox as the daemon describes it. */
export interface SandboxInfo {
  sandboxId: string;
  state: string;
  metadata: Record<string, string>;
  startedAt?: Date;
  /** When it ends if nothing extends it (computed from its lifetime left). */
  endAt?: Date;
  profile?: string;
  /** Everything the daemon said. */
  raw: Record<string, unknown>;
}

function infoOf(doc: Record<string, unknown>): SandboxInfo {
  const left = doc['lifetime_left_ms'];
  return {
    sandboxId: String(doc['id']),
    state: typeof doc['state'] === 'string' ? (doc['state'] as string) : 'running',
    metadata: (doc['metadata'] ?? {}) as Record<string, string>,
    startedAt: typeof doc['created'] === 'string' ? new Date(doc['created'] as string) : undefined,
    endAt: typeof left === 'number' ? new Date(Date.now() + left) : undefined,
    profile: typeof doc['profile'] === 'string' ? (doc['profile'] as string) : undefined,
    raw: doc,
  };
}

async function call(t: Transport, method: string, path: string, body: unknown, what: string, ok: number[], timeoutMs?: number): Promise<Record<string, unknown>> {
  const a = await t.request(method, path, body, timeoutMs);
  const doc = parseJson(a);
  if (!ok.includes(a.status)) throw errorFromAnswer(a.status, doc, what, a.status === 404);
  if (typeof doc !== 'object' || doc === null) throw new AirlockError(`${what}: the daemon's answer is not JSON`, a.status);
  return doc as Record<string, unknown>;
}

export class Sandbox {
  readonly sandboxId: string;
  readonly commands: Commands;
  readonly files: Files;
  readonly pty: Pty;
  /** The code contexts (createCodeContext, runCode use these). */
  readonly contexts: CodeContexts;
  private readonly api: SandboxApi;

  private constructor(transport: Transport, id: string) {
    this.sandboxId = id;
    this.api = new SandboxApi(transport, id);
    this.commands = new Commands(this.api);
    this.files = new Files(this.api);
    this.pty = new Pty(this.api);
    this.contexts = new CodeContexts(this.api);
  }

  /** Makes a sandbox. A refusal by the operator policy throws PolicyError
   * with the engine's reasons; a bad policy InvalidRequestError. */
  static async create(opts: SandboxOpts = {}): Promise<Sandbox> {
    const t = new Transport(opts);
    const body: Record<string, unknown> = { ...(opts.policy ?? {}) };
    if (opts.profile !== undefined) body['profile'] = opts.profile;
    if (opts.envs !== undefined) body['env'] = { ...((body['env'] as Record<string, string> | undefined) ?? {}), ...opts.envs };
    body['lifetime'] = seconds(opts.timeoutMs ?? 300_000, 'timeoutMs');
    if (opts.maxLifetimeMs !== undefined) body['max_lifetime'] = seconds(opts.maxLifetimeMs, 'maxLifetimeMs');
    if (opts.idleTimeoutMs !== undefined) body['idle_timeout'] = seconds(opts.idleTimeoutMs, 'idleTimeoutMs');
    if (opts.idleAction !== undefined) body['idle_action'] = opts.idleAction;
    if (opts.metadata !== undefined) body['metadata'] = opts.metadata;
    if (opts.maxExecs !== undefined) body['max_execs'] = opts.maxExecs;
    // Setting a sandbox up can take seconds; the daemon ends one that has
    // not started in 120 s (504), so the answer is waited for past that.
    const doc = await call(t, 'POST', '/v1/sandboxes', body, 'create a sandbox', [201], 150_000);
    return new Sandbox(t, String(doc['id']));
  }

  /** A Sandbox object for a sandbox of the caller's that exists. */
  static async connect(sandboxId: string, opts: ConnectionOpts = {}): Promise<Sandbox> {
    const t = new Transport(opts);
    await call(t, 'GET', `/v1/sandboxes/${encodeURIComponent(sandboxId)}`, undefined, `sandbox ${sandboxId}`, [200]);
    return new Sandbox(t, sandboxId);
  }

  /** The caller's sandboxes, those whose metadata has each given value. */
  static async list(opts: ConnectionOpts & { metadata?: Record<string, string> } = {}): Promise<SandboxInfo[]> {
    const t = new Transport(opts);
    const q = Object.entries(opts.metadata ?? {})
      .map(([k, v]) => `metadata.${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
      .join('&');
    const doc = await call(t, 'GET', `/v1/sandboxes${q ? `?${q}` : ''}`, undefined, 'list sandboxes', [200]);
    return (doc['sandboxes'] as Record<string, unknown>[]).map(infoOf);
  }

  /** Ends a sandbox by id; false when it did not exist (any more). */
  static async kill(sandboxId: string, opts: ConnectionOpts = {}): Promise<boolean> {
    const t = new Transport(opts);
    const a = await t.request('DELETE', `/v1/sandboxes/${encodeURIComponent(sandboxId)}`);
    if (a.status === 404) return false;
    if (a.status !== 200) throw errorFromAnswer(a.status, parseJson(a), `kill sandbox ${sandboxId}`, false);
    return true;
  }

  /** Ends it: every process, mount and cgroup of it is gone when this
   * resolves; false when it had ended already. */
  async kill(): Promise<boolean> {
    return Sandbox.kill(this.sandboxId, this.api.transport.opts);
  }

  /** Its state, metadata, start and end. */
  async getInfo(): Promise<SandboxInfo> {
    return infoOf(await this.api.json<Record<string, unknown>>('GET', '', undefined, 'get info'));
  }

  /** Whether it is still running (or paused). */
  async isRunning(): Promise<boolean> {
    const a = await this.api.transport.request('GET', this.api.path());
    return a.status === 200;
  }

  /** Makes it end `timeoutMs` from now (at most its max lifetime). */
  async setTimeout(timeoutMs: number): Promise<void> {
    await this.api.json('POST', '/timeout', { timeout: seconds(timeoutMs, 'timeoutMs') }, 'set timeout');
  }

  /** Freezes it (nothing in it runs; its clocks stop) and thaws it. */
  async pause(): Promise<void> {
    await this.api.json('POST', '/pause', undefined, 'pause');
  }

  async resume(): Promise<void> {
    await this.api.json('POST', '/resume', undefined, 'resume');
  }

  /** Its audit stream (docs/audit.md), the last 4 MiB of it. */
  async audit(): Promise<Record<string, unknown>[]> {
    const a = await this.api.raw('GET', '/audit', undefined, 'audit');
    return a.body
      .toString('utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  /** Runs code in a long-lived interpreter: state stays between calls
   * (one default context per language, or the one given). */
  async runCode(code: string, opts: RunCodeOpts = {}): Promise<Execution> {
    return this.contexts.run(code, opts);
  }

  /** A new context of its own (E2B's name). */
  async createCodeContext(opts: CreateCodeContextOpts = {}): Promise<Context> {
    return this.contexts.create(opts);
  }

  async listCodeContexts(): Promise<Context[]> {
    return this.contexts.list();
  }

  async removeCodeContext(context: Context | string): Promise<void> {
    return this.contexts.remove(context);
  }
}
