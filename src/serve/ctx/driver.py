# airlock's Python context driver (docs/api.md, "Code contexts"), run as
# `python3 -u -c DRIVER` by the session process. Each line on stdin is one
# run: {"id": N, "code": TEXT, "nonce": HEX}. The code runs in one globals
# dict kept for the interpreter's life; its output goes to the real stdout
# and stderr as it happens; then the run's frame goes on stdout and the end
# marker on stderr, each tagged with the run's nonce.
import sys

# `python3 -c` puts the working directory first on sys.path: a json.py or
# ast.py of the user's there would be imported by this driver instead of
# the standard library's and break every run. It is taken off for the
# driver's imports and put back for the user's code.
_first = sys.path.pop(0) if sys.path and sys.path[0] in ("", ".") else None
import ast, json, linecache, os, traceback

if _first is not None:
    sys.path.insert(0, _first)

# A frame's text field (value, message, traceback) at most, as JSON bytes:
# the session refuses a frame whose fields are over 1 MiB.
CAP = 1 << 20


def text(s):
    """s as a frame's field: a NUL or a lone surrogate (which the session's
    JSON parser refuses) written as its escape, \\x00 or \\udXXX, and the
    text cut until its JSON is at most CAP bytes."""
    s = s.replace("\0", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    n = len(json.dumps(s, ensure_ascii=False).encode())
    while n > CAP:
        s = s[: max(0, len(s) * CAP // n - 16)]
        n = len(json.dumps(s, ensure_ascii=False).encode())
    return s


def shown(f, fallback):
    """f() as a frame's text, or fallback when f raises (an exception whose
    __str__ raises is still the run's error)."""
    try:
        return text(f())
    except Exception:
        return fallback


def describe(e):
    """The error of exception e: its name, message and traceback (this
    driver's own frame left out)."""
    tb = lambda: "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
    return {
        "name": shown(lambda: type(e).__name__, "BaseException"),
        "message": shown(lambda: str(e), "<str() of the exception raised>"),
        "traceback": shown(tb, ""),
    }


def run(code, g):
    """The code's last expression's repr (or None) and the error (or None)."""
    try:
        linecache.cache["<cell>"] = (len(code), None, code.splitlines(True), "<cell>")
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell>", "exec"), g)
        if last is None:
            return None, None
        v = eval(compile(last, "<cell>", "eval"), g)
        return (None if v is None else text(repr(v))), None
    except SystemExit:
        raise
    except BaseException as e:
        return None, describe(e)


def put(fd, b):
    """All of b to fd (a write to a pipe may be short)."""
    while b:
        b = b[os.write(fd, b):]


def main():
    # The protocol's stdin is kept on a descriptor of our own (not
    # inherited by subprocesses); the user's code reads /dev/null.
    proto = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    for line in proto:
        req = json.loads(line)
        value, error = run(req["code"], g)
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                f.flush()
            except Exception:
                pass
        tag = "\x1eALCTX:%s:" % req["nonce"]
        # As UTF-8 (not \u escapes): what text() measured.
        frame = json.dumps({"id": req["id"], "value": value, "error": error},
                           ensure_ascii=False)
        put(1, (tag + frame + "\n").encode())
        put(2, (tag + "end\n").encode())


main()
