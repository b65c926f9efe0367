// The requests of one sandbox: each answer checked, a failure turned into
// the error class that says what it was.

import type * as http from 'node:http';

import { AirlockError, errorFromAnswer } from './errors.js';
import { Answer, Transport, parseJson } from './http.js';

export class SandboxApi {
  constructor(
    readonly transport: Transport,
    readonly sandboxId: string,
  ) {}

  /** The sandbox's own URL path, with `sub` after it. */
  path(sub = ''): string {
    return `/v1/sandboxes/${encodeURIComponent(this.sandboxId)}${sub}`;
  }

  /** The error for a failed answer. A 404 is the sandbox's own when the
   * daemon no longer knows the sandbox (asked once more to tell a missing
   * file or exec from a sandbox that is gone). */
  async fail(a: { status: number; body: unknown }, what: string): Promise<AirlockError> {
    let gone = false;
    if (a.status === 404) {
      try {
        const probe = await this.transport.request('GET', this.path());
        gone = probe.status === 404;
      } catch {
        gone = false;
      }
    }
    return errorFromAnswer(a.status, a.body, `${what} (sandbox ${this.sandboxId})`, gone);
  }

  /** A request whose answer is JSON: the parsed body when the status is
   * one of `ok`, else the error. */
  async json<T>(method: string, sub: string, body: unknown, what: string, ok = [200, 201], timeoutMs?: number): Promise<T> {
    const a = await this.transport.request(method, this.path(sub), body, timeoutMs);
    const doc = parseJson(a);
    if (!ok.includes(a.status)) throw await this.fail({ status: a.status, body: doc }, what);
    if (doc === undefined) throw new AirlockError(`${what}: the daemon's answer is not JSON`, a.status);
    return doc as T;
  }

  /** A request whose answer is raw bytes (a downloaded file). */
  async raw(method: string, sub: string, body: unknown, what: string): Promise<Answer> {
    const a = await this.transport.request(method, this.path(sub), body);
    if (a.status < 200 || a.status > 299) throw await this.fail({ status: a.status, body: parseJson(a) }, what);
    return a;
  }

  /** A streamed request: the answer's head once it is 200, else the error. */
  async stream(method: string, sub: string, body: unknown, what: string): Promise<http.IncomingMessage> {
    const res = await this.transport.open(method, this.path(sub), body);
    if (res.statusCode !== 200) {
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const a: Answer = { status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) };
      throw await this.fail({ status: a.status, body: parseJson(a) }, what);
    }
    return res;
  }
}

/** Seconds for the API from milliseconds (above 0: under one is rounded up
 * to a millisecond's worth). */
export function seconds(ms: number, what: string): number {
  if (!Number.isFinite(ms) || ms <= 0) throw new AirlockError(`${what}: ${ms} ms is not a time above 0`);
  return Math.max(ms, 1) / 1000;
}
