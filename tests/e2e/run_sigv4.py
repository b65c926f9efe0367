#!/usr/bin/python3
"""AWS SigV4 re-signing (src/cred/sigv4.c) against botocore (TAP).

usage: run_sigv4.py SIGV4_TOOL [CASE-SUBSTRING...]

For each case botocore (Debian's python3-botocore: SigV4Auth, S3SigV4Auth,
SigV4QueryAuth, S3SigV4QueryAuth) signs a request with the run's
placeholder key at a fixed instant. The request as the gateway would see
it (target, fields with their values trimmed, the body's SHA-256 when the
case sends it) goes to sigv4_tool, which re-signs it with the real key;
botocore then signs the same request with the real key at the same
instant, and the two Authorization values (or presigned targets) must be
equal byte for byte, and so must every other field. A few cases change the
request after signing and expect the refusal. Nothing touches the network:
botocore only signs AWSRequest objects.
"""

import datetime
import hashlib
import hmac
import json
import secrets
import string
import subprocess
import sys
import traceback
import types
from urllib.parse import urlsplit

try:
    import botocore.auth
    import botocore.awsrequest
    import botocore.config
    import botocore.credentials
    from botocore.utils import percent_encode
except ImportError:
    print("1..0 # SKIP python3-botocore is not installed")
    sys.exit(0)

NOW = datetime.datetime(2024, 2, 29, 23, 59, 58)  # a leap day, one second before midnight


class FrozenDatetime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return cls(NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second)


# botocore.auth reads the clock through its module-level `datetime` only.
botocore.auth.datetime = types.SimpleNamespace(datetime=FrozenDatetime)


def placeholder_key_id():
    return "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))


def placeholder_secret():
    return "".join(secrets.choice(string.ascii_letters + string.digits + "+/") for _ in range(40))


FAKE = {"access_key_id": placeholder_key_id(), "secret_access_key": placeholder_secret()}
FAKE_TOKEN = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(300))
REAL = {"access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
# A session token's alphabet is base64's: '/', '+' and '=' need encoding in a query.
REAL_TOKEN = ("IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+x/y=" * 12).rstrip("=") + "=="
# An S3-compatible store's key id: another length, another alphabet.
OTHER_REAL = {"access_key_id": "minio-user_7.x", "secret_access_key": "s" * 64}

EMPTY = hashlib.sha256(b"").hexdigest()
SIGNERS = {
    "v4": botocore.auth.SigV4Auth,
    "s3": botocore.auth.S3SigV4Auth,
    "v4query": botocore.auth.SigV4QueryAuth,
    "s3query": botocore.auth.S3SigV4QueryAuth,
}


class Case:
    def __init__(self, name, method, url, headers=(), body=b"", service="service",
                 region="us-east-1", signer="v4", context=None, send_hash=True, token=False,
                 expires=3600, real=None, tamper=None, want_errno=None, want_error=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        self.real = real or REAL

    def creds(self, c):
        return botocore.credentials.Credentials(c["access_key_id"], c["secret_access_key"],
                                                self.token_for(c))

    def token_for(self, c):
        if not self.token:
            return None
        return FAKE_TOKEN if c is FAKE else REAL_TOKEN

    def sign(self, c):
        req = botocore.awsrequest.AWSRequest(method=self.method, url=self.url, data=self.body)
        for k, v in self.headers:
            req.headers[k] = v  # HTTPHeaders appends: a name may repeat
        req.context.update(self.context or {})
        cls = SIGNERS[self.signer]
        if self.signer.endswith("query"):
            signer = cls(self.creds(c), self.service, self.region, expires=self.expires)
        else:
            signer = cls(self.creds(c), self.service, self.region)
        signer.add_auth(req)
        return req

    @property
    def mode(self):
        return "query" if self.signer.endswith("query") else "header"

    def build(self):
        return tool_request(self)

    def check(self, fields, res):
        judge(self, fields, res)


def wire(req):
    """The request line's target and the fields as an HTTP client sends
    them (Host from the URL, as urllib3 writes it) and the gateway parses
    them (values trimmed of spaces and tabs)."""
    parts = urlsplit(req.url)
    target = parts.path + ("?" + parts.query if parts.query else "")
    fields = [(k, v.strip(" \t")) for k, v in req.headers.items()]
    if not any(k.lower() == "host" for k, _ in fields):
        fields.insert(0, ("Host", botocore.auth._host_from_url(req.url)))
    return target, fields


def creds_json(c, token):
    return dict(c, session_token=token)


def tool_request(case):
    fake_req = case.sign(FAKE)
    target, fields = wire(fake_req)
    if case.mode == "header" and case.token:
        # The caller's contract: the token field carries the real token
        # before al_sigv4_resign() is called.
        fields = [(k, REAL_TOKEN if k.lower() == "x-amz-security-token" else v)
                  for k, v in fields]
    req = {
        "mode": case.mode,
        "method": case.method,
        "target": target,
        "headers": [list(f) for f in fields],
        "payload_hash": hashlib.sha256(case.body).hexdigest() if case.send_hash else None,
        "fake": creds_json(FAKE, FAKE_TOKEN if case.token else None),
        "real": creds_json(case.real, REAL_TOKEN if case.token else None),
    }
    if case.tamper:
        case.tamper(req)
    return req, fields


def judge(case, sent_fields, res):
    if case.want_errno is not None:
        assert not res["ok"], "expected a refusal, got %r" % res.get("value")
        assert res["errno"] == case.want_errno, "errno %d (%s), expected %d" % (
            res["errno"], res["error"], case.want_errno)
        assert case.want_error in res["error"], "%r does not say %r" % (res["error"],
                                                                         case.want_error)
        return
    assert res["ok"], "refused: errno %d: %s" % (res["errno"], res["error"])
    real_req = case.sign(case.real)
    want_target, want_fields = wire(real_req)
    if case.mode == "header":
        want = real_req.headers["Authorization"]
        assert res["value"] == want, "Authorization\n got  %s\n want %s" % (res["value"], want)
        sent = [f for f in sent_fields if f[0].lower() != "authorization"]
        want_fields = [f for f in want_fields if f[0].lower() != "authorization"]
    else:
        assert res["value"] == want_target, "target\n got  %s\n want %s" % (res["value"],
                                                                           want_target)
        sent = sent_fields
    assert sent == want_fields, "the other fields differ:\n sent %r\n want %r" % (sent,
                                                                                 want_fields)


def s3_unsigned():
    return {"client_config": botocore.config.Config(s3={"payload_signing_enabled": False})}


def drop_field(name):
    def f(req):
        req["headers"] = [x for x in req["headers"] if x[0].lower() != name]
    return f


def set_field(name, value):
    def f(req):
        req["headers"] = [[k, value if k.lower() == name else v] for k, v in req["headers"]]
    return f


def drop_token_unsigned(req):
    """No token field, and none in SignedHeaders either."""
    drop_field("x-amz-security-token")(req)
    req["headers"] = [[k, v.replace(";x-amz-security-token", "")
                       if k.lower() == "authorization" else v] for k, v in req["headers"]]


def set_key(name, value):
    def f(req):
        req[name] = value
    return f


def edit_target(old, new):
    def f(req):
        req["target"] = req["target"].replace(old, new)
    return f


def key(k):
    return percent_encode(k, safe="/~")


S3 = "https://examplebucket.s3.amazonaws.com"
API = "https://abc123.execute-api.eu-west-1.amazonaws.com"
JSON_BODY = json.dumps({"TableName": "jobs", "Key": {"id": {"S": "42"}}}).encode()

CASES = [
    # Plain requests, the signature test suite's shapes.
    Case("get vanilla", "GET", "https://example.amazonaws.com/"),
    Case("get with query: repeated keys, sorted by value", "GET",
         "https://example.amazonaws.com/?Param1=value2&Param1=value1&Param1=value10"),
    Case("get with query: keys and values needing encoding", "GET",
         "https://example.amazonaws.com/?k%C3%A9y=v%C3%A1l&%2Fslash=a%2Bb%3Dc&spa%20ce=1"),
    Case("get with query: empty values and a bare key", "GET",
         "https://example.amazonaws.com/?b=&a&c=3&a="),
    Case("get with query: name order is not pair order", "GET",
         "https://example.amazonaws.com/?a-b=1&a=2&a.b=3&A=4"),
    Case("header with runs of spaces and tabs", "GET", "https://example.amazonaws.com/",
         headers=[("My-Header1", "value1   with \t  runs"), ("My-Header2", "\"a   b\"")]),
    Case("a field name twice: values joined in order", "GET", "https://example.amazonaws.com/",
         headers=[("X-Amz-Meta-Multi", "one"), ("X-Amz-Meta-Multi", "two  three")]),
    Case("unsigned user-agent field", "GET", "https://example.amazonaws.com/",
         headers=[("User-Agent", "aws-cli/2 Python/3.11")]),
    Case("host with a port", "GET", "https://example.amazonaws.com:8443/x"),
    # JSON APIs: the body's hash, no x-amz-content-sha256.
    Case("dynamodb POST with a JSON body", "POST", "https://dynamodb.us-west-2.amazonaws.com/",
         headers=[("Content-Type", "application/x-amz-json-1.0"),
                  ("X-Amz-Target", "DynamoDB_20120810.GetItem")],
         body=JSON_BODY, service="dynamodb", region="us-west-2"),
    Case("sts POST form", "POST", "https://sts.amazonaws.com/",
         headers=[("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
         body=b"Action=GetCallerIdentity&Version=2011-06-15", service="sts"),
    Case("sts with a session token", "POST", "https://sts.amazonaws.com/",
         headers=[("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
         body=b"Action=GetCallerIdentity&Version=2011-06-15", service="sts", token=True),
    Case("another real key id: an S3-compatible store", "POST",
         "https://sts.amazonaws.com/", body=b"Action=GetCallerIdentity", service="sts",
         real=OTHER_REAL),
    # Paths: normalized and encoded twice except for S3.
    Case("non-s3 path: spaces, unicode, '..' and '//'", "GET",
         API + "/prod/a%20b/../c//d/./caf%C3%A9/", service="execute-api", region="eu-west-1"),
    Case("non-s3 path: only dot segments", "GET", API + "/a/../..", service="execute-api",
         region="eu-west-1"),
    Case("non-s3 path: reserved characters sent raw", "GET",
         API + "/p/a:b@c!$&'()*+,;=/x", service="execute-api", region="eu-west-1"),
    Case("s3 path as sent: spaces, unicode, '..' and '//'", "GET",
         S3 + key("/dir//a b/../caf\u00e9 + more.txt"),
         headers=[("Range", "bytes=0-9")], service="s3", signer="s3"),
    Case("s3 path with reserved characters sent raw", "GET", S3 + "/a:b@c!$&'()*+,;=",
         service="s3", signer="s3"),
    Case("s3 list with a query", "GET",
         S3 + "/?list-type=2&prefix=photos%2F2024%20%C3%A9t%C3%A9&delimiter=%2F&encoding-type=url",
         service="s3", signer="s3"),
    Case("s3 subresource without a value", "GET", S3 + "/key.txt?acl", service="s3",
         signer="s3"),
    # S3 bodies.
    Case("s3 PUT with x-amz-content-sha256, hash also given", "PUT", S3 + "/data.bin",
         headers=[("Content-Type", "application/octet-stream"), ("X-Amz-Meta-Note", "a   b")],
         body=b"\x00\x01 hello s3 \xff" * 100, service="s3", signer="s3"),
    Case("s3 PUT with x-amz-content-sha256 only (streamed body)", "PUT", S3 + "/data.bin",
         body=b"streamed" * 1000, service="s3", signer="s3", send_hash=False),
    Case("s3 PUT with UNSIGNED-PAYLOAD", "PUT", S3 + "/big.bin",
         headers=[("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")], body=b"unsigned body",
         service="s3", signer="s3", context=s3_unsigned(), send_hash=False),
    Case("s3 PUT with STREAMING-UNSIGNED-PAYLOAD-TRAILER", "PUT", S3 + "/trailer.bin",
         headers=[("Content-Encoding", "aws-chunked"), ("X-Amz-Trailer", "x-amz-checksum-crc32"),
                  ("X-Amz-Decoded-Content-Length", "5")],
         body=b"a" * 5, service="s3", signer="s3", send_hash=False,
         context={"checksum": {"request_algorithm": {"in": "trailer",
                                                     "name": "x-amz-checksum-crc32"}}}),
    Case("s3 with a session token", "GET", S3 + "/private/report.csv", service="s3",
         signer="s3", token=True),
    Case("s3 PUT with a session token and UNSIGNED-PAYLOAD", "PUT", S3 + "/t.bin",
         headers=[("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")], body=b"x", service="s3",
         signer="s3", context=s3_unsigned(), send_hash=False, token=True),
    Case("s3 in another region", "GET", "https://b.s3.ap-southeast-2.amazonaws.com/k",
         service="s3", region="ap-southeast-2", signer="s3"),
    # Presigned URLs.
    Case("presigned s3 GET", "GET", S3 + "/report.pdf", service="s3", signer="s3query"),
    Case("presigned s3 GET with a query and a key needing encoding", "GET",
         S3 + key("/r\u00e9sum\u00e9 2024.pdf") + "?response-content-disposition=attachment%3B%20filename%3Dx.pdf&versionId=3%2FL4kqtJl",
         service="s3", signer="s3query", expires=604800),
    Case("presigned s3 GET with a session token", "GET", S3 + "/report.pdf", service="s3",
         signer="s3query", token=True, expires=900),
    Case("presigned s3 PUT signing another field", "PUT", S3 + "/upload.bin",
         headers=[("X-Amz-Meta-Owner", "job  42")], service="s3", signer="s3query"),
    Case("presigned s3 with another real key id", "GET", S3 + "/r.pdf", service="s3",
         signer="s3query", real=OTHER_REAL),
    Case("presigned non-s3 (sts GetCallerIdentity)", "GET",
         "https://sts.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
         service="sts", signer="v4query", expires=60),
    Case("presigned non-s3 with a token and a path to normalize", "GET",
         API + "/stage/./a//b%20c/?x=1", service="execute-api", region="eu-west-1",
         signer="v4query", token=True),
    # Changed after signing, or signed with something else: refused.
    Case("a signed field changed after signing is refused", "GET",
         "https://example.amazonaws.com/", headers=[("X-Amz-Meta-A", "1")],
         tamper=set_field("x-amz-meta-a", "2"), want_errno=13, want_error="does not verify"),
    Case("a body that is not the one signed is refused", "POST", "https://sts.amazonaws.com/",
         body=b"Action=GetCallerIdentity", service="sts",
         tamper=set_key("payload_hash", hashlib.sha256(b"Action=CreateAccessKey").hexdigest()),
         want_errno=13, want_error="does not verify"),
    Case("a query parameter added after signing is refused", "GET",
         "https://example.amazonaws.com/?a=1", tamper=edit_target("a=1", "a=1&b=2"),
         want_errno=13, want_error="does not verify"),
    Case("a presigned target changed after signing is refused", "GET", S3 + "/a.pdf",
         service="s3", signer="s3query", tamper=edit_target("/a.pdf", "/b.pdf"), want_errno=13,
         want_error="does not verify"),
    Case("a presigned token that is not the placeholder's is refused", "GET", S3 + "/a.pdf",
         service="s3", signer="s3query", token=True,
         # Another first character (the token is random: "x" + its tail
         # was itself one time in 62, and the test then failed).
         tamper=edit_target(FAKE_TOKEN, ("y" if FAKE_TOKEN[0] == "x" else "x") + FAKE_TOKEN[1:]),
         want_errno=13, want_error="not the placeholder's"),
    Case("a presigned URL with the real key id is refused", "GET", S3 + "/a.pdf",
         service="s3", signer="s3query",
         tamper=edit_target(FAKE["access_key_id"], REAL["access_key_id"]),
         want_errno=13, want_error="is not the placeholder's"),
    Case("the placeholder token left in the field is refused", "GET", S3 + "/k", service="s3",
         signer="s3", token=True, tamper=set_field("x-amz-security-token", FAKE_TOKEN),
         want_errno=22, want_error="still carries the placeholder"),
    Case("a missing token field is refused", "GET", S3 + "/k", service="s3", signer="s3",
         token=True, tamper=drop_field("x-amz-security-token"), want_errno=22,
         want_error='"x-amz-security-token" is not a field'),
    Case("an unsigned token field that is missing is refused", "GET", S3 + "/k", service="s3",
         signer="s3", token=True,
         tamper=drop_token_unsigned, want_errno=22, want_error="no X-Amz-Security-Token field"),
    Case("a signed field that is not sent is refused", "GET", "https://example.amazonaws.com/",
         headers=[("X-Amz-Meta-A", "1")], tamper=drop_field("x-amz-meta-a"), want_errno=22,
         want_error='"x-amz-meta-a" is not a field'),
]


EMPTY_HEX = hashlib.sha256(b"").hexdigest()


def hmac_sha256(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256)


def signing_key(secret, scope):
    date, region, service, _ = scope.split("/")
    k = hmac_sha256(("AWS4" + secret).encode(), date).digest()
    for part in (region, service, "aws4_request"):
        k = hmac_sha256(k, part).digest()
    return k


def chunked_body(chunks, trailer, secret, seed):
    """The aws-chunked body, each chunk signed after the one before from
    the head's signature (AWS's "Signature Calculations for the
    Authorization Header: Transferring Payload in Multiple Chunks"); this
    file's own implementation, independent of the C one."""
    ts = NOW.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/us-east-1/s3/aws4_request" % ts[:8]
    key, prev, out = signing_key(secret, scope), seed, b""
    for data in list(chunks) + [b""]:
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", ts, scope, prev, EMPTY_HEX,
                         hashlib.sha256(data).hexdigest()])
        prev = hmac_sha256(key, sts).hexdigest()
        out += b"%x;chunk-signature=%s\r\n" % (len(data), prev.encode()) + data
        out += b"\r\n" if data else b""
    if trailer:
        fields = "".join("%s:%s\n" % f for f in trailer)
        sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", ts, scope, prev,
                         hashlib.sha256(fields.encode()).hexdigest()])
        out += fields.replace("\n", "\r\n").encode()
        out += b"x-amz-trailer-signature:%s\r\n" % hmac_sha256(key, sts).hexdigest().encode()
    return out + b"\r\n"


class ChunkedCase:
    """An S3 PUT whose chunks are signed: botocore's SigV4Auth signs the
    head (it keeps the x-amz-content-sha256 it is given), chunked_body()
    the chunks."""

    def __init__(self, name, chunks, trailer=None, token=False, tamper=None, want_errno=None,
                 want_error=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def head(self, c, body_len):
        mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" + ("-TRAILER" if self.trailer else "")
        headers = [("Content-Encoding", "aws-chunked"), ("X-Amz-Content-SHA256", mode),
                   ("X-Amz-Decoded-Content-Length", str(sum(map(len, self.chunks)))),
                   ("Content-Length", str(body_len))]
        if self.trailer:
            headers.append(("X-Amz-Trailer", ",".join(k for k, _ in self.trailer)))
        case = Case(self.name, "PUT", S3 + "/uploads/chunked.bin", headers=headers,
                    service="s3", signer="v4", token=self.token, real=REAL)
        req = case.sign(c)
        seed = req.headers["Authorization"].rsplit("Signature=", 1)[1]
        return req, seed

    def body(self, c, seed):
        return chunked_body(self.chunks, self.trailer, c["secret_access_key"], seed)

    def build(self):
        length = len(self.body(FAKE, "0" * 64))
        req, seed = self.head(FAKE, length)
        target, fields = wire(req)
        if self.token:
            fields = [(k, REAL_TOKEN if k.lower() == "x-amz-security-token" else v)
                      for k, v in fields]
        body = self.body(FAKE, seed)
        if self.tamper:
            body = self.tamper(body)
        return {"mode": "chunked", "method": "PUT", "target": target,
                "headers": [list(f) for f in fields], "payload_hash": None,
                "body_hex": body.hex(),
                "fake": creds_json(FAKE, FAKE_TOKEN if self.token else None),
                "real": creds_json(REAL, REAL_TOKEN if self.token else None)}, length

    def check(self, length, res):
        if self.want_errno is not None:
            judge(self, None, res)
            return
        assert res["ok"], "refused: errno %d: %s" % (res["errno"], res["error"])
        req, seed = self.head(REAL, length)
        want = req.headers["Authorization"]
        assert res["value"] == want, "Authorization\n got  %s\n want %s" % (res["value"], want)
        body = self.body(REAL, seed)
        got = bytes.fromhex(res["body_hex"])
        assert got == body, "body (%d bytes, %d expected) differs at %d" % (
            len(got), len(body), next((i for i, (a, b) in enumerate(zip(got, body)) if a != b),
                                      min(len(got), len(body))))


def flip(at):
    return lambda body: body[:at] + bytes([body[at] ^ 1]) + body[at + 1:]


CHUNKED = [
    ChunkedCase("signed chunks of several sizes", [b"x" * 8192, bytes(range(256)) * 20, b"tail"]),
    ChunkedCase("signed chunks: an empty body", []),
    ChunkedCase("signed chunks and a signed trailer", [b"a" * 5000, b"b"],
                trailer=[("x-amz-checksum-crc32", "AAAAAA=="), ("x-amz-meta-late", "v")]),
    ChunkedCase("signed chunks with a session token", [b"data" * 100], token=True),
    ChunkedCase("a chunk changed after signing is refused", [b"x" * 100, b"y" * 100],
                tamper=flip(300), want_errno=13,
                want_error="chunk 2: the chunk signature does not verify"),
    ChunkedCase("a trailer changed after signing is refused", [b"x"],
                trailer=[("x-amz-checksum-crc32", "AAAAAA==")], tamper=flip(-100),
                want_errno=13, want_error="the trailer signature does not verify"),
    ChunkedCase("a body cut short is refused", [b"x" * 100], tamper=lambda b: b[:-40],
                want_errno=22, want_error="ended before its last chunk"),
]


def uses_key_cases(out):
    """al_sigv4_uses_key() on requests signed by botocore."""
    for c in [c for c in CASES if c.want_errno is None][::4] + CHUNKED[:1]:
        req, _ = c.build()
        other = dict(req, mode="uses_key", fake=dict(req["fake"], access_key_id="AKIAOTHER"))
        out.append(("uses_key: %s" % c.name, dict(req, mode="uses_key"), True))
        out.append(("uses_key (another key): %s" % c.name, other, False))


def main():
    tool = sys.argv[1]
    only = sys.argv[2:]
    cases = [c for c in CASES + CHUNKED if not only or any(o in c.name for o in only)]
    reqs, ctxs, failures = [], [], {}
    for c in cases:
        try:
            r, ctx = c.build()
        except Exception:
            r, ctx = None, None
            failures[c.name] = traceback.format_exc()
        reqs.append(r)
        ctxs.append(ctx)
    keyed = []
    uses_key_cases(keyed)
    batch = [r for r in reqs if r] + [k[1] for k in keyed]
    p = subprocess.run([tool], input=json.dumps(batch).encode(), capture_output=True,
                       timeout=60)
    if p.returncode != 0:
        print("Bail out! sigv4_tool exited %d: %s" % (p.returncode, p.stderr.decode()))
        return 1
    results = iter(json.loads(p.stdout))
    print("1..%d" % (len(cases) + len(keyed)), flush=True)
    failed = 0
    for i, (c, r, ctx) in enumerate(zip(cases, reqs, ctxs), 1):
        try:
            if r is None:
                raise AssertionError(failures[c.name])
            c.check(ctx, next(results))
            print("ok %d - %s" % (i, c.name))
        except AssertionError as e:
            failed += 1
            print("not ok %d - %s" % (i, c.name))
            for line in str(e).splitlines():
                print("# " + line)
    for j, (name, _, want) in enumerate(keyed, len(cases) + 1):
        res = next(results)
        if res["ok"] and res["value"] is want:
            print("ok %d - %s" % (j, name))
        else:
            failed += 1
            print("not ok %d - %s\n# got %r, expected %r" % (j, name, res, want))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
