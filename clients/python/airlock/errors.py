"""The client's typed exceptions, one per way a request can fail.

Every exception is an AirlockError; the daemon's answer, when there was
one, is kept as .status (the HTTP status) and .body (the decoded JSON
error object, or None).
"""


class AirlockError(Exception):
    """A request to the daemon failed: .status (HTTP status or None when
    the daemon could not be reached), .body (its JSON error object)."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message)
        self.status = status
        self.body = body


class InvalidRequestError(AirlockError):
    """400: the daemon refused the request's form; .errors lists each
    field it named (the same text as the message when it named one)."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message, status, body)
        errs = (body or {}).get("errors")
        self.errors = list(errs) if isinstance(errs, list) else [message]


class PolicyError(AirlockError):
    """403: the operator policy refused the request; .reasons holds the
    engine's lines, as `airlock check --explain` prints them."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message, status, body)
        reasons = (body or {}).get("reasons")
        self.reasons = list(reasons) if isinstance(reasons, list) else []

    def __str__(self):
        if not self.reasons:
            return super().__str__()
        return "%s: %s" % (super().__str__(), "; ".join(str(r) for r in self.reasons))


class SandboxGoneError(AirlockError):
    """404 for the sandbox itself: it was killed, its lifetime ran out, or
    it was never this caller's."""


class NotFoundError(AirlockError):
    """404 for something inside a live sandbox: a file, an exec, a
    context."""


class BusyError(AirlockError):
    """409 or 429: the sandbox is paused or busy (a run of the same
    context in progress, stdin closed), or a cap was reached
    (max_execs, --max-sandboxes, 8 contexts)."""


class LimitError(AirlockError):
    """A command or a code run was ended by a limit: .reason is the
    limit (timeout, memory, output, pids, cpu-time, budget), .result the
    CommandResult or Execution with what it printed before."""

    def __init__(self, message, reason, result):
        super().__init__(message)
        self.reason = reason
        self.result = result


class CommandExitError(AirlockError):
    """commands.run's command ended with an exit code other than 0 (or by
    a signal, or could not be executed), as E2B's SDK raises it. .result
    is the CommandResult; .exit_code, .stdout, .stderr and .error are
    its fields."""

    def __init__(self, result):
        super().__init__("the command %s (exit code %s)" % (
            "ended: " + result.reason if result.reason != "exited" else "failed",
            result.exit_code))
        self.result = result
        self.exit_code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.error = result.error


# What an exec's or a context run's "reason" says when a limit ended it.
LIMIT_REASONS = frozenset(("timeout", "memory", "output", "pids", "cpu-time", "budget"))


def error_from_answer(status, body, what):
    """The exception for a failed answer: status, its decoded JSON body
    (or None), and what was asked (for the message)."""
    msg = body.get("error") if isinstance(body, dict) else None
    if not isinstance(msg, str) or not msg:
        msg = "HTTP %d" % status
    msg = "%s: %s" % (what, msg)
    body = body if isinstance(body, dict) else None
    if status == 400:
        return InvalidRequestError(msg, status, body)
    if status == 403:
        return PolicyError(msg, status, body)
    if status == 404:
        return NotFoundError(msg, status, body)
    if status in (409, 429):
        return BusyError(msg, status, body)
    return AirlockError(msg, status, body)
