"""Stateful code contexts (the daemon's /contexts): a long-lived
interpreter in the sandbox per context, whose variables, imports and
loaded data stay between run_code calls."""

import time
from dataclasses import dataclass, field

from .commands import _text
from .errors import LimitError, LIMIT_REASONS


class OutputMessage(str):
    """A chunk of a run's output as run_code's on_stdout/on_stderr get it:
    the text itself (a str, so print(msg) and "".join work), with E2B's
    fields on it: .line (the same text), .error (True for stderr) and
    .timestamp (nanoseconds since the epoch, when the client got it)."""

    def __new__(cls, text, error=False, timestamp=None):
        self = super().__new__(cls, text)
        self.error = error
        self.timestamp = time.time_ns() if timestamp is None else timestamp
        return self

    @property
    def line(self):
        return str(self)


@dataclass
class Context:
    """A code context: id, language (python or node), and its counters
    as the daemon last gave them (state, runs, restarts)."""

    id: str
    language: str
    state: str = "idle"
    runs: int = 0
    restarts: int = 0


@dataclass
class ExecutionError:
    """An exception the code raised (not a failed run): name (its class),
    value (its message) and traceback (text)."""

    name: str
    value: str
    traceback: str


@dataclass
class Logs:
    """What the code printed: stdout and stderr as lists of chunks (E2B's
    shape; "".join(...) is the whole text)."""

    stdout: list = field(default_factory=list)
    stderr: list = field(default_factory=list)


@dataclass
class Result:
    """A value the code produced: text is the last expression's value as
    text (Python repr, Node util.inspect)."""

    text: str
    is_main_result: bool = True


@dataclass
class Execution:
    """One run_code: text (the last expression's value as text, or None),
    results ([Result] for it), logs, error (an ExecutionError when the
    code raised, else None), reason (ok, error, timeout, memory, output,
    killed, exited, protocol), restarted (True when this run ended the
    interpreter or found it gone and started a new one: its state is
    gone; restart_reason says why), denials (what the sandbox refused
    while it ran), context_id, duration_ms, and the daemon's whole
    answer as record."""

    text: "str | None"
    logs: Logs
    error: "ExecutionError | None"
    reason: str
    restarted: bool = False
    restart_reason: "str | None" = None
    denials: list = field(default_factory=list)
    context_id: "str | None" = None
    duration_ms: int = 0
    record: dict = field(default_factory=dict)

    @property
    def results(self):
        return [] if self.text is None else [Result(self.text)]


def context_from(doc):
    return Context(id=doc["context_id"], language=doc.get("language", ""),
                   state=doc.get("state", ""), runs=doc.get("runs", 0),
                   restarts=doc.get("restarts", 0))


def execution_from(doc):
    """The Execution for a /contexts/{cid}/run answer; raises LimitError
    when a limit ended the run (its interpreter restarted)."""
    err = doc.get("error")
    error = None
    if isinstance(err, dict):
        error = ExecutionError(name=err.get("name", ""), value=err.get("message", ""),
                               traceback=err.get("traceback", ""))
    # Output that is not UTF-8 (or mostly control bytes) comes as base64.
    out, errtext = _text(doc, "stdout"), _text(doc, "stderr")
    ex = Execution(text=doc.get("value"),
                   logs=Logs(stdout=[out] if out else [], stderr=[errtext] if errtext else []),
                   error=error, reason=doc.get("reason", ""),
                   restarted=bool(doc.get("restarted")),
                   restart_reason=doc.get("restart_reason"),
                   denials=list(doc.get("denials") or []), context_id=doc.get("context_id"),
                   duration_ms=doc.get("duration_ms", 0), record=doc)
    if ex.reason in LIMIT_REASONS:
        raise LimitError("the code was ended by its %s limit (its context restarted)"
                         % ex.reason, ex.reason, ex)
    return ex
