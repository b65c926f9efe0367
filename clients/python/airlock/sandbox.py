"""Sandbox: one live sandbox of the daemon (`airlock serve`), made by
POST /v1/sandboxes and ended by kill() or at its lifetime's end."""

import json
import urllib.parse
from dataclasses import dataclass, field

from ._http import Transport
from .code import OutputMessage, context_from, execution_from
from .commands import Commands, Pty
from .errors import NotFoundError, SandboxGoneError
from .files import Files

_LANGUAGES = {"python": "python", "python3": "python", "node": "node", "js": "node",
              "javascript": "node"}


@dataclass
class SandboxInfo:
    """A sandbox as the daemon describes it: sandbox_id, state (running,
    paused, ended), metadata, started_at (RFC 3339), lifetime_left_ms,
    profile, and the whole object as record. Sandbox.list() fills only
    sandbox_id and metadata."""

    sandbox_id: str
    metadata: dict = field(default_factory=dict)
    state: "str | None" = None
    started_at: "str | None" = None
    lifetime_left_ms: "int | None" = None
    profile: "str | None" = None
    record: dict = field(default_factory=dict)


def _info(doc):
    return SandboxInfo(sandbox_id=doc["id"], metadata=doc.get("metadata") or {},
                       state=doc.get("state"), started_at=doc.get("created"),
                       lifetime_left_ms=doc.get("lifetime_left_ms"),
                       profile=doc.get("profile"), record=doc)


class Sandbox:
    """A live sandbox. Sandbox(...) and Sandbox.create(...) make one;
    `with Sandbox() as sbx:` kills it at the block's end.

    policy: the task policy as `airlock run --policy` reads it (a dict:
    network, limits, env, ...; None takes the defaults); profile: the
    operator policy's profile to be held to; timeout: seconds it lives
    (its lifetime; E2B's default, 300); max_lifetime: seconds set_timeout
    may extend it to (default: timeout); idle_timeout, idle_action ("kill"
    or "pause"), max_execs: as the API takes them; metadata: string values
    for Sandbox.list(metadata=...); envs: variables of every command
    (held to the profile's env rules). socket, url, token: where the
    daemon is (default: $AIRLOCK_SOCKET, else /run/airlock/serve.sock);
    request_timeout: seconds a request other than a command may take.

    Raises PolicyError (the engine's reasons) when the operator policy
    refuses the request, InvalidRequestError for a wrong field,
    BusyError at --max-sandboxes."""

    def __init__(self, policy=None, profile=None, timeout=300, metadata=None, envs=None,
                 max_lifetime=None, idle_timeout=None, idle_action=None, max_execs=None,
                 socket=None, url=None, token=None, request_timeout=60, _id=None):
        self._t = Transport(socket=socket, url=url, token=token,
                            request_timeout=request_timeout)
        self._contexts = {}
        self.commands = Commands(self)
        self.files = Files(self)
        self.pty = Pty(self)
        if _id is not None:
            self._set_id(_id)
            return
        body = dict(policy or {})
        for k, v in (("profile", profile), ("lifetime", timeout), ("metadata", metadata),
                     ("max_lifetime", max_lifetime), ("idle_timeout", idle_timeout),
                     ("idle_action", idle_action), ("max_execs", max_execs)):
            if v is not None:
                body[k] = v
        if envs:
            body["env"] = dict(body.get("env") or {}, **envs)
        # Setting a sandbox up takes a few seconds; the daemon bounds it.
        doc = self._t.json("POST", "/v1/sandboxes", body, timeout=None)
        self._set_id(doc["id"])

    def _set_id(self, sid):
        self.sandbox_id = sid
        self._path = "/v1/sandboxes/" + urllib.parse.quote(sid, safe="")

    @classmethod
    def create(cls, **kw):
        """Makes a sandbox: the same arguments as Sandbox(...)."""
        return cls(**kw)

    @classmethod
    def connect(cls, sandbox_id, socket=None, url=None, token=None, request_timeout=60):
        """A Sandbox for an existing sandbox of the caller's, by id
        (SandboxGoneError when there is none)."""
        sbx = cls(socket=socket, url=url, token=token, request_timeout=request_timeout,
                  _id=sandbox_id)
        sbx.get_info()
        return sbx

    @staticmethod
    def list(metadata=None, socket=None, url=None, token=None):
        """The caller's sandboxes ([SandboxInfo] with sandbox_id and
        metadata), only those whose metadata has each KEY: VALUE of
        metadata when given."""
        t = Transport(socket=socket, url=url, token=token)
        q = urllib.parse.urlencode({"metadata." + k: v for k, v in (metadata or {}).items()})
        doc = t.json("GET", "/v1/sandboxes" + ("?" + q if q else ""))
        return [_info(s) for s in doc.get("sandboxes", [])]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def __repr__(self):
        return "Sandbox(%r)" % getattr(self, "sandbox_id", None)

    # Requests naming this sandbox: a 404 is SandboxGoneError when the
    # sandbox itself is gone (asked again, so that a file or exec that is
    # not there stays a NotFoundError).
    def _gone_or(self, e):
        try:
            self._t.json("GET", self._path)
        except NotFoundError as gone:
            return SandboxGoneError("sandbox %s is gone (killed, or its lifetime ended): %s"
                                    % (self.sandbox_id, gone), gone.status, gone.body)
        return e

    def _request(self, method, path, body=None, timeout="default"):
        try:
            return self._t.request(method, path, body, timeout)
        except NotFoundError as e:
            raise self._gone_or(e) from None

    def _json(self, method, path, body=None, timeout="default"):
        try:
            return self._t.json(method, path, body, timeout)
        except NotFoundError as e:
            raise self._gone_or(e) from None

    def _events(self, method, path, body=None, timeout=None):
        try:
            yield from self._t.events(method, path, body, timeout)
        except NotFoundError as e:
            raise self._gone_or(e) from None

    def get_info(self):
        """The sandbox as the daemon describes it (SandboxInfo)."""
        return _info(self._json("GET", self._path))

    def is_running(self):
        """True while the sandbox lives (running or paused)."""
        try:
            return self.get_info().state != "ended"
        except SandboxGoneError:
            return False

    def set_timeout(self, timeout):
        """The sandbox now ends timeout seconds from now (at most its
        max_lifetime from its start: InvalidRequestError past it)."""
        self._json("POST", self._path + "/timeout", {"timeout": timeout})

    def kill(self):
        """Ends the sandbox and removes everything of it (processes,
        mounts, cgroups, scratch) before it returns; True when it was
        alive, False when it was gone already. Any later request on it
        raises SandboxGoneError."""
        try:
            self._t.json("DELETE", self._path)
            return True
        except NotFoundError:
            return False

    def pause(self):
        """Freezes the sandbox (nothing in it runs; its clocks stop)."""
        self._json("POST", self._path + "/pause")

    def resume(self):
        """Thaws a paused sandbox."""
        self._json("POST", self._path + "/resume")

    def audit(self):
        """The sandbox's audit stream so far (the last 4 MiB): a list of
        dicts (run.start, exec.*, net.*, ...; docs/audit.md)."""
        _, _, data = self._request("GET", self._path + "/audit")
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    # Code contexts.
    def create_code_context(self, language="python", cwd=None, envs=None, memory=None,
                            output=None):
        """A new code context: a long-lived interpreter (python or node)
        whose state run_code(..., context=ctx) keeps; at most 8 a sandbox
        (BusyError past it)."""
        lang = _LANGUAGES.get(language)
        if lang is None:
            raise ValueError("language %r: expected python or node" % (language,))
        body = {"language": lang}
        for k, v in (("cwd", cwd), ("env", envs), ("memory", memory), ("output", output)):
            if v is not None:
                body[k] = v
        return context_from(self._json("POST", self._path + "/contexts", body))

    def list_code_contexts(self):
        """The sandbox's code contexts ([Context])."""
        doc = self._json("GET", self._path + "/contexts")
        return [context_from(c) for c in doc.get("contexts", [])]

    def remove_code_context(self, context):
        """Deletes a code context (a Context or its id); its interpreter
        is killed."""
        cid = getattr(context, "id", context)
        self._json("DELETE", "%s/contexts/%s" % (self._path, urllib.parse.quote(cid, safe="")))
        self._contexts = {k: v for k, v in self._contexts.items() if v.id != cid}

    def run_code(self, code, language=None, context=None, on_stdout=None, on_stderr=None,
                 on_result=None, on_error=None, envs=None, timeout=None,
                 request_timeout=None):
        """Runs code in a code context: context when given, else the
        sandbox's default one for language (python unless said; made at
        its first use), so that variables set by one call are there in the
        next. Returns an Execution: the last expression's value as .text,
        what it printed as .logs, an exception it raised as .error (not an
        exception here). timeout: seconds.

        The daemon answers a run whole, so the callbacks are called once it
        ends, in E2B's order: on_stdout and on_stderr with each chunk (an
        OutputMessage: a str with .line, .error, .timestamp), on_result
        with the last expression's Result when there is one, on_error with
        the ExecutionError when the code raised. envs is not taken per
        run: a context's variables are set when it is made
        (create_code_context(envs=...)). request_timeout is accepted for
        E2B's signature; the run is bounded by timeout.

        Raises LimitError when a limit ended the run (its interpreter is
        restarted, its state gone: the Execution is .result)."""
        if envs:
            raise ValueError("run_code(envs=...): a code context's environment is set when "
                             "it is made: pass envs to create_code_context() and run in "
                             "that context")
        if context is not None and language is not None:
            raise ValueError("give run_code a context or a language, not both")
        if context is None:
            lang = _LANGUAGES.get(language or "python")
            if lang is None:
                raise ValueError("language %r: expected python or node" % (language,))
            context = self._contexts.get(lang)
            if context is None:
                context = self._contexts[lang] = self.create_code_context(lang)
        body = {"code": code}
        if timeout is not None:
            body["timeout"] = timeout
        cid = getattr(context, "id", context)
        if not isinstance(cid, str):
            raise ValueError("context %r: expected a Context or its id" % (context,))
        path = "%s/contexts/%s/run" % (self._path, urllib.parse.quote(cid, safe=""))
        ex = execution_from(self._json("POST", path, body, timeout=None))
        for cb, chunks, is_err in ((on_stdout, ex.logs.stdout, False),
                                   (on_stderr, ex.logs.stderr, True)):
            if cb is not None:
                for c in chunks:
                    cb(OutputMessage(c, error=is_err))
        if on_result is not None:
            for r in ex.results:
                on_result(r)
        if on_error is not None and ex.error is not None:
            on_error(ex.error)
        return ex
