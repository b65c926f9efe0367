#!/usr/bin/python3
"""airlock mcp driven by a scripted client speaking raw JSON-RPC lines (TAP).

usage: run_mcp.py AIRLOCK PROBE [CASE-SUBSTRING...]

One MCP server (with its private daemon: no --socket) for every case,
ended by closing its stdin (then by pid if it does not end). The protocol:
malformed JSON, a batch, an unknown method, requests before initialize,
notifications and client responses never answered, invalid requests, a
line over the 64 MiB cap. Then each tool's inputSchema, as tools/list gives
it, drives calls built from it: the required properties alone and every
property are accepted (a result, and its structuredContent fits the tool's
outputSchema); each required property left out, each property of each JSON
type the schema does not allow, a value outside its enum or bounds, an
empty string where minLength is 1, and an extra property are refused with
-32602 naming the argument. A second server, with a policy the daemon
refuses, answers a tool call with isError naming the field.
"""

import json
import os
import subprocess
import sys

from harness import Env, Suite, TempDir, expect, kill_pid, read_line_with_timeout, wait_for

suite = Suite()
case = suite.case

# Valid values by property name, for what the schema cannot say (paths are
# absolute); the type of every value is checked against the schema.
SAMPLES = {"path": "/work/schema.txt", "cwd": "/tmp", "command": "echo ok",
           "code": "1", "content": "aGk=", "timeout": 5}
WRONG = {"string": "a string", "number": 1.5, "integer": 7, "boolean": True, "null": None,
         "object": {"a": 1}, "array": [1]}


class Mcp:
    """One `airlock mcp` process and a line-at-a-time JSON-RPC client."""

    def __init__(self, env, *args):
        self.tmp = TempDir(mode=0o700)
        tmpdir = self.tmp.__enter__()
        self.p = subprocess.Popen([env.airlock, "mcp"] + list(args), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  env=dict(os.environ, TMPDIR=tmpdir))
        self.next_id = 100

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self, timeout=120):
        line = read_line_with_timeout(self.p.stdout, timeout)
        expect(line is not None, "no answer from airlock mcp in %d s" % timeout)
        return json.loads(line)

    def call(self, method, params=None, timeout=120):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        ans = self.recv(timeout)
        expect(ans.get("id") == self.next_id, "answer to id %d: %s" % (self.next_id, ans))
        return ans

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            kill_pid(self.p.pid)
            self.p.wait()
            subprocess.run([ENV.airlock, "gc"], stdout=subprocess.DEVNULL)
        self.tmp.__exit__(None, None, None)


ENV = None
MCP = None


def error_of(ans, code, *words):
    err = ans.get("error")
    expect(err and err.get("code") == code, "expected error %d: %s" % (code, ans))
    for w in words:
        expect(w in err["message"], "the error does not say %r: %s" % (w, err["message"]))


@case
def before_initialize(e):
    """tools/list and tools/call before initialize are refused (-32600);
    ping is answered."""
    error_of(MCP.call("tools/list"), -32600, "initialize")
    error_of(MCP.call("tools/call", {"name": "run_code", "arguments": {}}), -32600)
    expect(MCP.call("ping").get("result") == {}, "ping before initialize")


@case
def initialize(e):
    """initialize answers the client's version when known, else 2025-06-18;
    without protocolVersion it is -32602; notifications/initialized gets no
    answer."""
    ans = MCP.call("initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}})
    expect(ans["result"]["protocolVersion"] == "2025-06-18", "unknown version: %s" % ans)
    error_of(MCP.call("initialize", {}), -32602, "protocolVersion")
    ans = MCP.call("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}})
    r = ans["result"]
    expect(r["protocolVersion"] == "2025-03-26" and "tools" in r["capabilities"]
           and r["serverInfo"]["name"] == "airlock", "initialize: %s" % ans)
    MCP.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # The next line is the ping's: the notification had no answer.
    expect(MCP.call("ping").get("result") == {}, "ping after the notification")


@case
def malformed_and_invalid(e):
    """Malformed JSON: -32700 with id null. A batch: -32600 (2025-06-18
    removed batching). Not an object, a bad jsonrpc, a bad id, a missing
    method: -32600. Unknown method: -32601. A client's response, an empty
    line and an unknown notification: no answer."""
    MCP.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    ans = MCP.recv()
    error_of(ans, -32700, "parse error")
    expect(ans["id"] is None, "a parse error's id is null: %s" % ans)
    MCP.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
              {"jsonrpc": "2.0", "id": 2, "method": "ping"}])
    ans = MCP.recv()
    error_of(ans, -32600, "batch")
    MCP.send("hello")
    error_of(MCP.recv(), -32600, "object")
    MCP.send({"jsonrpc": "1.0", "id": 3, "method": "ping"})
    ans = MCP.recv()
    error_of(ans, -32600, "jsonrpc")
    expect(ans["id"] == 3, "the id is echoed: %s" % ans)
    for bad_id in (None, {"a": 1}, 1.5, True):
        MCP.send({"jsonrpc": "2.0", "id": bad_id, "method": "ping"})
        error_of(MCP.recv(), -32600, "id")
    MCP.send({"jsonrpc": "2.0", "id": 4})
    error_of(MCP.recv(), -32600, "method")
    error_of(MCP.call("resources/list"), -32601, "resources/list")
    error_of(MCP.call("tools/call", {"name": "no_such_tool"}), -32602, "no_such_tool")
    error_of(MCP.call("tools/call", {"arguments": {}}), -32602, "name")
    error_of(MCP.call("tools/call", {"name": "list_files", "arguments": [1]}), -32602,
             "arguments")
    MCP.send({"jsonrpc": "2.0", "id": 9, "result": {}})
    MCP.send_raw(b"\n  \n")
    MCP.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})
    expect(MCP.call("ping").get("result") == {}, "ping after the unanswered lines")


@case
def line_cap(e):
    """A line over 64 MiB is refused once (-32600) and dropped; the next
    message is served."""
    chunk = b"x" * (1 << 20)
    for _ in range(65):
        MCP.send_raw(chunk)
    MCP.send_raw(b"\n")
    error_of(MCP.recv(), -32600, "64 MiB")
    expect(MCP.call("ping").get("result") == {}, "ping after the dropped line")


def json_types(schema):
    t = schema.get("type")
    return t if isinstance(t, list) else [t]


def fits(schema, value, where="structuredContent"):
    """A small JSON Schema check (type, required, properties, items)."""
    types = json_types(schema)
    ok = {"string": lambda v: isinstance(v, str),
          "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "boolean": lambda v: isinstance(v, bool), "null": lambda v: v is None,
          "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list)}
    expect(None in types or any(ok[t](value) for t in types),
           "%s: %r is not of type %s" % (where, value, types))
    if isinstance(value, dict):
        for k in schema.get("required", []):
            expect(k in value, "%s: %s is missing" % (where, k))
        for k, sub in schema.get("properties", {}).items():
            if k in value:
                fits(sub, value[k], "%s.%s" % (where, k))
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            fits(schema["items"], v, "%s[%d]" % (where, i))


def sample(name, schema):
    if "enum" in schema:
        return schema["enum"][-1]
    v = SAMPLES[name]
    expect(any(t == "string" and isinstance(v, str) or t in ("number", "integer")
               and isinstance(v, int) for t in json_types(schema)),
           "the sample of %s does not fit its schema %s" % (name, schema))
    return v


def accepted(tool, args):
    ans = MCP.call("tools/call", {"name": tool["name"], "arguments": args})
    expect("result" in ans, "%s %s refused: %s" % (tool["name"], args, ans))
    r = ans["result"]
    expect(isinstance(r.get("content"), list) and r["content"][0]["type"] == "text"
           and isinstance(r.get("isError"), bool), "%s: not a CallToolResult: %s"
           % (tool["name"], r))
    if "structuredContent" in r:
        fits(tool["outputSchema"], r["structuredContent"])
    else:
        expect(r["isError"], "%s: no structuredContent and not isError: %s" % (tool["name"], r))
    return r


def refused(tool, args, name):
    ans = MCP.call("tools/call", {"name": tool["name"], "arguments": args})
    error_of(ans, -32602, '"%s"' % name)


def schema_case(name):
    def run(e):
        tools = MCP.call("tools/list")["result"]["tools"]
        tool = [t for t in tools if t["name"] == name]
        expect(len(tool) == 1, "tools/list has no %s: %s" % (name, tools))
        tool = tool[0]
        s = tool["inputSchema"]
        expect(s["type"] == "object" and s.get("additionalProperties") is False,
               "%s: not a closed object schema: %s" % (name, s))
        props, required = s["properties"], s.get("required", [])
        minimal = {k: sample(k, props[k]) for k in required}
        full = {k: sample(k, p) for k, p in props.items()}
        if name == "write_file":
            minimal["content"] = full["content"] = "aGk="
        accepted(tool, minimal)
        accepted(tool, full)
        for k in required:
            refused(tool, {x: v for x, v in minimal.items() if x != k}, k)
        for k, p in props.items():
            for t, v in WRONG.items():
                allowed = json_types(p)
                if t in allowed or (t == "integer" and "number" in allowed):
                    continue
                refused(tool, dict(full, **{k: v}), k)
            if "enum" in p:
                for v in p["enum"]:
                    accepted(tool, dict(full, **{k: v}))
                refused(tool, dict(full, **{k: "not-" + p["enum"][0]}), k)
            if "exclusiveMinimum" in p:
                refused(tool, dict(full, **{k: p["exclusiveMinimum"]}), k)
            if "maximum" in p:
                refused(tool, dict(full, **{k: p["maximum"] + 1}), k)
            if p.get("minLength", 0) >= 1:
                refused(tool, dict(full, **{k: ""}), k)
        refused(tool, dict(full, extra_argument=1), "extra_argument")
    run.__doc__ = ("%s: calls built from its inputSchema; what it allows is accepted "
                   "(and fits the outputSchema), what it refuses is -32602 naming the "
                   "argument" % name)
    return run


for _tool in ("write_file", "read_file", "list_files", "run_command", "run_code"):
    suite.add("schema_" + _tool, schema_case(_tool))


@case
def refused_policy(e):
    """A policy the daemon refuses: the tool call's result is isError with
    the daemon's error naming the field, and the server goes on."""
    with TempDir() as d:
        policy = os.path.join(d, "policy.json")
        with open(policy, "w") as f:
            json.dump({"limits": {"memory": "lots"}}, f)
        m = Mcp(e, "--policy", policy)
        try:
            m.call("initialize", {"protocolVersion": "2025-06-18"})
            r = m.call("tools/call", {"name": "list_files", "arguments": {}})["result"]
            text = r["content"][0]["text"]
            expect(r["isError"] and "limits.memory" in text and "could not be made" in text,
                   "the refusal: %s" % r)
            expect(m.call("ping").get("result") == {}, "ping after the refusal")
        finally:
            m.close()


@case
def eof_ends_it(e):
    """At the end of stdin the server deletes its sandbox, stops its private
    daemon and exits 0, leaving no directory."""
    global MCP
    m, MCP = MCP, None
    m.p.stdin.close()
    expect(wait_for(lambda: m.p.poll() is not None, 30), "airlock mcp did not end at EOF")
    expect(m.p.returncode == 0, "exit status %s" % m.p.returncode)
    expect(os.listdir(m.tmp.path) == [], "left in its TMPDIR: %s" % os.listdir(m.tmp.path))
    m.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    ENV = Env(sys.argv[1], sys.argv[2])
    MCP = Mcp(ENV)
    try:
        rc = suite.run(ENV, only=sys.argv[3:])
    finally:
        if MCP:
            MCP.close()
    sys.exit(rc)
