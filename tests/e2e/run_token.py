#!/usr/bin/python3
"""End-to-end tests of the per-run tokens (TAP): `airlock token` against
second implementations.

usage: run_token.py AIRLOCK CREDENTIALS_MD [CASE-SUBSTRING...]

The real binary makes keys and tokens and verifies them; PyJWT (Debian's
python3-jwt), python3-cryptography and Python's hmac check the same tokens,
and mint tokens airlock must accept. The two verification snippets of
docs/credentials.md ("How a service verifies a token") are read out of the
file and run, so the documentation cannot drift from what works. Nothing
here uses the network or a sandbox.
"""

import base64
import hashlib
import hmac
import json
import os
import re
import stat
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization

from harness import Env, Suite, TempDir, expect, expect_one_error_line, expect_rc, run_host

suite = Suite()
case = suite.case
DOC = None  # docs/credentials.md, from the command line

NOW = 1796155800  # 2026-12-01T20:10:00Z


def token(env, *args, input=None):
    return run_host([env.airlock, "token"] + [str(a) for a in args], input=input)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def thumbprint(members):
    """RFC 7638: SHA-256 of the required members, sorted, no whitespace."""
    canon = json.dumps(members, sort_keys=True, separators=(",", ":")).encode()
    return b64url(hashlib.sha256(canon).digest())


def doc_snippets():
    """{function name: namespace} for each python block of the doc's
    "## Per-run tokens" section, each run on its own."""
    text = open(DOC, encoding="utf-8").read()
    m = re.search(r"^## Per-run tokens\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    expect(m is not None, "%s has no \"## Per-run tokens\" section" % DOC)
    found = {}
    for code in re.findall(r"^```python\n(.*?)^```$", m.group(1), re.S | re.M):
        ns = {}
        exec(compile(code, DOC, "exec"), ns)
        for name in ("verify_hs256", "verify_eddsa"):
            if name in ns:
                found[name] = ns[name]
    expect(sorted(found) == ["verify_eddsa", "verify_hs256"],
           "the doc's python blocks define %s, expected verify_eddsa and verify_hs256"
           % sorted(found))
    return found


class Keys:
    """An Ed25519 and an HS256 key made by airlock keygen in a temp dir."""

    def __init__(self, env):
        self.env = env
        self.tmp = TempDir(mode=0o700)

    def __enter__(self):
        d = self.tmp.__enter__()
        self.dir = d
        self.ed = os.path.join(d, "ed.pem")
        self.hs = os.path.join(d, "hs.key")
        for alg, path in (("eddsa", self.ed), ("hs256", self.hs)):
            res = token(self.env, "keygen", "--alg", alg, "--out", path)
            expect_rc(res, 0)
        res = token(self.env, "jwks", "--key", self.ed)
        expect_rc(res, 0)
        self.jwks = res.text
        return self

    def __exit__(self, *exc):
        self.tmp.__exit__(*exc)

    def mint(self, key, *args, aud="api.example.com"):
        res = token(self.env, "mint", "--key", key, "--sub", "run:e2e", "--aud", aud,
                    *args)
        expect_rc(res, 0)
        return res.text.strip()


def tamper_signature(tok):
    """tok with one signature character changed (not the last, whose low
    bits may not count)."""
    i = tok.rindex(".") + 5
    return tok[:i] + ("A" if tok[i] != "A" else "B") + tok[i + 1:]


@case
def keygen_both(env):
    """keygen writes an Ed25519 PKCS#8 PEM that python3-cryptography reads
    (its public key is the JWKS's x, its kid the RFC 7638 thumbprint) and an
    HS256 secret of 64 hex digits without a newline, both mode 0600; it
    never replaces a file."""
    with Keys(env) as k:
        for path in (k.ed, k.hs):
            mode = stat.S_IMODE(os.stat(path).st_mode)
            expect(mode == 0o600, "%s has mode %o, expected 600" % (path, mode))
        with open(k.ed, "rb") as f:
            priv = serialization.load_pem_private_key(f.read(), password=None)
        raw = priv.public_key().public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)
        jwk = json.loads(k.jwks)["keys"][0]
        expect(jwk["x"] == b64url(raw), "JWKS x %r is not the key's public key" % jwk)
        expect(jwk["kid"] == thumbprint({"crv": "Ed25519", "kty": "OKP", "x": jwk["x"]}),
               "kid %r is not the RFC 7638 thumbprint" % jwk["kid"])
        expect({k2: jwk[k2] for k2 in ("kty", "crv", "alg", "use")} ==
               {"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig"},
               "JWKS: %r" % jwk)
        secret = open(k.hs, "rb").read()
        expect(re.fullmatch(rb"[0-9a-f]{64}", secret) is not None,
               "HS256 key file: %r" % secret)
        res = token(env, "keygen", "--alg", "hs256", "--out", k.hs)
        expect_one_error_line(res, 125, "exists")
        expect(open(k.hs, "rb").read() == secret, "keygen replaced an existing key")


@case
def verify_deadline_audience_signature(env):
    """A token minted at NOW for 60 s verifies until NOW+59 (also read from
    stdin) and prints its claims; at NOW+60, for another audience, with a
    changed signature or longer than 8192 bytes it is refused with exit 1
    and one line naming the check."""
    with Keys(env) as k:
        tok = k.mint(k.ed, "--ttl", "60", "--now", NOW, "--scope", "read")
        res = token(env, "verify", "--key", k.ed, "--aud", "api.example.com",
                    "--now", NOW + 59, tok)
        expect_rc(res, 0)
        claims = json.loads(res.text)
        expect(claims["iss"] == "airlock" and claims["sub"] == "run:e2e"
               and claims["aud"] == "api.example.com" and claims["iat"] == NOW
               and claims["exp"] == NOW + 60 and claims["scope"] == "read"
               and re.fullmatch("[0-9a-f]{32}", claims["jti"]), "claims: %r" % claims, res)
        res = token(env, "verify", "--key", k.ed, "--now", NOW + 59, "-",
                    input=tok.encode() + b"\n")
        expect_rc(res, 0)
        res = token(env, "verify", "--key", k.ed, "-", input=b"A" * 20000)
        expect_one_error_line(res, 1, "longer than 8192 bytes")
        res = token(env, "verify", "--key", k.ed, "--now", NOW + 60, tok)
        expect_one_error_line(res, 1, "token: expired at 2026-12-01T20:11:00Z")
        res = token(env, "verify", "--key", k.ed, "--aud", "other.example.com",
                    "--now", NOW, tok)
        expect_one_error_line(res, 1, 'audience "other.example.com" not in ["api.example.com"]')
        res = token(env, "verify", "--key", k.ed, "--now", NOW, tamper_signature(tok))
        expect_one_error_line(res, 1, "token: bad signature")
        # The other key's kind: refused before any signature is looked at.
        res = token(env, "verify", "--key", k.hs, "--now", NOW, tok)
        expect_one_error_line(res, 1, 'alg "EdDSA", but the key is an HS256 secret')
        expect(res.out == b"", "a refused token printed claims", res)


@case
def pyjwt_verifies_eddsa(env):
    """The doc's PyJWT snippet, fed the printed JWKS, verifies airlock's
    EdDSA token and refuses it tampered with, expired or for another
    audience; airlock verifies a token PyJWT signed with the same PEM."""
    verify_eddsa = doc_snippets()["verify_eddsa"]
    with Keys(env) as k:
        tok = k.mint(k.ed, "--ttl", "300")
        claims = verify_eddsa(tok, k.jwks, "api.example.com")
        expect(claims["sub"] == "run:e2e", "claims: %r" % claims)
        for bad, why, aud in (
                (tamper_signature(tok), jwt.InvalidSignatureError, "api.example.com"),
                (tok, jwt.InvalidAudienceError, "other.example.com"),
                (k.mint(k.ed, "--ttl", "10", "--now", int(time.time()) - 100),
                 jwt.ExpiredSignatureError, "api.example.com")):
            try:
                verify_eddsa(bad, k.jwks, aud)
            except why:
                continue
            raise AssertionError("PyJWT accepted a token it should refuse (%s)" % why.__name__)

        kid = json.loads(k.jwks)["keys"][0]["kid"]
        theirs = jwt.encode({"sub": "pyjwt", "aud": "api.example.com",
                             "exp": int(time.time()) + 60},
                            open(k.ed, "rb").read(), algorithm="EdDSA", headers={"kid": kid})
        res = token(env, "verify", "--key", k.ed, "--aud", "api.example.com", theirs)
        expect_rc(res, 0)
        expect(json.loads(res.text)["sub"] == "pyjwt", "claims: %s" % res.text, res)


@case
def stdlib_verifies_hs256(env):
    """The doc's standard-library snippet verifies airlock's HS256 token
    with the key file's bytes and refuses it tampered with, expired or for
    another audience; its kid is the RFC 7638 thumbprint of the secret's
    JWK; airlock verifies a token PyJWT signed with the same secret."""
    verify_hs256 = doc_snippets()["verify_hs256"]
    with Keys(env) as k:
        secret = open(k.hs, "rb").read()
        tok = k.mint(k.hs, "--ttl", "300", "--aud", "b.example.com")
        claims = verify_hs256(tok, secret, "b.example.com")
        expect(claims["aud"] == ["api.example.com", "b.example.com"], "claims: %r" % claims)
        header = json.loads(b64url_decode(tok.split(".")[0]))
        expect(header == {"alg": "HS256", "typ": "JWT",
                          "kid": thumbprint({"k": b64url(secret), "kty": "oct"})},
               "header: %r" % header)
        for bad, aud in ((tamper_signature(tok), "b.example.com"),
                         (tok, "c.example.com"),
                         (k.mint(k.hs, "--ttl", "10", "--now", int(time.time()) - 100),
                          "api.example.com")):
            try:
                verify_hs256(bad, secret, aud)
            except ValueError:
                continue
            raise AssertionError("the stdlib snippet accepted a token it should refuse")

        theirs = jwt.encode({"sub": "pyjwt", "exp": int(time.time()) + 60}, secret,
                            algorithm="HS256")
        res = token(env, "verify", "--key", k.hs, theirs)
        expect_rc(res, 0)
        expect(json.loads(res.text)["sub"] == "pyjwt", "claims: %s" % res.text, res)


@case
def forgeries_refused(env):
    """alg none, and an HS256 token keyed with the published public key
    (the alg-confusion forgery), are refused by a public-key verifier; a
    public key cannot mint."""
    with Keys(env) as k:
        pub = os.path.join(k.dir, "pub.pem")
        with open(k.ed, "rb") as f:
            priv = serialization.load_pem_private_key(f.read(), password=None)
        pem = priv.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)
        with open(pub, "wb") as f:
            f.write(pem)
        payload = b64url(json.dumps({"sub": "x", "exp": NOW + 60}).encode())
        none = b64url(b'{"alg":"none"}') + "." + payload + "."
        res = token(env, "verify", "--key", pub, "--now", NOW, none)
        expect_one_error_line(res, 1, 'alg "none": unsigned tokens are refused')
        kid = json.loads(k.jwks)["keys"][0]["kid"]
        signed = b64url(json.dumps({"alg": "HS256", "kid": kid}).encode()) + "." + payload
        mac = hmac.new(pem, signed.encode(), hashlib.sha256).digest()
        res = token(env, "verify", "--key", pub, "--now", NOW, signed + "." + b64url(mac))
        expect_one_error_line(res, 1, 'alg "HS256", but the key is an Ed25519 key')
        res = token(env, "mint", "--key", pub, "--sub", "x", "--aud", "y", "--ttl", "60")
        expect_one_error_line(res, 125, "cannot mint")


@case
def key_file_refusals(env):
    """A secret readable by others, a secret shorter than 32 bytes and a
    JWKS of an HS256 key are refused, each with one line that names the
    file or the reason."""
    with Keys(env) as k:
        os.chmod(k.hs, 0o644)
        res = token(env, "jwks", "--key", k.hs)
        expect_one_error_line(res, 125, k.hs, "mode 0644", "chmod 600")
        os.chmod(k.hs, 0o600)
        res = token(env, "jwks", "--key", k.hs)
        expect_one_error_line(res, 125, "would publish the secret")
        short = os.path.join(k.dir, "short")
        with open(os.open(short, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(b"too short\n")
        res = token(env, "mint", "--key", short, "--sub", "x", "--aud", "y", "--ttl", "60")
        expect_one_error_line(res, 125, short, "10 bytes: an HS256 secret must be at least 32")
        res = token(env, "verify", "--key", k.ed, "--frobnicate", "x")
        expect_one_error_line(res, 125, "unknown option --frobnicate")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK CREDENTIALS_MD [CASE-SUBSTRING...]" % sys.argv[0],
              file=sys.stderr)
        sys.exit(2)
    DOC = sys.argv[2]
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[1]), only=sys.argv[3:]))
