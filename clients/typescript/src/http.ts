// HTTP/1.1 to the daemon with Node's node:http only: over its Unix socket
// (`socketPath`) or over loopback TCP with a bearer token. One request per
// connection (no agent keeps sockets open), so that a program that is done
// with its sandboxes exits without closing anything.

import * as http from 'node:http';
import { StringDecoder } from 'node:string_decoder';

import { AirlockError } from './errors.js';

/** Where the daemon is. With neither `socket` nor `url`, the socket is
 * `$AIRLOCK_SOCKET`, else `/run/airlock/serve.sock`. */
export interface ConnectionOpts {
  /** The daemon's Unix socket. */
  socket?: string;
  /** `http://127.0.0.1:PORT` or `http://[::1]:PORT` (`airlock serve --listen`). */
  url?: string;
  /** The bearer token for `url` (a line of `--token-file`). */
  token?: string;
  /** How long one request may take before it is abandoned (default 60 s;
   * a waited exec or code run gets its own timeout plus this). */
  requestTimeoutMs?: number;
}

export interface Answer {
  status: number;
  type: string;
  body: Buffer;
}

/** The daemon's address, resolved once from ConnectionOpts. */
export class Transport {
  readonly socket?: string;
  readonly host?: string;
  readonly port?: number;
  readonly token?: string;
  readonly requestTimeoutMs: number;

  constructor(opts: ConnectionOpts = {}) {
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 60_000;
    this.token = opts.token;
    if (opts.url !== undefined) {
      let u: URL;
      try {
        u = new URL(opts.url);
      } catch {
        throw new AirlockError(`url ${JSON.stringify(opts.url)}: not a URL (give http://127.0.0.1:PORT)`);
      }
      if (u.protocol !== 'http:' || u.port === '' || (u.pathname !== '/' && u.pathname !== '')) {
        throw new AirlockError(`url ${JSON.stringify(opts.url)}: give http://HOST:PORT with no path`);
      }
      if (opts.token === undefined) {
        throw new AirlockError(`url ${opts.url}: a TCP connection needs a token (the daemon's --token-file)`);
      }
      this.host = u.hostname.replace(/^\[|\]$/g, '');
      this.port = Number(u.port);
    } else {
      this.socket = opts.socket ?? process.env['AIRLOCK_SOCKET'] ?? '/run/airlock/serve.sock';
    }
  }

  /** Options for the same daemon, passed on to a Sandbox's handles. */
  get opts(): ConnectionOpts {
    return this.socket !== undefined
      ? { socket: this.socket, requestTimeoutMs: this.requestTimeoutMs }
      : { url: `http://${this.host!.includes(':') ? `[${this.host}]` : this.host}:${this.port}`, token: this.token, requestTimeoutMs: this.requestTimeoutMs };
  }

  private where(): string {
    return this.socket !== undefined ? `socket ${this.socket}` : `http://${this.host}:${this.port}`;
  }

  /** Starts a request and resolves with the answer's head (its body not
   * yet read). `body` is JSON for an object, raw bytes for a Buffer. */
  open(method: string, path: string, body?: unknown, timeoutMs?: number): Promise<http.IncomingMessage> {
    let payload: Buffer | undefined;
    const headers: Record<string, string> = {};
    if (body instanceof Uint8Array) {
      payload = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
      headers['Content-Type'] = 'application/octet-stream';
    } else if (body !== undefined) {
      payload = Buffer.from(JSON.stringify(body));
      headers['Content-Type'] = 'application/json';
    } else if (method === 'POST' || method === 'PUT') {
      payload = Buffer.alloc(0);
    }
    if (payload !== undefined) headers['Content-Length'] = String(payload.length);
    if (this.token !== undefined) headers['Authorization'] = `Bearer ${this.token}`;
    const base: http.RequestOptions = { method, path, headers, agent: false };
    if (this.socket !== undefined) base.socketPath = this.socket;
    else {
      base.host = this.host;
      base.port = this.port;
    }
    const limit = timeoutMs ?? this.requestTimeoutMs;
    return new Promise((resolve, reject) => {
      const req = http.request(base, (res) => {
        // The deadline covers the head; a streamed body is the caller's.
        clearTimeout(timer);
        resolve(res);
      });
      const timer = setTimeout(() => {
        req.destroy(new AirlockError(`${method} ${path}: no answer from the daemon (${this.where()}) in ${limit} ms`));
      }, limit);
      req.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (err instanceof AirlockError) reject(err);
        else reject(new AirlockError(`${method} ${path}: cannot reach the daemon at ${this.where()}: ${err.message}`));
      });
      req.end(payload);
    });
  }

  /** A whole request: the answer's status, content type and body. */
  async request(method: string, path: string, body?: unknown, timeoutMs?: number): Promise<Answer> {
    const res = await this.open(method, path, body, timeoutMs);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    return { status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) };
  }
}

/** The JSON of an answer's body (undefined when it is not JSON). */
export function parseJson(a: Answer): unknown {
  if (!a.type.startsWith('application/json')) return undefined;
  try {
    return JSON.parse(a.body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function eventOf(line: string): Record<string, unknown> {
  let ev: unknown;
  try {
    ev = JSON.parse(line);
  } catch {
    ev = undefined;
  }
  if (typeof ev !== 'object' || ev === null || Array.isArray(ev)) {
    throw new AirlockError(`the daemon's event stream has a line that is not a JSON object: ${line.slice(0, 200)}`);
  }
  return ev as Record<string, unknown>;
}

/** Each JSON line of an NDJSON answer as it arrives. */
export async function* ndjson(res: http.IncomingMessage): AsyncGenerator<Record<string, unknown>> {
  let buf = '';
  // A decoder, not setEncoding: a caller may have read and unshifted
  // bytes already, and a character may be split between chunks.
  const dec = new StringDecoder('utf8');
  for await (const chunk of res) {
    buf += typeof chunk === 'string' ? chunk : dec.write(chunk as Buffer);
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) yield eventOf(line);
    }
  }
  buf += dec.end();
  if (buf.trim()) yield eventOf(buf.trim());
}

/** A sandbox path as the file API's URL path: each segment escaped once. */
export function filePath(path: string): string {
  const abs = path.startsWith('/') ? path : `/work/${path}`;
  const segs = abs.split('/').filter((s) => s !== '');
  return segs.map((s) => encodeURIComponent(s)).join('/');
}
