# airlock's Python context driver (docs/api.md, "Code contexts"), run as
# `python3 -u -c DRIVER` by the session process. Each line on stdin is one
# run: {"id": N, "code": TEXT, "nonce": HEX}. The code runs in one globals
# dict kept for the interpreter's life; its output goes to the real stdout
# and stderr as it happens; then the run's frame goes on stdout and the end
# marker on stderr, each tagged with the run's nonce.
import ast, json, linecache, os, sys, traceback


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
        return (None if v is None else repr(v)[:1 << 20]), None
    except SystemExit:
        raise
    except BaseException as e:
        # This function's own frame is left out of the traceback.
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
        return None, {"name": type(e).__name__, "message": str(e), "traceback": tb}


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
        frame = json.dumps({"id": req["id"], "value": value, "error": error})
        os.write(1, (tag + frame + "\n").encode())
        os.write(2, (tag + "end\n").encode())


main()
