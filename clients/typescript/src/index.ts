// airlock-sdk: the TypeScript client of `airlock serve` (docs/clients.md).

export { Sandbox } from './sandbox.js';
export type { SandboxInfo, SandboxOpts } from './sandbox.js';
export { CommandHandle, Commands } from './commands.js';
export type { CommandResult, CommandRunOpts, CommandStartOpts, ProcessInfo } from './commands.js';
export { FileType, Files } from './files.js';
export type { EntryInfo, WriteInfo } from './files.js';
export { Pty, PtyHandle } from './pty.js';
export type { PtyCreateOpts, PtySize } from './pty.js';
export { CodeContexts, OutputMessage } from './code.js';
export type { Context, CreateCodeContextOpts, Execution, ExecutionError, Language, RunCodeOpts } from './code.js';
export type { ConnectionOpts } from './http.js';
export {
  AirlockError,
  BusyError,
  CommandExitError,
  InvalidRequestError,
  LimitError,
  NotFoundError,
  PolicyError,
  SandboxGoneError,
} from './errors.js';
