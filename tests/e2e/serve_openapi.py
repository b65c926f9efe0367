#!/usr/bin/python3
"""docs/openapi.yaml against the real daemon (TAP): every endpoint is
called (its success and some of its errors), and each answer must be one
the file lists for that operation: the status, the content type, and a
JSON body valid against its schema (a small validator of the subset of
JSON Schema the file uses: type, nullable, properties, required,
items, additionalProperties, enum, $ref). Every documented operation must have
been checked at least once.

usage: serve_openapi.py AIRLOCK PROBE [CASE-SUBSTRING...]
"""

import json
import os
import re
import sys

import yaml

from harness import Env, Suite, expect
from run_serve import Daemon, sandbox

suite = Suite()
case = suite.case

SPEC_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs", "openapi.yaml")

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def resolve(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        expect(ref.startswith("#/"), "a $ref outside the file: %s" % ref)
        node = spec
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def validate(spec, schema, value, where="$"):
    """A list of what in value breaks schema (empty: valid)."""
    schema = resolve(spec, schema)
    bad = []
    if value is None and schema.get("nullable"):
        return []
    t = schema.get("type")
    if t == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return ["%s: %r is not an integer" % (where, value)]
    elif t == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return ["%s: %r is not a number" % (where, value)]
    elif t is not None and not isinstance(value, TYPES[t]):
        return ["%s: %r is not of type %s" % (where, value, t)]
    if "enum" in schema and value not in schema["enum"]:
        bad.append("%s: %r is not one of %s" % (where, value, schema["enum"]))
    if isinstance(value, dict):
        for k in schema.get("required", []):
            if k not in value:
                bad.append("%s: no %r" % (where, k))
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                bad += validate(spec, props[k], v, "%s.%s" % (where, k))
            elif isinstance(schema.get("additionalProperties"), dict):
                bad += validate(spec, schema["additionalProperties"], v, "%s.%s" % (where, k))
            elif schema.get("additionalProperties") is False:
                bad.append("%s: %r is not allowed" % (where, k))
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            bad += validate(spec, schema["items"], v, "%s[%d]" % (where, i))
    return bad


class Checker:
    def __init__(self, d):
        with open(SPEC_PATH) as f:
            self.spec = yaml.safe_load(f)
        self.d = d
        self.seen = set()

    def operation(self, method, path):
        path = path.split("?")[0]
        for template, item in self.spec["paths"].items():
            rx = "^" + re.sub(r"\{path\}", ".+", re.sub(r"\{(id|eid|cid)\}", "[^/]+", template)) + "$"
            if re.match(rx, path) and method.lower() in item:
                return template, resolve(self.spec, item[method.lower()])
        raise AssertionError("%s %s: no operation in openapi.yaml" % (method, path))

    def call(self, method, path, body=None, want=None):
        st, ctype, data = self.d.request(method, path, body)
        template, op = self.operation(method, path)
        self.seen.add((method, template))
        responses = op["responses"]
        expect(str(st) in responses, "%s %s answered %d, which openapi.yaml does not list "
               "for %s %s (%s)" % (method, path, st, method, template, data[:200]))
        if want is not None:
            expect(st == want, "%s %s: %d, not %d: %s (the daemon: %s)"
                   % (method, path, st, want, data[:300], self.d.logtext()[-2000:]))
        resp = resolve(self.spec, responses[str(st)])
        content = resp.get("content", {})
        ct = (ctype or "").split(";")[0]
        expect(ct in content, "%s %s %d: content type %r, documented %s"
               % (method, path, st, ct, list(content)))
        schema = content[ct].get("schema") if content[ct] else None
        if ct == "application/json":
            doc = json.loads(data)
            if schema:
                bad = validate(self.spec, schema, doc)
                expect(not bad, "%s %s %d: %s" % (method, path, st, "; ".join(bad)))
            return st, doc
        return st, data

    def all_seen(self):
        missing = [(m.upper(), p) for p, item in self.spec["paths"].items()
                   for m in item if m in ("get", "post", "put", "delete")
                   if (m.upper(), p) not in self.seen]
        expect(not missing, "operations never checked: %s" % missing)


@case
def every_endpoint_matches_openapi(e):
    """Each endpoint's success and typical errors, against openapi.yaml."""
    with Daemon(e) as d:
        c = Checker(d)
        c.call("GET", "/v1/health", want=200)
        c.call("GET", "/metrics", want=200)
        c.call("POST", "/v1/run", {"argv": ["/bin/echo", "hi"]}, want=200)
        c.call("POST", "/v1/run", "{not json", want=400)
        st, sb = c.call("POST", "/v1/sandboxes", {"metadata": {"job": "oa"}}, want=201)
        sid = sb["id"]
        c.call("POST", "/v1/sandboxes", {"lifetime": "long"}, want=400)
        c.call("GET", "/v1/sandboxes?metadata.job=oa", want=200)
        c.call("GET", "/v1/sandboxes/%s" % sid, want=200)
        c.call("GET", "/v1/sandboxes/nosuchid", want=404)
        c.call("POST", "/v1/sandboxes/%s/timeout" % sid, {"timeout": 30}, want=200)
        c.call("POST", "/v1/sandboxes/%s/pause" % sid, {}, want=200)
        c.call("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["/bin/true"]}, want=409)
        c.call("POST", "/v1/sandboxes/%s/resume" % sid, {}, want=200)
        c.call("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["/bin/true"], "wait": True},
               want=200)
        c.call("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["/bin/echo", "s"]}, want=200)
        c.call("POST", "/v1/sandboxes/%s/exec" % sid, {"nope": 1}, want=400)
        c.call("PUT", "/v1/sandboxes/%s/files/tmp/d?mkdir=1" % sid, b"", want=201)
        c.call("PUT", "/v1/sandboxes/%s/files/tmp/d/f" % sid, b"data", want=201)
        c.call("GET", "/v1/sandboxes/%s/files/tmp/d/f" % sid, want=200)
        c.call("GET", "/v1/sandboxes/%s/files/tmp/d" % sid, want=200)
        c.call("GET", "/v1/sandboxes/%s/files/tmp/nosuch" % sid, want=404)
        c.call("GET", "/v1/sandboxes/%s/files/tmp/../etc" % sid, want=400)
        c.call("DELETE", "/v1/sandboxes/%s/files/tmp/d" % sid, want=409)
        c.call("DELETE", "/v1/sandboxes/%s/files/tmp/d/f" % sid, want=200)
        st, bg = c.call("POST", "/v1/sandboxes/%s/exec" % sid,
                        {"argv": ["/bin/cat"], "background": True}, want=201)
        eid = bg["exec_id"]
        c.call("GET", "/v1/sandboxes/%s/execs" % sid, want=200)
        c.call("POST", "/v1/sandboxes/%s/execs/%s/stdin" % (sid, eid), "abc", want=200)
        c.call("POST", "/v1/sandboxes/%s/execs/%s/signal" % (sid, eid), {"signal": "SIGCONT"},
               want=200)
        c.call("POST", "/v1/sandboxes/%s/execs/%s/resize" % (sid, eid), {"rows": 40, "cols": 100},
               want=409)  # no terminal
        c.call("DELETE", "/v1/sandboxes/%s/execs/%s" % (sid, eid), want=200)
        # The kill, asked for right after the exec started, ended it: the
        # replay ends at once with its end (the kill was lost when it came
        # before init reported the exec started; the replay then waited
        # for the sandbox's lifetime, and the sandbox was gone).
        st, _, data = d.request("GET", "/v1/sandboxes/%s/execs/%s" % (sid, eid), timeout=20)
        last = json.loads(data.splitlines()[-1])
        expect(st == 200 and last.get("type") == "end" and
               last["result"]["reason"] == "killed",
               "the replay of the killed exec: %d %r" % (st, data[-300:]))
        c.call("GET", "/v1/sandboxes/%s/execs/%s" % (sid, eid), want=200)
        c.call("GET", "/v1/sandboxes/%s/execs/nosuch" % sid, want=404)
        st, cx = c.call("POST", "/v1/sandboxes/%s/contexts" % sid, {"language": "python"},
                        want=201)
        cid = cx["context_id"]
        c.call("POST", "/v1/sandboxes/%s/contexts" % sid, {"language": "ruby"}, want=400)
        c.call("GET", "/v1/sandboxes/%s/contexts" % sid, want=200)
        c.call("GET", "/v1/sandboxes/%s/contexts/%s" % (sid, cid), want=200)
        c.call("GET", "/v1/sandboxes/%s/contexts/nosuch" % sid, want=404)
        c.call("POST", "/v1/sandboxes/%s/contexts/%s/run" % (sid, cid), {"code": "x = 1\nx"},
               want=200)
        c.call("POST", "/v1/sandboxes/%s/contexts/%s/run" % (sid, cid), {"code": "1/0"},
               want=200)
        c.call("POST", "/v1/sandboxes/%s/contexts/%s/run" % (sid, cid), {}, want=400)
        c.call("DELETE", "/v1/sandboxes/%s/contexts/%s" % (sid, cid), want=200)
        c.call("GET", "/v1/sandboxes/%s" % sid, want=200)  # still there
        c.call("GET", "/v1/sandboxes/%s/audit" % sid, want=200)
        c.call("DELETE", "/v1/sandboxes/%s" % sid, want=200)
        c.call("DELETE", "/v1/sandboxes/%s" % sid, want=404)
        c.all_seen()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
