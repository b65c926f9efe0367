"""Commands in a live sandbox (sbx.commands) and terminals (sbx.pty): the
daemon's execs, waited, streamed as NDJSON, or in the background."""

import base64
import threading
import urllib.parse
from dataclasses import dataclass, field

from .errors import (AirlockError, BusyError, CommandExitError, LimitError, LIMIT_REASONS,
                     NotFoundError)


@dataclass
class CommandResult:
    """How a command ended. stdout/stderr: what it printed (text; bytes
    that are not UTF-8 replaced); exit_code: its exit code (None when a
    signal or a limit ended it); reason: the daemon's word for the end
    (exited, signaled, timeout, memory, output, killed, exec-failed);
    error: a sentence for an end that was not a clean exit, else None;
    denials: the audit lines of what the sandbox refused while it ran
    (a connection, a DNS name, a system call); record: the exec's whole
    record as the daemon gave it."""

    stdout: str
    stderr: str
    exit_code: "int | None"
    reason: str
    error: "str | None" = None
    denials: list = field(default_factory=list)
    exec_id: "str | None" = None
    record: dict = field(default_factory=dict)


@dataclass
class ProcessInfo:
    """An exec of the sandbox as commands.list() gives it, in E2B's
    shape: pid (the exec id, a string), cmd (argv[0]) and args (the rest
    of argv); and airlock's: exec_id (the same as pid), state (running or
    ended), argv, background, tty, started_ms, result (the exec's record
    once it ended, else None) and record (the daemon's whole entry). envs
    and cwd are not reported by the daemon ({} and None)."""

    pid: str
    cmd: str
    args: list
    state: str
    exec_id: str
    argv: list = field(default_factory=list)
    background: bool = False
    tty: bool = False
    started_ms: "int | None" = None
    result: "dict | None" = None
    envs: dict = field(default_factory=dict)
    cwd: "str | None" = None
    tag: "str | None" = None
    record: dict = field(default_factory=dict)


def _process_info(e):
    argv = list(e.get("argv") or [])
    return ProcessInfo(pid=e.get("exec_id", ""), cmd=argv[0] if argv else "", args=argv[1:],
                       state=e.get("state", ""), exec_id=e.get("exec_id", ""), argv=argv,
                       background=bool(e.get("background")), tty=bool(e.get("tty")),
                       started_ms=e.get("started_ms"), result=e.get("result"), record=e)


@dataclass
class PtySize:
    """A terminal's size in character cells."""

    rows: int = 24
    cols: int = 80


def _argv(cmd):
    """A command as the exec's argv: a string runs under `bash -c` (as
    E2B's does), a list is the argv itself."""
    if isinstance(cmd, str):
        return ["/bin/bash", "-c", cmd]
    if isinstance(cmd, (list, tuple)) and cmd and all(isinstance(a, str) for a in cmd):
        return list(cmd)
    raise ValueError("cmd %r: expected a shell command (a string) or an argv "
                     "(a non-empty list of strings)" % (cmd,))


def _event_bytes(ev):
    data = ev.get("data", "")
    if ev.get("data_base64"):
        return base64.b64decode(data)
    return data.encode()


def _result(record, stdout, stderr, denials):
    reason = record.get("reason", "")
    code = record.get("exit_code")
    error = None
    if reason in LIMIT_REASONS:
        error = "ended by its %s limit" % reason
    elif reason != "exited":
        error = "ended: %s" % reason
    elif code != 0:
        error = "exit status %s" % code
    return CommandResult(stdout=stdout, stderr=stderr, exit_code=code, reason=reason,
                         error=error, denials=list(denials), exec_id=record.get("exec_id"),
                         record=record)


def check_result(res):
    """Raises LimitError for a limit's end, CommandExitError for any other
    end than exit code 0; returns res otherwise."""
    if res.reason in LIMIT_REASONS:
        raise LimitError("the command was ended by its %s limit" % res.reason, res.reason, res)
    if res.reason != "exited" or res.exit_code != 0:
        raise CommandExitError(res)
    return res


class _Collector:
    """Folds an exec's NDJSON events into its output and result, feeding
    each chunk to the callbacks as it comes."""

    def __init__(self, on_stdout=None, on_stderr=None, on_data=None):
        self.out, self.err, self.denials = [], [], []
        self.on_stdout, self.on_stderr, self.on_data = on_stdout, on_stderr, on_data
        self.exec_id, self.record = None, None

    def feed(self, ev):
        t = ev.get("type")
        if t == "start":
            self.exec_id = ev.get("exec_id")
        elif t in ("stdout", "stderr"):
            raw = _event_bytes(ev)
            (self.out if t == "stdout" else self.err).append(raw)
            if self.on_data is not None:
                self.on_data(raw)
            cb = self.on_stdout if t == "stdout" else self.on_stderr
            if cb is not None:
                cb(raw.decode("utf-8", "replace"))
        elif t == "denial":
            self.denials.append(ev.get("event"))
        elif t == "end":
            self.record = ev.get("result") or {}
        return t == "end"

    def result(self, what):
        if self.record is None:
            raise AirlockError("%s: the stream ended before the command did" % what)
        return _result(self.record, b"".join(self.out).decode("utf-8", "replace"),
                       b"".join(self.err).decode("utf-8", "replace"), self.denials)


class CommandHandle:
    """A command running in the background: .pid (its exec id, the name
    E2B's SDK uses; also .exec_id). wait() follows it to its end; kill(),
    send_stdin() and close_stdin() act on it while it runs."""

    def __init__(self, sandbox, exec_id, on_stdout=None, on_stderr=None, on_data=None):
        self._sbx = sandbox
        self.exec_id = self.pid = exec_id
        self._lock = threading.Lock()
        self._thread = None
        self._collector = None
        self._error = None
        if on_stdout or on_stderr or on_data:
            self._collector = _Collector(on_stdout, on_stderr, on_data)
            self._thread = threading.Thread(target=self._follow, daemon=True,
                                            name="airlock-exec-" + exec_id)
            self._thread.start()

    def _base(self):
        return "%s/execs/%s" % (self._sbx._path, urllib.parse.quote(self.exec_id, safe=""))

    def _follow(self):
        try:
            for ev in self._sbx._events("GET", self._base()):
                if self._collector.feed(ev):
                    break
        except BaseException as e:  # kept for wait() to raise in its caller's thread
            self._error = e

    def wait(self, on_stdout=None, on_stderr=None, timeout=None):
        """Waits for the command's end; returns its CommandResult (the
        whole output since it started, what the daemon's 1 MiB event
        buffer kept). Raises CommandExitError for an exit code other than
        0, LimitError when a limit ended it. The callbacks, when given and
        none were given to run(), get each chunk as it comes. timeout:
        seconds to wait at most (AirlockError past it; the command goes
        on)."""
        what = "exec %s" % self.exec_id
        if self._thread is None:
            c = _Collector(on_stdout, on_stderr)
            for ev in self._sbx._events("GET", self._base(), timeout=timeout):
                if c.feed(ev):
                    break
            return check_result(c.result(what))
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AirlockError("%s: still running after %s s" % (what, timeout))
        if self._error is not None:
            raise self._error
        return check_result(self._collector.result(what))

    def kill(self):
        """Kills the command (its reason becomes killed); True when it was
        running, False when it had ended already."""
        try:
            self._sbx._json("DELETE", self._base())
            return True
        except (NotFoundError, BusyError):
            return False

    def send_stdin(self, data):
        """Queues data (str or bytes) for the command's stdin (a terminal:
        what is typed). BusyError once it ended or its stdin is closed."""
        if isinstance(data, str):
            data = data.encode()
        self._sbx._json("POST", self._base() + "/stdin", bytes(data))

    def close_stdin(self):
        """Closes the command's stdin (a terminal: types ^D)."""
        self._sbx._json("POST", self._base() + "/stdin?close=1", b"")


class Commands:
    """sbx.commands: run commands in the sandbox."""

    def __init__(self, sandbox):
        self._sbx = sandbox

    def run(self, cmd, background=False, envs=None, cwd=None, on_stdout=None,
            on_stderr=None, stdin=None, timeout=60, memory=None, output=None):
        """Runs cmd (a string, run by `bash -c`, or an argv list) in the
        sandbox as its own process, confined as the sandbox is.

        Waits for its end and returns a CommandResult, unless background
        (then a CommandHandle at once). on_stdout/on_stderr get each chunk
        of output (text) as the daemon streams it, while the command runs.
        envs: variables added (held to the profile's env rules: a name not
        allowed is a PolicyError); cwd: an absolute path (default /work);
        stdin: a string given as its whole stdin (then closed; a background
        command's stdin stays open for send_stdin otherwise; E2B's
        stdin=True is taken with background=True, refused without); timeout:
        seconds (0 or None: none, the sandbox's lifetime still ends it);
        memory, output: its own limits ("64M" or bytes), at most the
        sandbox's.

        Raises CommandExitError when the exit code is not 0 (the result is
        on it), LimitError when a limit ended it, PolicyError when the
        daemon refused it."""
        body = {"argv": _argv(cmd)}
        if envs:
            body["env"] = dict(envs)
        if cwd is not None:
            body["cwd"] = cwd
        if timeout:
            body["timeout"] = timeout
        if isinstance(stdin, bool):  # E2B's flag: a stdin to send_stdin to
            if stdin and not background:
                raise ValueError("stdin=True: only a background command's stdin stays open "
                                 "for send_stdin (give background=True, or the text itself "
                                 "as stdin=)")
        elif isinstance(stdin, (str, bytes)):
            body["stdin"] = stdin if isinstance(stdin, str) else stdin.decode()
        elif stdin is not None:
            raise TypeError("stdin: expected the text of the command's whole stdin (str or "
                            "bytes), or E2B's True/False, not %s" % type(stdin).__name__)
        for k, v in (("memory", memory), ("output", output)):
            if v is not None:
                body[k] = v
        path = self._sbx._path + "/exec"
        if background:
            body["background"] = True
            doc = self._sbx._json("POST", path, body)
            return CommandHandle(self._sbx, doc["exec_id"], on_stdout, on_stderr)
        if on_stdout is None and on_stderr is None:
            body["wait"] = True
            doc = self._sbx._json("POST", path, body, timeout=None)
            return check_result(_result(doc, _text(doc, "stdout"), _text(doc, "stderr"),
                                        doc.get("denials") or []))
        c = _Collector(on_stdout, on_stderr)
        for ev in self._sbx._events("POST", path, body):
            if c.feed(ev):
                break
        return check_result(c.result("the command %r" % (cmd,)))

    def connect(self, pid, on_stdout=None, on_stderr=None):
        """A handle on a background command by its exec id (pid)."""
        return CommandHandle(self._sbx, pid, on_stdout, on_stderr)

    def send_stdin(self, pid, data):
        """Queues data for the stdin of the command with exec id pid."""
        CommandHandle(self._sbx, pid).send_stdin(data)

    def kill(self, pid):
        """Kills the command with exec id pid; False when it had ended."""
        return CommandHandle(self._sbx, pid).kill()

    def list(self):
        """The sandbox's execs, running ones and the last 64 ended
        ([ProcessInfo]: .pid, .cmd, .args as E2B's; .state says which)."""
        doc = self._sbx._json("GET", self._sbx._path + "/execs")
        return [_process_info(e) for e in doc.get("execs", [])]


def _text(doc, name):
    v = doc.get(name) or ""
    if doc.get(name + "_base64"):
        return base64.b64decode(v).decode("utf-8", "replace")
    return v


class Pty:
    """sbx.pty: interactive terminals (an exec with a pseudo-terminal of
    the sandbox's own devpts)."""

    def __init__(self, sandbox):
        self._sbx = sandbox

    def create(self, size=None, on_data=None, cwd=None, envs=None, timeout=None,
               cmd=None, rows=24, cols=80):
        """Starts cmd (default: an interactive bash) on a new terminal of
        size (a PtySize, or rows and cols); returns its CommandHandle at
        once, on which send_stdin types, resize() changes the size, kill()
        ends it, wait() follows it to the end. on_data gets the terminal's
        output (bytes) as it comes; its output is re-encoded so that only
        what acts on a screen passes (docs/api.md)."""
        if size is not None:
            rows, cols = size.rows, size.cols
        body = {"argv": _argv(cmd) if cmd is not None else
                ["/bin/bash", "--norc", "--noprofile", "-i"],
                "tty": True, "rows": rows, "cols": cols, "background": True}
        if envs:
            body["env"] = dict(envs)
        if cwd is not None:
            body["cwd"] = cwd
        if timeout:
            body["timeout"] = timeout
        doc = self._sbx._json("POST", self._sbx._path + "/exec", body)
        return PtyHandle(self._sbx, doc["exec_id"], on_data=on_data, follow=True)

    def send_stdin(self, pid, data):
        """Types data (bytes or str) into the terminal with exec id pid."""
        PtyHandle(self._sbx, pid).send_stdin(data)

    def resize(self, pid, size):
        """Sets the size (a PtySize) of the terminal with exec id pid."""
        PtyHandle(self._sbx, pid).resize(size.rows, size.cols)

    def kill(self, pid):
        """Kills the terminal's command; False when it had ended."""
        return PtyHandle(self._sbx, pid).kill()


class PtyHandle(CommandHandle):
    """A command on a terminal: a CommandHandle that can also resize().
    A handle from pty.create() follows the terminal from its start, so
    that wait(on_pty=...) gets all of its output, also what came before
    wait was called (E2B's way of reading a terminal)."""

    def __init__(self, sandbox, exec_id, on_data=None, follow=False):
        self._sinks = [on_data] if on_data is not None else []
        self._seen = []
        self._sink_lock = threading.Lock()
        super().__init__(sandbox, exec_id, on_data=self._dispatch if follow else None)

    def _dispatch(self, data):
        # Under the lock, so that wait(on_pty) replays what came before it
        # and then gets the rest, each chunk once and in order.
        with self._sink_lock:
            self._seen.append(data)
            for sink in self._sinks:
                sink(data)

    def resize(self, rows, cols=None):
        """The terminal's new size (rows and cols, or a PtySize); its
        process group gets SIGWINCH."""
        if isinstance(rows, PtySize):
            rows, cols = rows.rows, rows.cols
        self._sbx._json("POST", self._base() + "/resize", {"rows": rows, "cols": cols})

    def wait(self, on_pty=None, timeout=None):
        """Waits for the terminal's command to end; returns its
        CommandResult (stdout: the terminal's output). on_pty gets the
        terminal's output (bytes): what it printed so far at once, then
        each chunk as it comes, as create's on_data does."""
        if on_pty is not None:
            if self._thread is None:  # a handle by id: followed from the start
                self._collector = _Collector(on_data=self._dispatch)
                self._thread = threading.Thread(target=self._follow, daemon=True)
                self._thread.start()
            with self._sink_lock:
                for data in self._seen:
                    on_pty(data)
                self._sinks.append(on_pty)
        return super().wait(timeout=timeout)
