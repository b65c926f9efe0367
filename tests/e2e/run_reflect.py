#!/usr/bin/python3
"""End-to-end tests of answers searched as the client will read them (TAP):
a scoped API that echoes its request must never hand the sandbox the real
value the gateway put into it, however the answer is framed, encoded or
timed (docs/credentials.md, "A value coming back").

usage: run_reflect.py AIRLOCK PROBE [CASE-SUBSTRING...]

The upstream is EchoServer, a raw-socket HTTP/1.1 server (plain, and TLS
with a test CA made by the openssl command) that answers each request by
echoing a request head it received (where the gateway put the value) in
the way the request's path asks: /m/MODE/ARG..., or /m/prev/MODE (the
previous head on this connection) and /m/prevconn/MODE (the last head of
the previous connection). It splits chunked answers, trickles pieces and
picks base64 alignments at the value's place in the head, which it finds
by a pattern per host (it knows the real values; the sandbox does not).

reflect_tool.py, inside the sandbox, sends the requests by the proxy
(absolute URI), CONNECT, SOCKS5, the transparent capture (a plain connect
that ignores proxy variables) or intercepted TLS, and prints every byte it
received. Each case judges from outside: what the server sent (the value
really went out and came back in its answer), the bytes the sandbox
received read every way a client could read them (chunks joined, gzip,
deflate and brotli undone, percent, JSON, HTML and base64 decoded, twice
over) and its raw output, which must never hold the value; whether the
answer was cut; the audit (secret.misuse with where "answer", the secret
and the host; net.request for refused requests); and that innocent
answers arrive byte for byte as the server sent them.

Safety: every server listens on 127.0.0.1 only, on a port the kernel
picked; the names the sandbox asks for map to 127.0.0.1 in the policy. No
traffic leaves the host. Servers and temp dirs are closed in finally
blocks; answers that stall are bounded (the server gives up after 45 s or
when the case ends).
"""

import base64
import binascii
import gzip
import html
import json
import os
import re
import secrets
import select
import socket
import ssl
import threading
import urllib.parse
import zlib

from harness import MarkedSuite, Skip, TempDir, main, write_file
from run_cred import PH_RE, PY, Checks, Pki, claims, cred_run, net_policy, no_real_value

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "reflect_tool.py")
ECHOES = []  # every EchoServer this script started


class ReflectSuite(MarkedSuite):
    def nothing_left_behind(self, env):
        """What MarkedSuite checks, and every echo server closed."""
        super().nothing_left_behind(env)
        left = [s.label for s in ECHOES if not s.closed]
        if left:
            raise AssertionError("echo servers still open: %s" % left)


suite = ReflectSuite()


# ---- encodings the server answers in -----------------------------------------

def chunked(*parts):
    """parts as chunked transfer coding, one chunk each (empty ones left out)."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"


def brotli_stored(data, cut):
    """A brotli stream (RFC 7932) holding data in two uncompressed
    meta-blocks split at cut: valid for any decoder, and the bytes around
    the cut are apart on the wire (a meta-block header between them)."""
    out, acc, n = bytearray(), 0, 0

    def bits(v, k):
        nonlocal acc, n
        acc |= v << n
        n += k
        while n >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            n -= 8

    def align():
        if n:
            bits(0, 8 - n)

    bits(0, 1)  # WBITS 16
    for part in (data[:cut], data[cut:]):
        if part:
            bits(0, 1)  # ISLAST 0
            bits(0, 2)  # MNIBBLES 4
            bits(len(part) - 1, 16)
            bits(1, 1)  # ISUNCOMPRESSED
            align()
            out += part
    bits(1, 1)  # ISLAST
    bits(1, 1)  # ISLASTEMPTY
    align()
    return bytes(out)


def unbrotli_stored(data):
    """What brotli_stored wrote, back, as far as it arrived (None for any
    other brotli stream)."""
    pos, out = 0, b""

    def bits(k):
        nonlocal pos
        v = 0
        for i in range(k):
            v |= ((data[pos >> 3] >> (pos & 7)) & 1) << i
            pos += 1
        return v

    try:
        if bits(1):
            return None  # a window size brotli_stored never writes
        while not bits(1):  # ISLAST ends it
            if bits(2) != 0:
                return None
            mlen = bits(16) + 1
            if not bits(1):
                return None
            pos = (pos + 7) & ~7
            out += data[pos >> 3:(pos >> 3) + mlen]
            pos += 8 * mlen
    except IndexError:
        pass
    return out


def json_text(subject, how):
    """The head as a JSON document's string: Python's escapes, those with
    '/' as '\\/' (PHP's), or every other character as \\u00XX."""
    s = subject.decode("latin-1")
    if how == "jsonu":
        inner = "".join(c if c.isalnum() else "\\u%04x" % ord(c) for c in s)
        return ('{"echo": "%s"}' % inner).encode()
    doc = json.dumps({"echo": s})
    return (doc.replace("/", "\\/") if how == "jsonslash" else doc).encode()


def pct(subject, how):
    if how == "pctplus":
        return urllib.parse.quote_plus(subject, safe="").encode()
    q = urllib.parse.quote(subject, safe="")
    if how == "pctlower":
        q = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), q)
    return q.encode()


def html_text(subject, how):
    s = subject.decode("latin-1")
    if how == "htmlnum":
        return "".join("&#%d;" % ord(c) if c in "\"&<>'/+= " else c for c in s).encode()
    return html.escape(s, quote=True).encode()


# ---- the echo server ---------------------------------------------------------

OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"


class EchoServer:
    """A raw-socket HTTP/1.1 server on 127.0.0.1 and a free port (TLS with
    tls=(cert, key)). pattern is a bytes regex whose group 1 is the value
    as it stands in a head. Records every head (by connection) and every
    answer's bytes as sent."""

    def __init__(self, label, pattern, tls=None):
        self.label, self.pattern = label, re.compile(pattern)
        self.heads, self.sent = [], []  # (conn, head), (conn, path, bytes)
        self.planned = []  # (path, the whole answer it was to send)
        self.conns, self.lock, self.stop = 0, threading.Lock(), threading.Event()
        self.closed = False
        self.ctx = None
        if tls:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(*tls)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.socks, self.threads = [], []
        ECHOES.append(self)
        self.acceptor = threading.Thread(target=self.accept_loop, daemon=True)
        self.acceptor.start()

    def accept_loop(self):
        while not self.stop.is_set():
            if not select.select([self.sock], [], [], 0.05)[0]:
                continue
            try:
                s, _ = self.sock.accept()
            except OSError:
                continue
            with self.lock:
                self.conns += 1
                n = self.conns
                self.socks.append(s)
            t = threading.Thread(target=self.serve, args=(s, n), daemon=True)
            self.threads.append(t)
            t.start()

    def close(self):
        if self.closed:
            return
        self.stop.set()
        self.acceptor.join(5)
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for t in self.threads:
            t.join(5)
        self.sock.close()
        self.closed = True

    def serve(self, s, n):
        s.settimeout(20)
        try:
            if self.ctx:
                s = self.ctx.wrap_socket(s, server_side=True)
            buf, prev = b"", None
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf and len(buf) < 65536:
                    b = s.recv(65536)
                    if not b:
                        return
                    buf += b
                head, buf = buf.split(b"\r\n\r\n", 1)
                head += b"\r\n\r\n"
                with self.lock:
                    before = [h for c, h in self.heads if c == n - 1]
                    self.heads.append((n, head))
                subject = {"prev": prev, "prevconn": before[-1] if before else b""}
                if not self.answer(s, n, head, subject):
                    return
                prev = head
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            s.close()

    def place(self, subject):
        """Where the value is in subject: (start, end)."""
        m = self.pattern.search(subject)
        if m:
            return m.span(1)
        return len(subject) // 2, len(subject) // 2 + 1

    def answer(self, s, n, head, subjects):
        """Answer one request; False when the connection is to end."""
        target = head.split(b" ", 2)[1].decode("latin-1")
        path = re.sub(r"^https?://[^/]*", "", target)
        seg = path.split("?", 1)[0].split("/")[2:]
        subject = head
        if seg and seg[0] in subjects:
            subject = subjects[seg[0]] or b""
            seg = seg[1:]
        mode, args = (seg[0] if seg else "ok"), seg[1:]
        start, end = self.place(subject)
        pieces, keep = self.build(mode, args, subject, start, end, head, path), True
        if mode == "stall":
            keep = False
        sent = b""
        with self.lock:
            self.planned.append((path, b"".join(d for d, _ in pieces)))
        for data, pause in pieces:
            s.sendall(data)
            sent += data
            with self.lock:
                # Recorded as it goes: a stalled answer is judged while it waits.
                self.sent = [x for x in self.sent if x[:2] != (n, path)] + [(n, path, sent)]
            if pause and self.stop.wait(pause):
                return False
        return keep

    def build(self, mode, args, subj, start, end, head, path):
        """The answer's pieces: (bytes, pause after them in seconds)."""
        def whole(body, fields=b"", status=OK):
            return [(status + fields + b"Content-Length: %d\r\n\r\n" % len(body) + body, 0)]

        def te(body, fields=b""):
            return [(OK + fields + b"Transfer-Encoding: chunked\r\n\r\n" + body, 0)]

        if mode in ("plain", "ok"):
            return whole(subj if mode == "plain" else b"ok\n")
        if mode == "chunked":
            k = (end - start) // 2 if args[0] == "mid" else int(args[0])
            return te(chunked(subj[:start + k], subj[start + k:]))
        if mode == "trickle":
            size, pause = int(args[0]), int(args[1]) / 1000.0
            first = whole(subj)[0][0][:-len(subj)] + subj[:start]
            mid = [(subj[i:min(i + size, end)], pause) for i in range(start, end, size)]
            return [(first, pause)] + mid + [(subj[end:], 0)]
        if mode in ("gzip", "xgzip"):
            return whole(gzip.compress(subj),
                         b"Content-Encoding: %s\r\n" % (b"gzip" if mode == "gzip" else b"x-gzip"))
        if mode == "gzipchunked":
            z = gzip.compress(subj)
            return te(chunked(*[z[i:i + 7] for i in range(0, len(z), 7)]),
                      b"Content-Encoding: gzip\r\n")
        if mode == "deflate":
            return whole(zlib.compress(subj), b"Content-Encoding: deflate\r\n")
        if mode == "deflateraw":
            c = zlib.compressobj(wbits=-15)
            return whole(c.compress(subj) + c.flush(), b"Content-Encoding: deflate\r\n")
        if mode == "br":
            return whole(brotli_stored(subj, (start + end) // 2), b"Content-Encoding: br\r\n")
        if mode == "stacked":
            return whole(gzip.compress(gzip.compress(subj)), b"Content-Encoding: gzip, gzip\r\n")
        if mode in ("zstd", "compress"):
            # Labelled with a coding the gateway cannot undo; the marker
            # shows whether the body reached the sandbox.
            return whole(OPAQUE + subj[::-1], b"Content-Encoding: %s\r\n" % mode.encode())
        if mode.startswith("pct"):
            return whole(pct(subj, mode))
        if mode.startswith("json"):
            return whole(json_text(subj, mode), b"Content-Type: application/json\r\n")
        if mode.startswith("html"):
            return whole(html_text(subj, mode), b"Content-Type: text/html\r\n")
        if mode in ("b64", "b64url"):
            pad = b"#" * ((int(args[0]) - start) % 3)  # the value starts at that alignment
            enc = base64.b64encode if mode == "b64" else base64.urlsafe_b64encode
            return whole(enc(pad + subj))
        if mode == "redirect":
            host = re.search(rb"\r\nHost: *([^\r]*)", head, re.I).group(1)
            return whole(b"", b"Location: http://%s%s\r\n" % (host, path.encode("latin-1")),
                         b"HTTP/1.1 302 Found\r\n")
        if mode in ("innocent", "innocentgz"):
            text = self.innocent_text(head)
            if mode == "innocent":
                return te(chunked(text[:5], text[5:16], text[16:17], text[17:]))
            z = gzip.compress(text)
            return te(chunked(*[z[i:i + 9] for i in range(0, len(z), 9)]),
                      b"Content-Encoding: gzip\r\n")
        if mode == "stall":
            # A third of the value: under the half that is refused at once.
            return [(whole(subj)[0][0][:-len(subj)] + subj[:start + (end - start) // 3], 45)]
        raise ValueError("unknown mode %r" % mode)

    def innocent_text(self, head):
        """An answer holding the sandbox's placeholder (its X-Echo), the
        value's first 12 bytes followed by something else, and text that
        looks encoded: nothing of the value."""
        m = re.search(rb"\r\nX-Echo: *([^\r]*)", head, re.I)
        start, end = self.place(head)
        near = head[start:min(start + 12, end - 1)]
        return (b"innocent answer; placeholder=" + (m.group(1) if m else b"") + b"; near="
                + near + b"~not the rest~; b64=cmVhbC1ub3QtaXQ=; pct=%2F%2B%3D; "
                + b"json=\\\"\\/; html=&quot;&amp;&lt;; end\n")

    def heads_of(self, path):
        """The heads of requests for path (its query aside)."""
        pat = re.compile(rb"^[A-Z]+ (https?://[^/ ]*)?" + re.escape(path.encode()) + rb"[? ]")
        with self.lock:
            return [h for _, h in self.heads if pat.match(h)]

    def sent_for(self, path):
        with self.lock:
            return [b for _, p, b in self.sent if p.split("?")[0] == path.split("?")[0]]

    def planned_for(self, path):
        """The whole answers it was to send for path (the gateway may cut
        one before its end)."""
        with self.lock:
            return [b for p, b in self.planned if p.split("?")[0] == path.split("?")[0]]

    def describe(self):
        with self.lock:
            return ("%s echo server on 127.0.0.1:%d: %d connection(s), heads %r, sent %r"
                    % (self.label, self.port, self.conns,
                       [h[:400] for _, h in self.heads][:12],
                       [(p, b[:300]) for _, p, b in self.sent][:12]))


OPAQUE = b"OPAQUE-BODY-" + secrets.token_hex(6).encode()


# ---- reading what the sandbox received, as a client could --------------------

def split_answer(raw):
    """(head, body) of one answer as received, chunks joined as far as
    they arrived."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if re.search(rb"\r\ntransfer-encoding:[^\r]*chunked", head, re.I):
        out = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            try:
                k = int(size.split(b";")[0] or b"0", 16)
            except ValueError:
                break
            if k == 0:
                break
            out += rest[:k]
            body = rest[k + 2:]
        body = out
    return head, body


def decoded(b):
    """b with each compression undone that applies (as far as it arrived)."""
    outs = []
    for wbits in (47, 15, -15):
        try:
            d = zlib.decompressobj(wbits)
            outs.append(d.decompress(b) + d.flush())
        except zlib.error:
            pass
    br = unbrotli_stored(b)
    if br:
        outs.append(br)
    return [o for o in outs if o]


def json_unescape(b):
    s = b.decode("latin-1")
    s = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), s)
    s = re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r", "t": "\t"}.get(m.group(1),
                                                                            m.group(1)), s)
    return s.encode("latin-1", "replace")


def unbase64(b):
    """Every run of base64 characters decoded at each of the four offsets,
    in both alphabets."""
    outs = []
    for run in re.findall(rb"[A-Za-z0-9+/_=-]{8,}", b):
        run = run.rstrip(b"=")
        for off in range(4):
            part = run[off:]
            part = part[:len(part) - (len(part) % 4 == 1)]  # a lone last character is no byte
            part += b"=" * (-len(part) % 4)
            for alt in (b"+/", b"-_"):
                try:
                    outs.append(base64.b64decode(part, altchars=alt, validate=False))
                except (binascii.Error, ValueError):
                    pass
    return [b"\n".join(outs)] if outs else []


TEXT_DECODERS = (
    lambda b: [urllib.parse.unquote_to_bytes(b)],
    lambda b: [urllib.parse.unquote_to_bytes(b.replace(b"+", b" "))],
    lambda b: [html.unescape(b.decode("latin-1")).encode("latin-1", "replace")],
    lambda b: [json_unescape(b)],
    unbase64,
)


def client_views(raw):
    """raw (bytes a client received) and everything a client could make of
    it: the answer's body with its chunks joined, decompressed (twice, for
    stacked codings), then percent-, HTML-, JSON- and base64-decoded (also
    twice: a percent-encoded value in a JSON echo)."""
    head, body = split_answer(raw)
    views = [raw, head, body]
    for b in decoded(body):
        views += [b] + decoded(b)
    for _ in range(2):
        views += [d for v in views for dec in TEXT_DECODERS for d in dec(v)]
        views = list(dict.fromkeys(views))
    return views


def holds(raw, values):
    """The values (str or bytes) some client view of raw holds."""
    views = client_views(raw)
    return [v for v in values
            if any((v.encode() if isinstance(v, str) else v) in x for x in views)]


# ---- the stage every case runs on --------------------------------------------

def special_value(tag):
    """A random value of characters that URLs, JSON and HTML encode, whose
    basic-auth base64 (user svc) holds '/' and '+' too."""
    while True:  # '?' and '>' 3 bytes apart give '/' and '+' at one alignment in three
        v = '%s/%s+%s= "q"&<?%s>%s' % (tag, secrets.token_hex(4 + secrets.randbelow(3)),
                                        secrets.token_hex(4), secrets.token_hex(1),
                                        secrets.token_hex(4))
        b = base64.b64encode(b"svc:" + v.encode())
        if b"/" in b and b"+" in b:
            return v


JWT = rb"Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)"
# name -> (secret, pattern of its value in a head, TLS)
HOSTS = {"echo.internal": ("HDR", None, False), "query.internal": ("QRY", None, False),
         "basic.internal": ("BAS", None, False), "token.internal": ("TOK", JWT, False),
         "plain.internal": (None, rb"(X-Echo)", False),
         "secure.internal": ("HDR", None, True), "tsecure.internal": ("TOK", JWT, True)}


class Stage:
    """Echo servers for every host of HOSTS, a test CA for the TLS ones,
    the secrets (HDR: header X-Api-Key; QRY: query api_key; BAS: basic,
    user svc; TOK: per-request token, default ttl) with special values,
    and the task policy naming them (the TLS hosts intercepted)."""

    def __init__(self, d):
        self.values = {k: special_value(k.lower()) for k in ("HDR", "QRY", "BAS")}
        key = write_file(os.path.join(d, "tok.key"), secrets.token_hex(32), mode=0o600)
        pats = {"HDR": re.escape(self.values["HDR"].encode()).join([b"(", b")"]),
                "QRY": rb"api_key=([^& ]+)",
                "BAS": re.escape(base64.b64encode(b"svc:" + self.values["BAS"].encode()))
                .join([b"(", b")"])}
        pki = None
        self.srv = {}
        try:
            for name, (sec, pat, tls) in HOSTS.items():
                if tls and pki is None:
                    pki = Pki(d, "ca")
                cert = pki.leaf(name.split(".")[0], name) if tls else None
                self.srv[name] = EchoServer(name, pat or pats[sec], cert)
        except BaseException:
            self.close()
            raise
        self.ca = pki.cert
        hp = {n: "%s:%d" % (n, s.port) for n, s in self.srv.items()}
        allow = [{"host": hp[n], "tls": "intercept", "ca": self.ca} if HOSTS[n][2] else hp[n]
                 for n in HOSTS]
        scoped = {sec: [hp[n] for n, v in HOSTS.items() if v[0] == sec]
                  for sec in ("HDR", "QRY", "BAS", "TOK")}
        src = {k: {"source": {"env": "REFLECT_" + k}, "hosts": scoped[k]} for k in self.values}
        src["HDR"]["header"] = "X-Api-Key: {}"
        src["QRY"]["query"] = "api_key"
        src["BAS"]["basic"] = {"user": "svc"}
        tok = {"TOK": {"key": key, "hosts": scoped["TOK"], "per_request": True}}
        self.policy = net_policy(allow, list(HOSTS), limits={"timeout": "90s"}, secrets=src,
                                 tokens=tok)

    def close(self):
        for s in self.srv.values():
            s.close()

    def port(self, name):
        return self.srv[name].port

    def run(self, e, steps, timeout=90):
        r = cred_run(e, self.policy, steps, cmd=[PY, "/opt/t/reflect_tool.py",
                                                 "/opt/t/steps.json"],
                     files={"reflect_tool.py": open(TOOL).read()},
                     env={"REFLECT_" + k: v for k, v in self.values.items()},
                     timeout=timeout, srvs=list(self.srv.values()))
        return r

    def tokens(self):
        """Every token the token hosts received."""
        out = []
        for name in ("token.internal", "tsecure.internal"):
            with self.srv[name].lock:
                out += [m.decode() for _, h in self.srv[name].heads
                        for m in re.findall(JWT, h)]
        return out


def step(label, via, host, port, *paths, headers=None, timeout=15):
    return {"label": label, "via": via, "host": host, "port": port, "timeout": timeout,
            "requests": [{"path": p, "headers": dict(headers or {})} for p in paths]}


def answers(r, label):
    return r.step(label).get("answers") or []


def received(r, label):
    return [base64.b64decode(a.get("recv", "")) for a in answers(r, label)]


def with_stage(e, steps_of, timeout=90):
    """Run steps_of(stage) in a sandbox on a new stage; (run, stage)."""
    with TempDir() as d:
        st = Stage(d)
        try:
            r = st.run(e, steps_of(st), timeout)
        finally:
            st.close()
    return r, st


# ---- judging -----------------------------------------------------------------

def hidden(st):
    """Everything the sandbox must never read: the real values and every
    token the run minted."""
    return list(st.values.values()) + st.tokens()


def check_never_in_sandbox(ck, st, r):
    """No client view of any answer, nor the sandbox's raw output, the
    audit or the record, holds a real value or a minted token."""
    keep = hidden(st)
    for label in r.steps:
        for i, raw in enumerate(received(r, label)):
            got = holds(raw, keep)
            ck.that(not got, "%s#%d: the sandbox received %s (as a client reads the answer: %r)"
                    % (label, i, ", ".join(repr(g[:24]) for g in got), raw[:600]))
    for v in keep:
        no_real_value(ck, v, {"the sandbox's stdout": r.res.out, "its stderr": r.res.err,
                              "the audit": r.raw["audit"], "the record": r.raw["record"]})


def check_reflected(ck, st, r, label, host, secret, misuse=True):
    """Step label's last answer echoed the value and was cut: the server
    sent an answer that a client reads the value (or token) in, the
    sandbox got the answer incomplete and the connection closed. The
    count of secret.misuse events is judged by the case."""
    a = answers(r, label)
    if not ck.that(a, "%s: no answer at all: %s" % (label, r.step(label))):
        return
    path = a[-1]["path"]
    srv = st.srv[host]
    sent = srv.planned_for(path)
    want = [st.values[secret]] if secret in st.values else st.tokens()
    ck.that(sent and holds(sent[-1], want) or path.endswith(("/zstd", "/compress")),
            "%s: the server's answer to %s does not hold the value (bad test setup?): %r"
            % (label, path, sent[-1][:300] if sent else None))
    ck.that(not a[-1].get("complete"),
            "%s: the answer to %s arrived whole (%d bytes); it should have been cut"
            % (label, path, len(received(r, label)[-1])))
    ck.that(a[-1].get("eof"), "%s: the connection was not closed: %r" % (label, a[-1]))
    if path.endswith(("/zstd", "/compress")):
        ck.that(not any(OPAQUE in raw for raw in received(r, label)),
                "%s: the body in a coding the gateway cannot read reached the sandbox" % label)


def check_misuse(ck, r, counts):
    """secret.misuse events where "answer": exactly counts[(secret, host)]
    of each, and no other."""
    got = {}
    for ev in r.evs("secret.misuse", where="answer"):
        k = (ev.get("secret"), ev.get("host"))
        got[k] = got.get(k, 0) + 1
    want = {k: v for k, v in counts.items() if v}
    ck.that(got == want, "secret.misuse where answer (secret, host): %s, expected %s"
            % (sorted(got.items()), sorted(want.items())))


def check_innocent(ck, st, r, label, host):
    """Every answer of step label arrived whole and byte for byte as the
    server sent it (framing included), on one connection."""
    a = answers(r, label)
    ck.that(len(a) >= 2 and all(x.get("complete") for x in a),
            "%s: the innocent answers did not all arrive whole: %r" % (label, a))
    for x, raw in zip(a, received(r, label)):
        sent = st.srv[host].sent_for(x["path"])
        ck.that(sent and sent[-1] == raw,
                "%s: %s arrived changed:\n sent     %r\n received %r"
                % (label, x["path"], sent[-1] if sent else None, raw))


def reflect_case(name, via, host, secret, *paths, weak=False, doc=""):
    """A case: one step by via to host asking for paths on one connection,
    whose last answer echoes secret's value; it must be cut and audited
    (weak: a coding the gateway may refuse rather than read, so no misuse
    event is required)."""
    def fn(e):
        ck = Checks()
        r, st = with_stage(e, lambda st: [step(name, via, host, st.port(host), *paths)])
        ck.runs.append(r)
        ck.that(r.res.rc == 0, "the run exited %s" % r.res.rc)
        check_reflected(ck, st, r, name, host, secret)
        check_never_in_sandbox(ck, st, r)
        if not weak:
            check_misuse(ck, r, {(secret, host): 1})
        ck.done()
    fn.__doc__ = doc or ("Through the %s, %s answers %s echoing the value of %s: the "
                         "answer is cut, the connection closed, the sandbox reads nothing of "
                         "the value in any encoding, and secret.misuse (where answer) names "
                         "%s and %s%s." % (via, host, " then ".join(paths), secret, secret, host,
                                           " (or the coding is refused)" if weak else ""))
    suite.add(name, fn)


# ---- 1. the full matrix on the plain proxy -----------------------------------

for mode in ("chunked/1", "chunked/mid", "trickle/6/300", "gzip", "xgzip", "gzipchunked",
             "deflate", "br", "pct", "pctlower", "pctplus", "json", "jsonslash", "jsonu",
             "b64/0", "b64/1", "b64/2", "b64url/0", "b64url/1", "b64url/2", "html", "htmlnum"):
    reflect_case("proxy_" + mode.replace("/", "_"), "proxy", "echo.internal", "HDR",
                 "/m/" + mode)
for mode in ("deflateraw", "stacked", "zstd", "compress"):
    reflect_case("proxy_" + mode, "proxy", "echo.internal", "HDR", "/m/" + mode, weak=True)
for mode in ("plain", "redirect", "json", "jsonslash"):
    reflect_case("proxy_query_" + mode, "proxy", "query.internal", "QRY", "/m/" + mode)
for mode in ("chunked/2", "jsonslash", "pct"):
    reflect_case("proxy_basic_" + mode.replace("/", "_"), "proxy", "basic.internal", "BAS",
                 "/m/" + mode)
reflect_case("proxy_token_same_request", "proxy", "token.internal", "TOK", "/m/plain")
reflect_case("proxy_token_later_request", "proxy", "token.internal", "TOK",
             "/m/ok", "/m/prev/plain")
reflect_case("proxy_token_later_request_gzip", "proxy", "token.internal", "TOK",
             "/m/ok", "/m/prev/gzip")


@suite.case
def proxy_token_later_connection(e):
    """A per-request token minted for one connection, echoed on a later
    connection to the same host (which carries a token of its own): cut,
    closed, audited as misuse of TOK; the sandbox reads neither token."""
    ck = Checks()
    r, st = with_stage(e, lambda st: [
        step("first", "proxy", "token.internal", st.port("token.internal"), "/m/ok"),
        step("later", "proxy", "token.internal", st.port("token.internal"),
             "/m/prevconn/plain")])
    ck.runs.append(r)
    ck.that(r.res.rc == 0, "the run exited %s" % r.res.rc)
    ck.that(len(st.tokens()) == 2, "the token host received %d tokens, expected 2"
            % len(st.tokens()))
    check_reflected(ck, st, r, "later", "token.internal", "TOK")
    check_never_in_sandbox(ck, st, r)
    check_misuse(ck, r, {("TOK", "token.internal"): 1})
    ck.done()


@suite.case
def proxy_innocent(e):
    """Answers on a connection that carries a value but do not echo it pass
    unchanged, byte for byte with the server's own chunked framing: one
    with the sandbox's placeholder, the value's first 12 bytes followed by
    other text and text that looks encoded, then the same gzip-compressed
    (Content-Encoding gzip, in 9-byte chunks), both on one connection,
    and the connection stays open for a third request. No secret.misuse."""
    ck = Checks()
    r, st = with_stage(e, lambda st: [
        step("innocent", "proxy", "echo.internal", st.port("echo.internal"),
             "/m/innocent", "/m/innocentgz", "/m/ok", headers={"X-Echo": "{{env:HDR}}"})])
    ck.runs.append(r)
    ck.that(r.res.rc == 0, "the run exited %s" % r.res.rc)
    ck.that(len(answers(r, "innocent")) == 3, "not all three requests were answered")
    check_innocent(ck, st, r, "innocent", "echo.internal")
    heads = st.srv["echo.internal"].heads_of("/m/innocent")
    ck.that(heads and st.values["HDR"].encode() in heads[0],
            "the innocent request did not carry the value (nothing was tested): %r" % heads)
    ph = re.search(rb"\r\nX-Echo: ([^\r]*)", heads[0] if heads else b"")
    ck.that(ph and PH_RE.match(ph.group(1).decode()),
            "the server did not get the sandbox's placeholder in X-Echo: %r" % heads)
    check_never_in_sandbox(ck, st, r)
    check_misuse(ck, r, {})
    ck.done()


@suite.case
def proxy_range_refused(e):
    """Range and If-Range on a request that carries a value get 403 with an
    X-Airlock-Denied header, never reach the server, and are audited as
    net.request deny; the same headers to a host no value goes to pass
    (the server receives them as sent)."""
    ck = Checks()
    rng = {"Range": "bytes=0-9"}
    ifr = {"If-Range": "\"etag-1\"", "Range": "bytes=5-"}
    r, st = with_stage(e, lambda st: [
        step("range", "proxy", "echo.internal", st.port("echo.internal"), "/m/ok/range",
             headers=rng),
        step("if-range", "proxy", "echo.internal", st.port("echo.internal"), "/m/ok/ifrange",
             headers=ifr),
        step("no-value", "proxy", "plain.internal", st.port("plain.internal"),
             "/m/ok/novalue", headers=rng)])
    ck.runs.append(r)
    ck.that(r.res.rc == 0, "the run exited %s" % r.res.rc)
    for label, path in (("range", "/m/ok/range"), ("if-range", "/m/ok/ifrange")):
        raw = (received(r, label) or [b""])[0]
        ck.that(raw.startswith(b"HTTP/1.1 403") and re.search(rb"\r\nX-Airlock-Denied:", raw, re.I),
                "%s: expected 403 with X-Airlock-Denied, got %r" % (label, raw[:300]))
        ck.that(not st.srv["echo.internal"].heads_of(path),
                "%s: the request reached the server" % label)
        ev = [x for x in r.evs("net.request", decision="deny") if x.get("path") == path]
        ck.that(len(ev) == 1 and ev[0].get("host") == "echo.internal",
                "%s: expected one net.request deny for %s on echo.internal: %s"
                % (label, path, r.evs("net.request")))
    h = st.srv["plain.internal"].heads_of("/m/ok/novalue")
    ck.that(h and b"\r\nRange: bytes=0-9\r\n" in h[0],
            "Range to a host no value goes to did not pass as sent: %r" % h)
    ck.done()


def accept_encoding(head):
    m = re.search(rb"\r\nAccept-Encoding: *([^\r]*)", head, re.I)
    if not m:
        return None
    return [t.split(b";")[0].strip().decode().lower() for t in m.group(1).split(b",")
            if t.strip()]


@suite.case
def proxy_accept_encoding(e):
    """On requests that carry a value the gateway rewrites Accept-Encoding
    to the codings it can decode among those the client listed: asking
    for zstd, br, gzip, compress, identity, deflate and x-gzip, the server
    sees gzip and none of zstd or compress, nothing the client did not
    list; asking for zstd and compress only, it sees neither. To a host no
    value goes to the field passes as sent."""
    ck = Checks()
    many = "zstd, br;q=0.9, gzip, compress, identity, deflate, x-gzip"
    r, st = with_stage(e, lambda st: [
        step("many", "proxy", "echo.internal", st.port("echo.internal"), "/m/ok/many",
             headers={"Accept-Encoding": many}),
        step("unknown", "proxy", "echo.internal", st.port("echo.internal"), "/m/ok/unknown",
             headers={"Accept-Encoding": "zstd, compress"}),
        step("no-value", "proxy", "plain.internal", st.port("plain.internal"),
             "/m/ok/novalue", headers={"Accept-Encoding": many})])
    ck.runs.append(r)
    ck.that(r.res.rc == 0, "the run exited %s" % r.res.rc)
    can = {"gzip", "x-gzip", "deflate", "br", "identity"}
    h = st.srv["echo.internal"].heads_of("/m/ok/many")
    got = accept_encoding(h[0]) if h else None
    ck.that(got is not None and "gzip" in got and set(got) <= can,
            "Accept-Encoding %r reached the server; expected gzip and only codings the "
            "gateway decodes of %r" % (got, many))
    h = st.srv["echo.internal"].heads_of("/m/ok/unknown")
    got = accept_encoding(h[0]) if h else ["(no request)"]
    ck.that(not set(got or []) & {"zstd", "compress", "(no request)"},
            "Accept-Encoding %r reached the server for a client asking for zstd, compress"
            % got)
    h = st.srv["plain.internal"].heads_of("/m/ok/novalue")
    ck.that(h and ("\r\nAccept-Encoding: %s\r\n" % many).encode() in h[0],
            "Accept-Encoding to a host no value goes to did not pass as sent: %r" % h)
    ck.done()


@suite.case
def proxy_token_ttl(e):
    """A per-request token with no ttl given expires at most 15 s after it
    was minted (as the upstream received it)."""
    ck = Checks()
    r, st = with_stage(e, lambda st: [
        step("ttl", "proxy", "token.internal", st.port("token.internal"), "/m/ok")])
    ck.runs.append(r)
    toks = st.tokens()
    ck.that(len(toks) == 1, "the token host received %d tokens" % len(toks))
    for t in toks:
        c = claims(t)
        ck.that(isinstance(c.get("exp"), int) and isinstance(c.get("iat"), int)
                and 0 < c["exp"] - c["iat"] <= 15,
                "the token's exp - iat is %r, expected at most 15 s"
                % (c.get("exp", 0) - c.get("iat", 0)))
    ck.done()


@suite.case
def proxy_stall_held_prefix(e):
    """An echo that stops a third of the way into the value (the server
    holds the connection for 45 s; half of the value would be refused at
    once): the sandbox never gets those bytes,
    and the gateway closes the connection about 30 s after (at 25 to
    40 s), not when the server gives up."""
    ck = Checks()
    r, st = with_stage(e, lambda st: [
        step("stall", "proxy", "echo.internal", st.port("echo.internal"), "/m/stall",
             timeout=50)], timeout=120)
    ck.runs.append(r)
    a = answers(r, "stall")
    raw = (received(r, "stall") or [b""])[0]
    half = st.values["HDR"][:len(st.values["HDR"]) // 2]
    ck.that(a and not a[0].get("complete"), "the stalled answer: %r" % a)
    ck.that(half[:6].encode() not in raw, "the sandbox received the start of the value: %r"
            % raw[-200:])
    secs = a[0].get("seconds", 0) if a else 0
    ck.that(25 <= secs <= 40, "the connection ended after %.1f s, expected about 30" % secs)
    ck.done()


# ---- 2. the other paths: chunked split, trickle, gzip, token, innocent -------

def path_case(via, host, thost):
    def fn(e):
        ck = Checks()
        r, st = with_stage(e, lambda st: [
            step("chunked", via, host, st.port(host), "/m/chunked/mid"),
            step("trickle", via, host, st.port(host), "/m/trickle/6/300"),
            step("gzip", via, host, st.port(host), "/m/gzip"),
            step("token", via, thost, st.port(thost), "/m/ok", "/m/prev/plain"),
            step("innocent", via, host, st.port(host), "/m/innocent", "/m/innocentgz",
                 headers={"X-Echo": "{{env:HDR}}"})])
        ck.runs.append(r)
        ck.that(r.res.rc == 0, "the run exited %s" % r.res.rc)
        if via == "direct" and all(r.step(k).get("connect_error") for k in r.steps):
            raise Skip("no transparent capture here: %s" % r.step("chunked"))
        for label in ("chunked", "trickle", "gzip"):
            check_reflected(ck, st, r, label, host, "HDR")
        check_reflected(ck, st, r, "token", thost, "TOK")
        check_innocent(ck, st, r, "innocent", host)
        check_never_in_sandbox(ck, st, r)
        check_misuse(ck, r, {("HDR", host): 3, ("TOK", thost): 1})
        ck.done()
    fn.__doc__ = ("Through the %s: an echo chunked with a boundary inside the value, one "
                  "trickled in 6-byte pieces 300 ms apart, one gzip-compressed and a "
                  "per-request token echoed on the next request of its connection are each "
                  "cut (connection closed, the sandbox reads nothing of them in any "
                  "encoding) and audited as secret.misuse where answer (HDR three times on "
                  "%s, TOK once on %s); innocent answers (chunked, and gzip-compressed) "
                  "arrive byte for byte as sent." % (via, host, thost))
    suite.add("path_" + via, fn)


path_case("tunnel", "echo.internal", "token.internal")
path_case("socks", "echo.internal", "token.internal")
path_case("direct", "echo.internal", "token.internal")
path_case("tls", "secure.internal", "tsecure.internal")


if __name__ == "__main__":
    main(suite)
