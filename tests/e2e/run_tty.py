#!/usr/bin/python3
"""End-to-end tests of `airlock run -t` (TAP): a terminal of the sandbox's own.

usage: run_tty.py AIRLOCK PROBE [CASE-SUBSTRING...]

Each case drives airlock through a real pty that this script makes
(os.openpty): airlock's stdin, stdout and stderr are its slave, and airlock is
the session leader and foreground process group of that terminal, as under a
shell. The script holds the master, types into it and reads what airlock
writes, with a deadline on every read. It judges from outside: the outer
terminal's termios before and after (tcgetattr on the slave), host /proc for
the sandbox's processes, the result record and the audit stream.

Nothing here is a bomb but the output case (head -c of a fixed size, cut far
below it by --output-limit). Signals go only to the airlock this script
started, by pid.
"""

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
import tty as ttymod

from harness import (PROBE_IN, Suite, TempDir, ThrowawayUser, all_pids, expect, expect_rc,
                     kill_pid, main, proc_read, run_host, signal_pending, wait_for)

suite = Suite()
case = suite.case

PROMPT = "al-prompt> "
CUT_MARKER = b"[airlock: output cut at the limit]"


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def descendants(pid):
    """Host pids below pid (airlock's sandbox: init and everything in it)."""
    parent = {}
    for p in all_pids():
        stat = proc_read(p, "stat")
        if stat:
            fields = stat.rsplit(b")", 1)[-1].split()
            if len(fields) > 1 and fields[0] != b"Z":
                parent[p] = int(fields[1])
    out, todo = [], [pid]
    while todo:
        cur = todo.pop()
        kids = [p for p, pp in parent.items() if pp == cur]
        out += kids
        todo += kids
    return out


def sleeps_below(pid, arg=b"100"):
    return [p for p in descendants(pid)
            if (proc_read(p, "cmdline") or b"").split(b"\0")[:2] == [b"sleep", arg]]


def in_foreground(pid):
    """Whether pid's process group is its terminal's foreground group (stat's
    pgrp and tpgid, both in the host's pid numbers when read from here)."""
    stat = proc_read(pid, "stat")
    if not stat:
        return False
    fields = stat.rsplit(b")", 1)[-1].split()
    return len(fields) > 5 and fields[2] == fields[5]


class Term:
    """airlock under an outer pty this script holds (see the module doc).
    TERM is dumb unless env says otherwise, so bash writes no escapes."""

    def __init__(self, e, cmd, opts=(), rows=30, cols=100, env=None, tty=True):
        self.master, self.slave = os.openpty()
        set_size(self.slave, rows, cols)
        self.before = termios.tcgetattr(self.slave)
        self.buf = b""
        self.argv = e.argv(cmd, (["-t"] if tty else []) + list(opts))
        slave = self.slave

        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.p = subprocess.Popen(self.argv, stdin=slave, stdout=slave, stderr=slave,
                                  start_new_session=True, preexec_fn=ctty,
                                  env=env if env is not None else dict(os.environ, TERM="dumb"))

    def send(self, data):
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def read_some(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every slave is closed
            return False
        self.buf += chunk
        return bool(chunk)

    def expect(self, pattern, timeout=10, what=None):
        """Read until the regex pattern (bytes) matches what came since the
        last match; returns the match."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0 or (not self.read_some(left) and self.p.poll() is not None):
                m = rx.search(self.buf)
                if m:
                    self.buf = self.buf[m.end():]
                    return m
                raise AssertionError("no %s within %ss; got %r (airlock %s)"
                                     % (what or pattern, timeout, self.buf[-2000:],
                                        "exited %s" % self.p.returncode
                                        if self.p.poll() is not None else "running"))

    def drain(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.read_some(deadline - time.monotonic()):
            pass

    def wait(self, timeout=20):
        """airlock's exit status, reading its output meanwhile."""
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            self.read_some(0.05)
        if self.p.poll() is None:
            kill_pid(self.p.pid)
            self.p.wait()
            raise AssertionError("airlock did not end within %ss; killed it; output %r"
                                 % (timeout, self.buf[-2000:]))
        self.drain(0.2)
        return self.p.returncode

    def termios_now(self):
        return termios.tcgetattr(self.slave)

    def close(self):
        if self.p.poll() is None:
            kill_pid(self.p.pid)
            self.p.wait()
        os.close(self.master)
        os.close(self.slave)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def expect_restored(t):
    after = t.termios_now()
    expect(after == t.before, "the outer terminal was not restored:\nbefore %r\nafter  %r"
           % (t.before, after))


def bash_cmd():
    return ["/bin/bash", "--norc", "--noprofile", "-i"]


@case
def interactive_shell_job_control(e):
    """`bash -i` under -t shows its prompt in the size of the outer terminal;
    `sleep 100 &` and `fg` bring a job to the foreground, ^C typed (raw, as
    a byte) kills only it: the prompt comes back with $? 130, no `sleep 100`
    is left below airlock on the host and airlock itself is still running;
    after `exit 7` airlock exits 7 and the outer terminal's termios are as
    before (raw while it ran)."""
    with Term(e, bash_cmd(), ["--env", "PS1=" + PROMPT, "--timeout", "60"]) as t:
        t.expect(PROMPT, what="the first prompt")
        raw = t.termios_now()
        expect(not raw[3] & termios.ICANON and not raw[3] & termios.ECHO,
               "the outer terminal is not in raw mode while the run holds it: %r" % raw)
        t.send("stty size; tty\r")
        t.expect(r"\r\n30 100\r\n/dev/pts/0\r\n", what="30 100 and /dev/pts/0")
        t.expect(PROMPT)
        t.send("sleep 100 &\r")
        t.expect(r"\[1\] \d+", what="the job's number")
        t.expect(PROMPT)
        t.send("fg\r")
        t.expect(r"sleep 100\r\n", what="fg naming the job")
        pids = wait_for(lambda: sleeps_below(t.p.pid), 5)
        expect(pids, "no sleep 100 below airlock on the host after fg")
        # bash prints the job's name before it hands the terminal to the job:
        # a ^C typed in between goes to bash, and sleep 100 stays in front.
        expect(wait_for(lambda: all(in_foreground(p) for p in pids), 5),
               "sleep 100 (%s) never became the terminal's foreground group after fg" % pids)
        t.send(b"\x03")
        t.expect(PROMPT, what="the prompt after ^C")
        t.send("echo st=$?; jobs; echo jobs-end\r")
        t.expect(r"st=130\r\n(?:\S*\r\n)?jobs-end", what="st=130 and no job left")
        expect(wait_for(lambda: not sleeps_below(t.p.pid), 5),
               "sleep 100 still runs after ^C: %s" % sleeps_below(t.p.pid))
        expect(t.p.poll() is None, "airlock ended with the ^C")
        t.send("exit 7\r")
        rc = t.wait()
        expect(rc == 7, "airlock exited %s, not 7; output %r" % (rc, t.buf[-500:]))
        expect_restored(t)


@case
def python_repl_and_top(e):
    """The python REPL at the pty: its prompt, `print(6*7)` gives 42, ^D
    ends it (exit 0). `top` (given airlock's TERM) draws its screen with
    its task count and quits on `q` (exit 0); the terminal is restored
    after each."""
    with Term(e, ["python3", "-q"], ["--timeout", "30"]) as t:
        t.expect(r">>> ", what="the REPL's prompt")
        t.send("print(6*7)\r")
        t.expect(r"\r\n42\r\n>>> ", what="42 and the next prompt")
        t.send(b"\x04")
        rc = t.wait()
        expect(rc == 0, "python exited %s after ^D" % rc)
        expect_restored(t)
    env = dict(os.environ, TERM="xterm")
    with Term(e, ["top", "-d", "1"], ["--timeout", "30"], env=env) as t:
        t.expect(r"Tasks:", what="top's screen")
        t.send("q")
        rc = t.wait()
        expect(rc == 0, "top exited %s after q" % rc)
        expect_restored(t)


@case
def window_size_follows_sigwinch(e):
    """The pty starts with the outer terminal's size; after the outer
    terminal is resized (TIOCSWINSZ on the master we hold, so the kernel
    sends SIGWINCH to airlock, its foreground process), `stty size` inside
    prints the new size and bash got SIGWINCH (its trap says so)."""
    with Term(e, bash_cmd(), ["--env", "PS1=" + PROMPT, "--timeout", "60"], rows=25,
              cols=90) as t:
        t.expect(PROMPT)
        t.send("trap 'echo got-winch' WINCH; stty size\r")
        t.expect(r"25 90\r\n", what="25 90")
        t.expect(PROMPT)
        set_size(t.master, 41, 123)
        t.expect(r"got-winch", what="bash's WINCH trap")
        t.send("stty size\r")
        t.expect(r"\r\n41 123\r\n", what="41 123 after the resize")
        t.send("exit\r")
        expect(t.wait() == 0, "bash did not exit 0")
        expect_restored(t)


@case
def timeout_kill_restores_terminal(e):
    """--timeout 2 with `sleep 100` under -t: airlock exits 124 about two
    seconds in, says so, and the outer terminal's termios are exactly as
    before (they were raw during the run)."""
    with Term(e, ["sleep", "100"], ["--timeout", "2"]) as t:
        raw = wait_for(lambda: not t.termios_now()[3] & termios.ICANON, 5)
        expect(raw, "the outer terminal never went raw")
        t0 = time.monotonic()
        rc = t.wait(20)
        expect(rc == 124, "airlock exited %s, not 124; output %r" % (rc, t.buf))
        expect(time.monotonic() - t0 < 10, "the timeout took too long")
        expect(b"timeout" in t.buf or b"time limit" in t.buf or b"timed out" in t.buf,
               "airlock did not say it timed out: %r" % t.buf)
        expect_restored(t)


@case
def signal_to_airlock_restores_terminal(e):
    """SIGTERM to airlock twice (passed on once, ignored by the command,
    then the sandbox is stopped: 143) and SIGHUP (passed on, the command
    dies of it: 129) each end the run, and each leaves the outer terminal's
    termios as before."""
    for trap, sigs in (("trap '' TERM; ", [signal.SIGTERM, signal.SIGTERM]),
                       ("", [signal.SIGHUP])):
        with Term(e, ["/bin/sh", "-c", trap + "echo ready; sleep 100"],
                  ["--timeout", "30"]) as t:
            t.expect(r"ready", what="the command's start")
            for s in sigs:
                os.kill(t.p.pid, s)
                # Taken before the next is sent (two pending are one).
                wait_for(lambda: not signal_pending(t.p.pid, s), 10)
            rc = t.wait(20)
            expect(rc == 128 + sigs[-1], "after %s airlock exited %s; output %r"
                   % ([signal.Signals(s).name for s in sigs], rc, t.buf))
            expect_restored(t)


@case
def failed_start_restores_terminal(e):
    """A command that does not exist (127) and one that is not executable
    (126): airlock went raw before the sandbox found out, and each leaves
    the outer terminal's termios as before."""
    for cmd, want in ((["/nonexistent/cmd"], 127), (["/etc/hostname"], 126)):
        with Term(e, cmd, ["--timeout", "20"]) as t:
            rc = t.wait()
            expect(rc == want, "%s: exit %s, not %s; output %r" % (cmd, rc, want, t.buf))
            expect_restored(t)


@case
def output_cap_applies_to_pty(e):
    """Under -t, what the command writes (stdout and stderr both go to the
    pty) counts as stdout against --output-limit: 5 MB of output is cut at
    64K, airlock exits 137, the record says reason output, truncated, tty,
    stdout_bytes 65536, the audit's run.start and run.end say tty, and the
    outer terminal is restored."""
    with TempDir() as d:
        rp, ap = os.path.join(d, "r.json"), os.path.join(d, "a.jsonl")
        with Term(e, ["/bin/sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x >&2"],
                  ["--output-limit", "64K", "--result", rp, "--audit", ap]) as t:
            rc = t.wait(30)
            expect(rc == 137, "airlock exited %s, not 137" % rc)
            expect(CUT_MARKER in t.buf, "no cut marker in the output")
            got = t.buf.split(CUT_MARKER)[0].count(b"x")
            expect(got == 65536, "%d bytes came out, not the cap's 65536" % got)
            expect_restored(t)
        with open(rp) as f:
            rec = json.load(f)
        out = rec["output"]
        expect(rec["reason"] == "output", "reason %r" % rec["reason"])
        expect(out["truncated"] is True and out["tty"] is True, "output %r" % out)
        expect(out["stdout_bytes"] == 65536 and out["stderr_bytes"] == 0, "output %r" % out)
        with open(ap) as f:
            evs = [json.loads(l) for l in f if l.strip()]
        start = [v for v in evs if v["event"] == "run.start"]
        end = [v for v in evs if v["event"] == "run.end"]
        expect(start and start[0].get("tty") is True, "run.start without tty: %r" % start)
        expect(end and end[0]["output"]["tty"] is True, "run.end without output.tty: %r" % end)


@case
def pipe_drives_repl(e):
    """-t with stdin a pipe (an agent driving a REPL): `print(6*7)` fed to
    `python3 -i -q` prints 42, the REPL ends on the end of the pipe (the
    pty's ^D), airlock exits 0 and writes nothing to stderr; a `cat`
    behind the pty sees the same end."""
    res = run_host(e.argv(["python3", "-i", "-q"], ["-t", "--timeout", "20"]),
                   input=b"print(6*7)\n", timeout=30)
    expect_rc(res, 0)
    expect(re.search(rb"^42\r$", res.out, re.M), "no 42 line", res)
    expect(res.err == b"", "airlock said something with -t and a pipe", res)
    res = run_host(e.argv(["/bin/sh", "-c", "cat; echo cat-done"], ["-t", "--timeout", "20"]),
                   input=b"one\ntwo\n", timeout=30)
    expect_rc(res, 0)
    expect(res.out.count(b"two\r\n") == 2 and b"cat-done" in res.out,
           "cat did not echo both lines and end", res)


@case
def clipboard_sequences_stay_out(e):
    """What the sandbox writes reaches airlock's terminal, colours and the
    title included, but not an OSC 52 clipboard write (plain or wrapped in
    tmux's passthrough): the host's clipboard cannot be set from inside,
    with -t or without (stdout and stderr a terminal). Through a pipe the
    bytes pass as they are."""
    script = ("printf 'A\\033[1mB\\033]0;T\\007C\\033]52;c;Y3VybCB4fHNo\\007D"
              "\\033Ptmux;\\033\\033]52;c;eA==\\007\\033\\\\E\\n'")
    with Term(e, ["/bin/sh", "-c", script], ["--timeout", "20"]) as t:
        rc = t.wait()
        expect(rc == 0, "exit %s" % rc)
        expect(b"A\x1b[1mB\x1b]0;T\x07CDE" in t.buf,
               "the output is not the text without the clipboard: %r" % t.buf[-400:])
        expect(b"]52;" not in t.buf and b"tmux;" not in t.buf,
               "a clipboard sequence reached the terminal: %r" % t.buf[-400:])
    res = run_host(e.argv(["/bin/sh", "-c", script], ["-t"]), timeout=30)
    expect_rc(res, 0)
    expect(b"\x1b]52;c;Y3VybCB4fHNo\x07" in res.out, "bytes to a pipe were changed", res)
    # Without -t, to airlock's stdout and stderr that are a terminal: the
    # same (the sandbox writes pipes; airlock's side is what counts).
    master, slave = os.openpty()
    try:
        p = subprocess.run(e.argv(["/bin/sh", "-c", script + "; " + script + " >&2"]),
                           stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, timeout=30)
        expect(p.returncode == 0, "exit %s without -t" % p.returncode)
        got = b""
        while select.select([master], [], [], 0.2)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            got += chunk
        expect(got.count(b"CDE") == 2 and b"]52;" not in got and b"tmux;" not in got,
               "without -t the clipboard reached the terminal: %r" % got[-400:])
    finally:
        os.close(master)
        os.close(slave)


# Queries a program may write to its terminal, each with what a host
# terminal would answer (made up, but in each answer's form; the title and
# the clipboard are what the sandbox must never learn). The first two are
# written split across two writes.
HOST_ANSWERS = [
    (b"\x1b[6n", b"\x1b[42;17R"),
    (b"\x1b]11;?", b"\x1b]11;rgb:1234/5678/9abc\x1b\\"),
    (b"\x1b[5n", b"\x1b[0n"),
    (b"\x1b[c", b"\x1b[?64;1;9;15c"),
    (b"\x1b[>c", b"\x1b[>41;390;0c"),
    (b"\x1b[=c", b"\x1bP!|00000000\x1b\\"),
    (b"\x1b[?6n", b"\x1b[?42;17;1R"),
    (b"\x1b[21t", b"\x1b]lHOST-SECRET-TITLE\x1b\\"),
    (b"\x1b[18t", b"\x1b[8;30;100t"),
    (b"\x1b[14t", b"\x1b[4;600;800t"),
    (b"\x1b]10;?", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),
    (b"\x1b]4;1;?", b"\x1b]4;1;rgb:cdcd/0000/0000\x1b\\"),
    (b"\x1b]52;c;?", b"\x1b]52;c;SE9TVC1DTElQQk9BUkQ=\x07"),
    (b"\x1b[?2026$p", b"\x1b[?2026;2$y"),
    (b"\x1bP$qm", b"\x1bP1$r0m\x1b\\"),
    (b"\x1b[>q", b"\x1bP>|HostTerm 1.0\x1b\\"),
    (b"\x1bP+q544e", b"\x1bP1+r544e=78\x1b\\"),
    (b"\x1b[x", b"\x1b[2;1;1;112;112;1;0x"),
    (b"\x05", b"HOST-ANSWERBACK"),
    (b"\x1b[?u", b"\x1b[?0u"),
]
# airlock's own replies under -t, in the order asked: CPR, DSR, DA1, DA2.
AIRLOCK_REPLIES = b"\x1b[1;1R\x1b[0n\x1b[?62;22c\x1b[>1;10;0c"
# The program inside: its terminal raw (as a REPL's), the queries written
# (each string terminator spelled ST, ESC \\), then READY; it reads its
# stdin until END_MARK (typed by this script once it saw READY) or, with
# "want N", until N bytes came, and prints them as GOT=hex.
QUERY_PROG = r"""
import os, select, sys, time, tty
if os.isatty(0):
    tty.setraw(0)
qs = %r
os.write(1, b"\x1b[")
time.sleep(0.1)
os.write(1, b"6n\x1b]11")
time.sleep(0.1)
os.write(1, b";?\x1b\\")
for q in qs[2:]:
    os.write(1, q + (b"\x1b\\" if q[:2] in (b"\x1b]", b"\x1bP") else b""))
os.write(1, b"READY\n")
want = int(sys.argv[1]) if len(sys.argv) > 1 else None
got, end = b"", time.monotonic() + 20
while b"ZZEND" not in got and (want is None or len(got) < want):
    left = end - time.monotonic()
    if left <= 0 or not select.select([0], [], [], left)[0]:
        break
    d = os.read(0, 4096)
    if not d:
        break
    got += d
os.write(1, b"GOT=" + got.split(b"ZZEND")[0].hex().encode() + b"\n")
""" % ([q for q, _ in HOST_ANSWERS],)


def play_terminal(t):
    """Read what airlock writes to the outer terminal as a terminal would,
    answering every query in it (into airlock's stdin, as an emulator does)
    until READY, then type ZZEND; returns (the queries seen, what the
    program got)."""
    seen, done, end_typed = [], {}, False
    deadline = time.monotonic() + 30
    while True:
        for q, answer in HOST_ANSWERS:
            while t.buf.count(q) > done.get(q, 0):
                done[q] = done.get(q, 0) + 1
                seen.append(q)
                t.send(answer)
        if not end_typed and b"READY" in t.buf:
            t.send(b"ZZEND")
            end_typed = True
        m = re.search(rb"GOT=([0-9a-f]*)\n", t.buf)
        if m:
            return seen, bytes.fromhex(m.group(1).decode())
        left = deadline - time.monotonic()
        if left <= 0 or (not t.read_some(min(left, 1)) and t.p.poll() is not None):
            raise AssertionError("no GOT= line; got %r" % t.buf[-2000:])


@case
def terminal_queries_stay_out(e):
    """A program writes the queries a terminal answers (cursor position
    and status, device attributes, window size and title reports, colour
    and clipboard queries, DECRQM, DECRQSS, XTVERSION, XTGETTCAP,
    DECREQTPARM, ENQ, the kitty keyboard query; two split across writes)
    and reads its stdin. This script plays the host's terminal and answers
    every query it sees: it must see none, with -t or without (airlock's
    stdout a terminal). Under -t the program gets exactly airlock's fixed
    replies to CPR, DSR, DA1 and DA2, in order; without -t nothing at all.
    Under -t with stdout a pipe the replies come the same, and the bytes
    pass to the pipe as they are."""
    argv = ["python3", "-c", QUERY_PROG]
    for tty, want in ((True, AIRLOCK_REPLIES), (False, b"")):
        with Term(e, argv, ["--timeout", "40"], tty=tty) as t:
            if not tty:
                ttymod.setraw(t.slave)  # the host answers reach airlock's stdin at once
            seen, got = play_terminal(t)
            rc = t.wait()
            expect(rc == 0, "-t %s: exit %s" % (tty, rc))
            expect(not seen, "-t %s: queries reached the terminal: %r" % (tty, seen))
            expect(got == want, "-t %s: the program got %r, expected %r" % (tty, got, want))
    p = subprocess.Popen(e.argv(argv + [str(len(AIRLOCK_REPLIES))], ["-t", "--timeout", "40"]),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    out, deadline = b"", time.monotonic() + 40
    try:
        # stdin stays open (its end would type a ^D) until the GOT= line
        while not re.search(rb"GOT=[0-9a-f]*\n", out) and time.monotonic() < deadline:
            if select.select([p.stdout], [], [], 1)[0]:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
        p.stdin.close()
        out += p.stdout.read()
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()
        p.stdout.close()
    m = re.search(rb"GOT=([0-9a-f]*)\n", out)
    expect(p.returncode == 0 and m, "-t to a pipe: exit %s, output %r" % (p.returncode, out))
    got = bytes.fromhex(m.group(1).decode())
    expect(got == AIRLOCK_REPLIES, "-t to a pipe: the program got %r" % got)
    expect(b"\x1b[21t\x1b[18t" in out, "-t to a pipe: the bytes were changed: %r" % out)


# The DEC private modes after which a terminal reports later, of its own
# accord (mouse, focus, colour theme, resize, kitty's paste events).
REPORTING_MODES = [9, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2031, 2048, 5522]
# The program inside: it turns each of them on (one set split across two
# writes, some in a list with the cursor's mode 25), the locator, and
# kitty's keyboard protocol twice on the main screen and three times on
# the alternate one, which it leaves on; then DONE. With "read" it reads
# its stdin as QUERY_PROG does, until ZZEND, and prints it as GOT=hex.
MODES_PROG = r"""
import os, select, sys, time, tty
if os.isatty(0):
    tty.setraw(0)
modes = %r
os.write(1, b"A\x1b[?10")
time.sleep(0.1)
os.write(1, b"04hB\x1b[?25;1000;1006h")
for m in modes:
    os.write(1, b"\x1b[?%%dh" %% m)
os.write(1, b"\x1b[1;1'z\x1b[>1u\x1b[>1u\x1b[?1049h\x1b[>3u\x1b[>3u\x1b[>3u")
os.write(1, b"DONE\n")
if sys.argv[1:] == ["read"]:
    got, end = b"", time.monotonic() + 20
    while b"ZZEND" not in got:
        left = end - time.monotonic()
        if left <= 0 or not select.select([0], [], [], left)[0]:
            break
        d = os.read(0, 4096)
        if not d:
            break
        got += d
    os.write(1, b"GOT=" + got.split(b"ZZEND")[0].hex().encode() + b"\n")
""" % (REPORTING_MODES,)


def modes_turned_on(data):
    """The reporting modes data turns on (CSI ? Pm h, read as a terminal
    reads it: leading zeros and all), and "locator" for DECELR on."""
    on = set()
    for m in re.finditer(rb"\x1b\[\?([0-9;]*)h", data):
        on |= {int(p) for p in m.group(1).split(b";") if p} & set(REPORTING_MODES)
    for m in re.finditer(rb"\x1b\[([0-9;]*)'z", data):
        if int((m.group(1).split(b";")[0] or b"0")) != 0:
            on.add("locator")
    return on


def kitty_pops(data):
    """How many entries of kitty's keyboard stack data pops (CSI < n u)."""
    return sum(int(m.group(1) or b"1") for m in re.finditer(rb"\x1b\[<([0-9]*)u", data))


@case
def reporting_modes_stay_out(e):
    """A program turns on what makes a terminal report later into its
    input: focus events (1004, split across two writes), mouse tracking and
    its encodings (9, 1000-1003, 1005, 1006, 1015, 1016), colour-theme and
    resize notifications (2031, 2048), kitty's paste events (5522), the
    locator (DECELR). Without -t (airlock's stdout a terminal) none of
    those reaches the terminal, which this script plays: it would answer a
    focus set with a focus-in report, and the program reads nothing; the
    cursor's mode in the same list (25) still does. Under -t with stdin a
    pipe they are left out too (only the host's shell would read the
    reports). Under -t with stdin the terminal they pass, and the bytes
    airlock writes after the program's end turn every one off (each
    CSI ? m l, the locator's CSI ' z) and pop kitty's keyboard stack at
    least as deep as the program pushed it, on the alternate screen (3)
    before leaving it and on the main one (2) after."""
    argv = ["python3", "-c", MODES_PROG]
    with Term(e, argv + ["read"], ["--timeout", "40"], tty=False) as t:
        ttymod.setraw(t.slave)  # a report would reach airlock's stdin at once
        answered = end_typed = False
        deadline = time.monotonic() + 30
        while not re.search(rb"GOT=([0-9a-f]*)\n", t.buf):
            if not answered and modes_turned_on(t.buf):
                t.send(b"\x1b[I")  # the focus-in report a terminal sends
                answered = True
            if b"DONE" in t.buf and not end_typed:
                t.send(b"ZZEND")
                end_typed = True
            left = deadline - time.monotonic()
            if left <= 0 or (not t.read_some(min(left, 1)) and t.p.poll() is not None):
                raise AssertionError("no GOT= line; got %r" % t.buf[-2000:])
        got = bytes.fromhex(re.search(rb"GOT=([0-9a-f]*)\n", t.buf).group(1).decode())
        rc = t.wait()
        out = t.buf
        expect(rc == 0, "without -t: exit %s" % rc)
        expect(not modes_turned_on(out), "without -t the terminal saw %r turned on: %r"
               % (modes_turned_on(out), out[-600:]))
        expect(b"AB\x1b[?25h" in out and b"DONE" in out,
               "without -t the rest of the output changed: %r" % out[-600:])
        expect(got == b"", "without -t the program read %r" % got)
    master, slave = os.openpty()
    try:
        p = subprocess.run(e.argv(argv, ["-t", "--timeout", "30"]), stdin=subprocess.DEVNULL,
                           stdout=slave, stderr=slave, timeout=40)
        out = b""
        while select.select([master], [], [], 0.2)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            out += chunk
        expect(p.returncode == 0 and b"DONE" in out, "-t, stdin a pipe: exit %s, output %r"
               % (p.returncode, out[-600:]))
        expect(not modes_turned_on(out), "-t with stdin a pipe: the terminal saw %r turned on"
               % modes_turned_on(out))
    finally:
        os.close(master)
        os.close(slave)
    with Term(e, argv, ["--timeout", "30"]) as t:
        rc = t.wait()
        expect(rc == 0, "-t: exit %s; output %r" % (rc, t.buf[-600:]))
        before, done, end = t.buf.partition(b"DONE")
        expect(done, "-t: no DONE: %r" % t.buf[-600:])
        want = set(REPORTING_MODES) | {"locator"}
        expect(modes_turned_on(before) == want, "-t: the terminal saw only %r turned on"
               % modes_turned_on(before))
        off = [m for m in REPORTING_MODES if b"\x1b[?%dl" % m not in end]
        expect(not off and b"\x1b['z" in end, "-t: the end leaves %r%s on: %r"
               % (off, "" if b"\x1b['z" in end else " and the locator", end))
        alt, leave, main_ = end.partition(b"\x1b[?1049l")
        expect(leave and kitty_pops(alt) >= 3 and kitty_pops(main_) >= 2,
               "-t: kitty's keyboard stack popped %d deep on the alternate screen and %d on "
               "the main one: %r" % (kitty_pops(alt), kitty_pops(main_), end))
        expect_restored(t)


def read_all(fd, quiet=0.3):
    """What is readable on fd until it has been quiet for `quiet` s."""
    got = b""
    while select.select([fd], [], [], quiet)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every slave is closed
            break
        if not chunk:
            break
        got += chunk
    return got


# What airlock writes at the end of a -t run to the terminal it set raw
# (term.c): any of these in a captured output is airlock's, not the
# program's (which writes none of them).
AIRLOCK_RESETS = [b"\x1b[?1049l", b"\x1b[<99u", b"\x1b[?1000l", b"\x1b[12h", b"\x1b[>4m"]
SCREEN_PROG = "printf 'A\\033[?1049hB\\033[?1000hC\\n'"


@case
def resets_only_to_the_terminal_set_raw(e):
    """-t with stdin a terminal (set raw while the run holds it, restored
    after) and stdout something else: a pipe, or another terminal (a
    transcript being captured, as `script` or an agent's pty would). The
    program switches to the alternate screen and turns on the mouse; its
    bytes reach stdout (to the other terminal without the mouse mode,
    which would make that terminal report into an input nobody reads),
    and airlock adds none of its end-of-run resets there: they are only
    for the terminal whose mode it changed. That terminal gets nothing
    either (the program did not write to it) and its termios are as
    before."""
    def ctty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    for to_tty in (False, True):
        master, slave = os.openpty()
        omaster = oslave = p = None
        before = termios.tcgetattr(slave)
        try:
            if to_tty:
                omaster, oslave = os.openpty()
                out = oslave
            else:
                out = subprocess.PIPE
            p = subprocess.Popen(e.argv(["/bin/sh", "-c", SCREEN_PROG + "; sleep 0.5"],
                                        ["-t", "--timeout", "30"]),
                                 stdin=slave, stdout=out, stderr=subprocess.DEVNULL,
                                 start_new_session=True, preexec_fn=ctty)
            raw = wait_for(lambda: not termios.tcgetattr(slave)[3] & termios.ICANON, 10)
            if to_tty:
                rc = p.wait(timeout=30)
                got = read_all(omaster)
            else:
                got = p.communicate(timeout=30)[0]
                rc = p.returncode
            where = "another terminal" if to_tty else "a pipe"
            expect(rc == 0, "stdout %s: exit %s, output %r" % (where, rc, got))
            expect(raw, "stdout %s: the terminal on stdin never went raw" % where)
            expect(re.search(rb"A\x1b\[\?1049hB(\x1b\[\?1000h)?C", got),
                   "stdout %s: the program's output is not there: %r" % (where, got))
            added = [r for r in AIRLOCK_RESETS if r in got]
            expect(not added, "stdout %s: airlock added its resets %r: %r"
                   % (where, added, got))
            if to_tty:
                expect(b"\x1b[?1000h" not in got,
                       "stdout another terminal: the mouse mode reached it: %r" % got)
            expect(termios.tcgetattr(slave) == before,
                   "stdout %s: the terminal set raw was not restored" % where)
            stray = read_all(master, 0.1)
            expect(not stray, "stdout %s: the terminal on stdin got %r" % (where, stray))
        finally:
            if p is not None and p.poll() is None:
                kill_pid(p.pid)
                p.wait()
            for fd in (master, slave, omaster, oslave):
                if fd is not None:
                    os.close(fd)


@case
def eof_arrives_whatever_the_timing(e):
    """The end of a piped stdin reaches the REPL however its timing falls:
    before the REPL has started (stdin /dev/null), and while a statement
    runs (the ^D typed then arrives as a NUL when readline goes raw, so it
    is typed again). Each ends well before its timeout."""
    res = run_host(e.argv(["python3", "-i", "-q"], ["-t", "--timeout", "15"]),
                   input=b"", timeout=30)
    expect_rc(res, 0)
    expect(res.elapsed < 10, "the REPL on an empty stdin ended after %.1f s" % res.elapsed, res)
    res = run_host(e.argv(["python3", "-i", "-q"], ["-t", "--timeout", "15"]),
                   input=b"import time; time.sleep(1)\nprint(6*7)\n", timeout=30)
    expect_rc(res, 0)
    expect(re.search(rb"^42\r$", res.out, re.M), "no 42 line", res)
    expect(res.elapsed < 10, "the REPL after a slow statement ended after %.1f s"
           % res.elapsed, res)


# A REPL whose line editor reads ahead (Python 3.13's): raw at its prompt
# for a while, it reads every line typed so far, runs them in line mode
# (a one-second statement), then goes raw for the next prompt and reads a
# key. A ^D is end of input there; a NUL is what a ^D typed while it ran
# becomes, which such an editor shows as ^@ and keeps in its line.
READAHEAD_PROG = r"""
import os, select, termios, time
fd = 0
canon = termios.tcgetattr(fd)
raw = termios.tcgetattr(fd)
raw[3] &= ~(termios.ICANON | termios.ECHO)
raw[6][termios.VMIN], raw[6][termios.VTIME] = 1, 0
termios.tcsetattr(fd, termios.TCSADRAIN, raw)
os.write(1, b"p1> ")
time.sleep(0.5)
lines = os.read(fd, 4096)
termios.tcsetattr(fd, termios.TCSADRAIN, canon)
os.write(1, b"ran %d bytes\n" % len(lines))
time.sleep(1)
termios.tcsetattr(fd, termios.TCSADRAIN, raw)
os.write(1, b"p2> ")
key = os.read(fd, 1) if select.select([fd], [], [], 10)[0] else b""
termios.tcsetattr(fd, termios.TCSADRAIN, canon)
os.write(1, b"KEY=" + key.hex().encode() + b"\n")
"""


@case
def eof_never_arrives_as_a_nul(e):
    """-t with stdin a pipe driving a REPL whose editor reads ahead and runs
    what it read in line mode: the end of the pipe reaches it as the ^D key
    at its next prompt, not as a NUL (the ^D typed in line mode while it
    ran), and the output has no ^@ and no NUL. A plain reader in line mode
    (`cat`) still sees the end, with nothing echoed for it."""
    res = run_host(e.argv(["python3", "-c", READAHEAD_PROG], ["-t", "--timeout", "30"]),
                   input=b"x = 1\nprint(x)\n", timeout=40)
    expect_rc(res, 0)
    expect(b"ran 15 bytes" in res.out, "the program did not read ahead", res)
    expect(b"KEY=04\r\n" in res.out, "the end did not arrive as ^D at the prompt", res)
    expect(b"\0" not in res.out and b"^@" not in res.out, "a NUL or ^@ in the output", res)
    res = run_host(e.argv(["/bin/sh", "-c", "cat; echo cat-done"],
                          ["-t", "--timeout", "30"]), input=b"one\n", timeout=40)
    expect_rc(res, 0)
    expect(b"one\r\none\r\ncat-done" in res.out, "cat did not end", res)
    expect(b"\0" not in res.out and b"^D" not in res.out, "an EOF artefact in the output", res)


@case
def reader_gone_hangs_up_the_pty(e):
    """`airlock run -t ... | head -1`: when nobody reads airlock's output,
    the pty is hung up, as a terminal going away would, and the command
    ends at once with SIGHUP (exit 129), not at the timeout."""
    argv = e.argv(["/bin/sh", "-c", "yes"], ["-t", "--timeout", "20"])
    t = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        p.stdout.read(2)
        p.stdout.close()
        rc = p.wait(timeout=15)
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()
    expect(rc == 129, "airlock -t with its reader gone exited %r, expected 129" % rc)
    expect(time.monotonic() - t < 10, "it took %.1f s" % (time.monotonic() - t))


@case
def pty_is_the_sandboxs_own(e):
    """The command's stdin, stdout and stderr are one pty, its controlling
    terminal (/dev/tty opens), from a devpts mounted inside the sandbox (a new instance:
    not the host's /dev/pts, whose device differs); /dev/ptmx points into
    it and only the sandbox's pty is there."""
    host_dev = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/dev/pts":
                host_dev = fields[2]
    # TIOCGDEV on /dev/tty: the device of the controlling terminal itself,
    # which must be the pty on fd 0, not anything of the host's.
    ctty = ("python3 -c \"import os, fcntl, struct; fd = os.open('/dev/tty', os.O_RDWR); "
            "d = struct.unpack('I', fcntl.ioctl(fd, 0x80045432, bytes(4)))[0]; "
            "print('ctty-is-stdin', d == os.fstat(0).st_rdev)\"")
    script = ("for f in 0 1 2; do readlink /proc/self/fd/$f; done; "
              "grep ' /dev/pts ' /proc/self/mountinfo; ls /dev/pts; readlink /dev/ptmx; "
              "%s sid; %s" % (PROBE_IN, ctty))
    res = run_host(e.argv(["/bin/sh", "-c", script], ["-t"]), timeout=30)
    expect_rc(res, 0)
    lines = res.text.replace("\r", "").splitlines()
    expect(lines[:3] == ["/dev/pts/0"] * 3, "stdio is not /dev/pts/0", res)
    mnt = lines[3].split()
    expect(mnt[4] == "/dev/pts" and " - devpts " in lines[3], "no devpts at /dev/pts", res)
    expect(host_dev is None or mnt[2] != host_dev, "the host's devpts instance is inside", res)
    expect("nosuid" in mnt[5] and "noexec" in mnt[5], "devpts flags %s" % mnt[5], res)
    expect(sorted(lines[4].split()) == ["0", "ptmx"], "/dev/pts holds %r" % lines[4], res)
    expect(lines[5] == "pts/ptmx", "/dev/ptmx -> %r" % lines[5], res)
    expect("tty ok" in res.text, "/dev/tty does not open: no controlling terminal", res)
    expect("ctty-is-stdin True" in res.text, "the controlling terminal is not the pty", res)


@case
def pty_inside_the_sandbox(e):
    """A program under -t can make a pty of its own from the sandbox's
    /dev/pts (util-linux script): its child runs on /dev/pts/1 with that as
    its controlling terminal (ps shows the tty), and no system call was
    denied on the way (the audit has no syscall.denied)."""
    with TempDir() as d:
        ap = os.path.join(d, "a.jsonl")
        res = run_host(e.argv(["script", "-qc", "tty; ps -o tty= -p $$", "/dev/null"],
                              ["-t", "--audit", ap]), timeout=30)
        expect_rc(res, 0)
        lines = res.text.replace("\r", "").split()
        expect(lines[:2] == ["/dev/pts/1", "pts/1"], "script's child: %r" % lines, res)
        with open(ap) as f:
            denied = [l for l in f if '"syscall.denied"' in l]
        expect(not denied, "denied calls: %s" % denied, res)


@case
def rootless_tty(e):
    """Run by an ordinary user (rootless), -t works the same: stdio is the
    sandbox's /dev/pts/0, owned like its ptmx by the sandbox user (uid
    1000 inside, the caller outside), and the python REPL driven through a
    pipe prints 42 and ends."""
    with ThrowawayUser() as u:
        res = run_host(["runuser", "-u", u.name, "--"]
                       + e.argv(["/bin/sh", "-c", "tty; stat -c '%u %a' /dev/pts/0; "
                                 "python3 -i -q"], ["-t", "-q"], bind_probe=False),
                       input=b"print(6*7)\n", timeout=30, cwd="/tmp")
        expect_rc(res, 0)
        lines = res.text.replace("\r", "").splitlines()
        at = lines.index("/dev/pts/0") if "/dev/pts/0" in lines else -1
        expect(at >= 0 and lines[at + 1] == "1000 600", "tty and its owner: %r" % lines, res)
        expect("42" in lines, "no 42 from the REPL", res)


@case
def check_shows_tty(e):
    """`airlock check -t` says the run has a terminal of its own, and
    --json has "tty": true and the devpts mount; without -t, "tty": false
    and no devpts."""
    res = run_host([e.airlock, "check", "-t"], timeout=30)
    expect_rc(res, 0)
    expect("terminal:   a pty of the sandbox's own" in res.text, "no terminal line", res)
    expect(re.search(r"devpts\s+/dev/pts\s", res.text), "no devpts in the dump", res)
    for flags, want in ((["-t"], True), ([], False)):
        res = run_host([e.airlock, "check", "--json"] + flags, timeout=30)
        expect_rc(res, 0)
        doc = json.loads(res.out)
        expect(doc.get("tty") is want, "tty is %r" % doc.get("tty"), res)
        ops = [op for op in doc["filesystem"] if op["op"] == "devpts"]
        expect(bool(ops) == want, "devpts ops: %r" % ops, res)


@case
def policy_key_tty(e):
    """"tty": true in a policy file gives the command a terminal; "tty": "yes"
    is refused with the key's path, exit 125."""
    with TempDir() as d:
        good = os.path.join(d, "p.json")
        with open(good, "w") as f:
            json.dump({"version": 1, "tty": True}, f)
        res = run_host([e.airlock, "run", "--policy", good, "--", "/bin/sh", "-c",
                        "test -t 0 && test -t 1 && test -t 2 && echo all-tty"], timeout=30)
        expect_rc(res, 0)
        expect(b"all-tty" in res.out, "stdio is not a terminal", res)
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            json.dump({"version": 1, "tty": "yes"}, f)
        res = run_host([e.airlock, "run", "--policy", bad, "--", "true"], timeout=30)
        expect_rc(res, 125)
        expect("tty" in res.errtext, "the error does not name tty", res)


@case
def without_tty_no_terminal(e):
    """Without -t, even with a terminal as airlock's stdin and controlling
    terminal, the command's stdio are pipes, it has no controlling
    terminal, and no /dev/pts, /dev/ptmx or /dev/tty exist inside."""
    master, slave = os.openpty()

    def ctty():  # airlock's own controlling terminal: the one that must not leak in
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        p = subprocess.run(e.argv(["/bin/sh", "-c", "test -t 0 || test -t 1 || echo no-tty; "
                                   "ls /dev/pts /dev/ptmx /dev/tty 2>&1; %s sid" % PROBE_IN]),
                           stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True, preexec_fn=ctty, timeout=30)
        out = p.stdout.decode()
        expect(p.returncode == 0, "exit %s: %r %r" % (p.returncode, out, p.stderr))
        expect("no-tty" in out, "stdio is a terminal without -t: %r" % out)
        expect(out.count("No such file") == 3, "/dev/pts, /dev/ptmx or /dev/tty exist: %r" % out)
        expect("tty ok" not in out, "the command has a controlling terminal: %r" % out)
    finally:
        os.close(master)
        os.close(slave)


if __name__ == "__main__":
    main(suite)
