// sandbox.files: the daemon's file API, inside the sandbox's scratch
// (/work, /tmp). Relative paths are taken from /work.

import { SandboxApi } from './api.js';
import { AirlockError, BusyError, NotFoundError } from './errors.js';
import { filePath } from './http.js';

/** The kinds an entry can be (E2B's FileType names FILE and DIR). */
export const FileType = {
  FILE: 'file',
  DIR: 'dir',
  SYMLINK: 'symlink',
  OTHER: 'other',
} as const;
export type FileType = (typeof FileType)[keyof typeof FileType];

export interface EntryInfo {
  name: string;
  type: FileType;
  /** The sandbox path of the entry. */
  path: string;
  size: number;
  mode: number;
}

/** What files.write answers. */
export interface WriteInfo {
  name: string;
  type: FileType;
  path: string;
  size: number;
}

function abs(path: string): string {
  return `/${filePath(path)
    .split('/')
    .map((s) => decodeURIComponent(s))
    .join('/')}`;
}

function parentOf(path: string): string {
  const p = abs(path);
  return p.slice(0, p.lastIndexOf('/')) || '/';
}

export class Files {
  constructor(private readonly api: SandboxApi) {}

  private url(path: string, query = ''): string {
    return `/files/${filePath(path)}${query}`;
  }

  /** The file's text (UTF-8), or with `{format: 'bytes'}` its bytes. */
  read(path: string, opts?: { format?: 'text' }): Promise<string>;
  read(path: string, opts: { format: 'bytes' }): Promise<Uint8Array>;
  async read(path: string, opts: { format?: 'text' | 'bytes' } = {}): Promise<string | Uint8Array> {
    const a = await this.api.raw('GET', this.url(path), undefined, `read ${abs(path)}`);
    if (a.type.startsWith('application/json')) throw new AirlockError(`read ${abs(path)}: a directory (use files.list)`, a.status);
    return opts.format === 'bytes' ? new Uint8Array(a.body) : a.body.toString('utf8');
  }

  /** Writes the file (created or truncated), making its missing parent
   * directories first. */
  async write(path: string, data: string | Uint8Array | ArrayBuffer): Promise<WriteInfo> {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    const put = (): Promise<{ path: string; type: FileType; size: number }> =>
      this.api.json('PUT', this.url(path), bytes, `write ${abs(path)}`, [201]);
    let doc;
    try {
      doc = await put();
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      await this.makeDir(parentOf(path));
      doc = await put();
    }
    const p = abs(path);
    return { name: p.slice(p.lastIndexOf('/') + 1), type: doc.type, path: p, size: doc.size };
  }

  /** The entries of a directory (links listed, not followed). */
  async list(path: string): Promise<EntryInfo[]> {
    const dir = abs(path);
    const doc = await this.api.json<{ entries: Record<string, unknown>[] }>('GET', this.url(path), undefined, `list ${dir}`, [200]);
    if (!Array.isArray(doc.entries)) throw new AirlockError(`list ${dir}: not a directory`);
    return doc.entries.map((e) => ({
      name: String(e['name']),
      type: String(e['type']) as FileType,
      path: `${dir === '/' ? '' : dir}/${String(e['name'])}`,
      size: typeof e['size'] === 'number' ? (e['size'] as number) : 0,
      mode: typeof e['mode'] === 'number' ? (e['mode'] as number) : 0,
    }));
  }

  /** Whether the path exists (as a file, directory, link or other). */
  async exists(path: string): Promise<boolean> {
    const p = abs(path);
    const name = p.slice(p.lastIndexOf('/') + 1);
    try {
      return (await this.list(parentOf(p))).some((e) => e.name === name);
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      if (!(e instanceof AirlockError) || (e.status !== 403 && e.status !== 400)) throw e;
    }
    // The parent is outside the scratch (/work itself): ask for the path.
    try {
      await this.api.raw('GET', this.url(p), undefined, `exists ${p}`);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Makes the directory and its missing parents; false when it existed. */
  async makeDir(path: string): Promise<boolean> {
    const p = abs(path);
    try {
      await this.api.json('PUT', this.url(p, '?mkdir=1'), undefined, `makeDir ${p}`, [201]);
      return true;
    } catch (e) {
      if (e instanceof BusyError && e.status === 409) return false;
      if (!(e instanceof NotFoundError) || parentOf(p) === p) throw e;
    }
    await this.makeDir(parentOf(p));
    return this.makeDir(p);
  }

  /** Removes a file, a link, or a directory with everything in it. */
  async remove(path: string): Promise<void> {
    const p = abs(path);
    try {
      await this.api.json('DELETE', this.url(p), undefined, `remove ${p}`, [200]);
      return;
    } catch (e) {
      if (!(e instanceof BusyError && e.status === 409)) throw e;
    }
    // A directory that is not empty: its entries first.
    for (const entry of await this.list(p)) await this.remove(entry.path);
    await this.api.json('DELETE', this.url(p), undefined, `remove ${p}`, [200]);
  }
}
