// The client's error classes. Every error the daemon answers is an
// AirlockError with its HTTP status and parsed body; the subclasses say
// what kind it was so that callers can catch one kind (a policy refusal,
// a limit hit, a sandbox that is gone) without reading status codes.

/** The base class: `status` is the HTTP status (0 when no answer came),
 * `body` the daemon's JSON answer when it sent one. */
export class AirlockError extends Error {
  readonly status: number;
  readonly body: unknown;

  constructor(message: string, status = 0, body: unknown = undefined) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.body = body;
  }
}

/** 400: the request was malformed; `errors` lists each field named wrong. */
export class InvalidRequestError extends AirlockError {
  readonly errors: string[];

  constructor(message: string, status: number, body: unknown, errors: string[]) {
    super(message, status, body);
    this.errors = errors;
  }
}

/** 403: the operator policy refused the request; `reasons` are the
 * engine's lines, as `airlock check --explain` prints them. */
export class PolicyError extends AirlockError {
  readonly reasons: string[];

  constructor(message: string, status: number, body: unknown, reasons: string[]) {
    super(message, status, body);
    this.reasons = reasons;
  }
}

/** 404 for the sandbox itself: it was killed, timed out, or is not the
 * caller's. */
export class SandboxGoneError extends AirlockError {}

/** 404 for something inside a live sandbox (a file, an exec, a context). */
export class NotFoundError extends AirlockError {}

/** 409 or 429: busy (a context's run in progress, too many execs or
 * sandboxes, a paused sandbox, a file that exists already). */
export class BusyError extends AirlockError {}

/** A command or a code run ended by a limit: `reason` is the record's
 * (timeout, memory, output, pids, cpu-time, budget); `result` is the
 * CommandResult or Execution it ended with. */
export class LimitError extends AirlockError {
  readonly reason: string;
  readonly result: unknown;

  constructor(message: string, reason: string, result: unknown) {
    super(message);
    this.reason = reason;
    this.result = result;
  }
}

/** The command ended with an exit code other than 0 (or by a signal), as
 * E2B's `commands.run` throws; the result is kept. */
export class CommandExitError extends AirlockError {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly reason: string;
  readonly result: unknown;

  constructor(
    message: string,
    result: { exitCode: number | null; stdout: string; stderr: string; reason: string },
  ) {
    super(message);
    this.exitCode = result.exitCode;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
    this.reason = result.reason;
    this.result = result;
  }
}

/** The record reasons that mean a limit ended the run. */
export const LIMIT_REASONS: ReadonlySet<string> = new Set([
  'timeout',
  'memory',
  'output',
  'pids',
  'cpu-time',
  'budget',
]);

function stringList(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

/** The error for a non-2xx answer. `what` says which request it was (for
 * the message); `gone` says whether a 404 means the sandbox itself. */
export function errorFromAnswer(status: number, body: unknown, what: string, gone: boolean): AirlockError {
  const doc = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const text = typeof doc['error'] === 'string' ? (doc['error'] as string) : `HTTP ${status}`;
  const message = `${what}: ${text}`;
  switch (status) {
    case 400:
      return new InvalidRequestError(message, status, body, stringList(doc['errors']).length ? stringList(doc['errors']) : [text]);
    case 403: {
      // The reasons in the message too, so that an uncaught one says why.
      const reasons = stringList(doc['reasons']);
      return new PolicyError(reasons.length ? `${message}: ${reasons.join('; ')}` : message, status, body, reasons);
    }
    case 404:
      return gone ? new SandboxGoneError(message, status, body) : new NotFoundError(message, status, body);
    case 409:
    case 429:
    case 503:
      return new BusyError(message, status, body);
    default:
      return new AirlockError(message, status, body);
  }
}
