"""What code written for E2B's SDK does, kept working in this client:
each case is a call as E2B's programs make it, which once needed more
than a rename (docs/clients.md, "E2B's names and ours")."""

import threading

import pytest

from airlock import CommandExitError, OutputMessage, PtySize, Result, Sandbox


@pytest.fixture(scope="module")
def sbx(daemon):
    s = Sandbox(timeout=120)
    try:
        yield s
    finally:
        s.kill()


def test_run_code_callbacks_as_e2b_calls_them(sbx):
    """on_stdout/on_stderr get OutputMessages (.line, .error), on_result
    the last expression's Result, on_error the exception."""
    got = []
    ex = sbx.run_code("import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n6 * 7",
                      on_stdout=lambda m: got.append(("out", m.line, m.error)),
                      on_stderr=lambda m: got.append(("err", m.line, m.error)),
                      on_result=lambda r: got.append(("result", r.text, r.is_main_result)),
                      on_error=lambda e: got.append(("error", e.name)))
    assert got == [("out", "to out\n", False), ("err", "to err\n", True),
                   ("result", "42", True)]
    assert ex.text == "42" and isinstance(ex.results[0], Result)
    got.clear()
    ex = sbx.run_code("{}['missing']", on_result=got.append,
                      on_error=lambda e: got.append(("error", e.name, e.value)))
    assert got == [("error", "KeyError", "'missing'")] and ex.error.name == "KeyError"
    raw = sbx.run_code("import sys; sys.stdout.buffer.write(b'a\\xffb'); sys.stdout.flush()")
    assert raw.logs.stdout == ["a\ufffdb"]  # the daemon's base64, decoded
    msg = OutputMessage("x\n", error=True)
    assert msg == "x\n" and msg.line == "x\n" and msg.timestamp > 0


def test_run_code_envs_says_where_they_go(sbx):
    """envs per run is E2B's; here a context's environment is set when it
    is made, and the error says so instead of a TypeError."""
    with pytest.raises(ValueError, match="create_code_context"):
        sbx.run_code("1", envs={"A": "b"})
    ctx = sbx.create_code_context(envs={"A": "b"})
    assert sbx.run_code("import os; os.environ['A']", context=ctx).text == "'b'"
    assert sbx.run_code("1 + 1", context=ctx.id, request_timeout=30).text == "2"


def test_commands_list_gives_process_info(sbx):
    """commands.list() entries have E2B's .pid, .cmd and .args; the
    background command is listed running, and ended once killed."""
    h = sbx.commands.run("exec sleep 60", background=True)
    procs = {p.pid: p for p in sbx.commands.list()}
    p = procs[h.pid]
    assert (p.cmd, p.args, p.state) == ("/bin/bash", ["-c", "exec sleep 60"], "running")
    assert sbx.commands.kill(h.pid) is True
    with pytest.raises(CommandExitError):
        h.wait()
    assert {p.pid: p for p in sbx.commands.list()}[h.pid].state == "ended"


def test_command_exit_error_says_exit_status(sbx):
    with pytest.raises(CommandExitError) as e:
        sbx.commands.run("echo oops >&2; exit 3")
    assert (e.value.exit_code, e.value.error, e.value.stderr) == (3, "exit status 3", "oops\n")


def test_files_remove_takes_a_directory_with_what_is_in_it(sbx):
    """remove() of a directory removes it whole, as E2B's does; a link
    inside is removed, not followed: what it points to stays."""
    sbx.files.write("/work/keep/kept.txt", "kept")
    sbx.files.write("/work/tree/a/b/c.txt", "c")
    sbx.files.write("/work/tree/a/d.bin", b"\x00\xff")
    sbx.commands.run("ln -s /work/keep /work/tree/a/link")
    sbx.files.remove("/work/tree")
    assert not sbx.files.exists("/work/tree")
    assert sbx.files.read("/work/keep/kept.txt") == "kept"


def test_pty_wait_on_pty_gets_all_output(sbx):
    """E2B reads a terminal with wait(on_pty=...) after typing into it:
    on_pty gets what it printed before wait was called, then the rest."""
    t = sbx.pty.create(PtySize(rows=24, cols=80))
    sbx.pty.send_stdin(t.pid, b"echo before-$((6 * 7))\n")
    sbx.pty.resize(t.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(t.pid, b"stty size; exit\n")
    out = []
    assert t.wait(on_pty=out.append).exit_code == 0
    text = b"".join(out)
    assert b"before-42" in text and b"30 100" in text, text
    # A handle made with on_data still gives wait(on_pty) everything.
    seen, done = [], threading.Event()
    t = sbx.pty.create(PtySize(rows=24, cols=80), on_data=seen.append)
    t.send_stdin(b"echo first-$((2 * 3)); exit\n")
    late = []
    t.wait(on_pty=late.append)
    assert b"first-6" in b"".join(seen) and b"first-6" in b"".join(late)


def test_stdin_flag_as_e2b_gives_it(sbx):
    """E2B's stdin=True (a stdin to send to later): taken with a background
    command, whose stdin stays open; refused without background, naming
    why; a value of another type is a TypeError, never ignored."""
    h = sbx.commands.run("head -c 3", background=True, stdin=True)
    h.send_stdin("abc")
    assert h.wait().stdout == "abc"
    with pytest.raises(ValueError, match="background"):
        sbx.commands.run("cat", stdin=True)
    with pytest.raises(TypeError, match="stdin"):
        sbx.commands.run("cat", stdin=3)
