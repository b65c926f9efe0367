#!/usr/bin/python3
"""The sandbox side of run_tenants.py: runs INSIDE the sandbox.

usage: tenant_tool.py OP [N]

Each op prints one JSON object on one line of stdout. An attack ("*-attack")
takes one kernel counter the kernel keeps per host user or per creator of
a user namespace until the kernel refuses it, prints how far it got and
the errno that stopped it, then holds everything until its stdin ends (the
test closes it) or HOLD seconds pass, and prints a second line saying
which ({"held": seconds, "released": true when stdin ended}). A victim
("*-victim") tries N times to get one of the same thing and prints how
many attempts succeeded and the errnos of the others. Every loop is
bounded by N (the attack's cap), so nothing here runs away even
unconfined. Python 3 standard library only.

ops:
  pipes-attack CAP      pipes (read end closed) resized to 1 MiB with
                        F_SETPIPE_SZ until EPERM (fs.pipe-user-pages-soft)
  pipes-victim N        N pipes resized to 1 MiB
  fds-attack CAP        SCM_RIGHTS messages of 16 descriptors sent on a unix
                        socketpair and never received, until ETOOMANYREFS
                        (at most CAP sends)
  fds-victim N          one descriptor passed to itself over a socketpair
  inotify-attack CAP    inotify_init1 until EMFILE
  inotify-victim N      inotify_init1
  watches-attack CAP    files made in /tmp/w, one inotify watch each, until
                        ENOSPC
  watches-victim N      N files in /tmp/v, one watch each
  limits                every /proc/sys/user/max_* as {name: value}
"""

import ctypes
import errno
import fcntl
import json
import os
import resource
import select
import socket
import sys
import time

HOLD = 10.0  # the longest an attack holds what it got
MiB = 1 << 20
IN_MODIFY = 0x2
PER_MESSAGE = 16  # descriptors in one SCM_RIGHTS message

libc = ctypes.CDLL("libc.so.6", use_errno=True)


def ename(n):
    return errno.errorcode.get(n, str(n))


def say(**kw):
    print(json.dumps(kw, sort_keys=True), flush=True)


def hold():
    t0 = time.monotonic()
    r, _, _ = select.select([0], [], [], HOLD)
    say(held=round(time.monotonic() - t0, 3), released=bool(r))


def inotify_init():
    fd = libc.inotify_init1(os.O_CLOEXEC)
    return fd if fd >= 0 else -ctypes.get_errno()


def add_watch(ifd, path):
    wd = libc.inotify_add_watch(ifd, path.encode(), IN_MODIFY)
    return wd if wd >= 0 else -ctypes.get_errno()


def nofile():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def user_max(name):
    try:
        with open("/proc/sys/user/" + name) as f:
            return int(f.read())
    except OSError as e:
        return ename(e.errno)


def pipes_attack(cap):
    held, err = [], None
    while len(held) < cap:
        try:
            r, w = os.pipe()
        except OSError as e:
            err = "pipe:" + ename(e.errno)
            break
        os.close(r)  # the pipe and its pages live on with the write end
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, MiB)
        except OSError as e:
            os.close(w)
            err = ename(e.errno)
            break
        held.append(w)
    say(got=len(held), err=err, cap=cap)
    hold()


def pipes_victim(n):
    ok, errs, fds = 0, [], []
    for _ in range(n):
        r, w = os.pipe()
        fds += [r, w]
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, MiB)
            ok += 1
        except OSError as e:
            errs.append(ename(e.errno))
    say(ok=ok, tries=n, errs=errs)


def fds_attack(cap):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setblocking(False)  # a full socket buffer is an error, never a hang
    fd = os.open("/dev/null", os.O_RDONLY)
    inflight, sends, err = 0, 0, None
    while sends < cap:
        try:
            socket.send_fds(a, [b"x"], [fd] * PER_MESSAGE)
        except OSError as e:
            err = ename(e.errno)
            break
        sends += 1
        inflight += PER_MESSAGE
    say(inflight=inflight, sends=sends, err=err, cap=cap, nofile=nofile())
    hold()


def fds_victim(n):
    ok, errs = 0, []
    fd = os.open("/dev/null", os.O_RDONLY)
    for _ in range(n):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            socket.send_fds(a, [b"v"], [fd])
            _, got, _, _ = socket.recv_fds(b, 16, 4)
            for g in got:
                os.close(g)
            if len(got) == 1:
                ok += 1
            else:
                errs.append("received %d fds" % len(got))
        except OSError as e:
            errs.append(ename(e.errno))
        a.close()
        b.close()
    say(ok=ok, tries=n, errs=errs)


def inotify_attack(cap):
    held, err = [], None
    while len(held) < cap:
        fd = inotify_init()
        if fd < 0:
            err = ename(-fd)
            break
        held.append(fd)
    say(got=len(held), err=err, cap=cap, nofile=nofile(),
        max=user_max("max_inotify_instances"))
    hold()


def inotify_victim(n):
    ok, errs, held = 0, [], []
    for _ in range(n):
        fd = inotify_init()
        if fd < 0:
            errs.append(ename(-fd))
        else:
            ok += 1
            held.append(fd)
    say(ok=ok, tries=n, errs=errs)


def watch_files(d, n, stop_at_first_error):
    """Make n files in d, a watch on each in one inotify instance:
    (watches, errors)."""
    os.makedirs(d, exist_ok=True)
    ifd = inotify_init()
    if ifd < 0:
        return 0, ["inotify_init1:" + ename(-ifd)]
    got, errs = 0, []
    for i in range(n):
        path = "%s/%d" % (d, i)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as e:
            errs.append("create:" + ename(e.errno))
            break
        wd = add_watch(ifd, path)
        if wd < 0:
            errs.append(ename(-wd))
            if stop_at_first_error:
                break
        else:
            got += 1
    return got, errs


def watches_attack(cap):
    got, errs = watch_files("/tmp/w", cap, True)
    say(got=got, err=errs[0] if errs else None, cap=cap,
        max=user_max("max_inotify_watches"))
    hold()


def watches_victim(n):
    got, errs = watch_files("/tmp/v", n, False)
    say(ok=got, tries=n, errs=errs)


def limits():
    out = {}
    for name in sorted(os.listdir("/proc/sys/user")):
        if name.startswith("max_"):
            out[name] = user_max(name)
    print(json.dumps(out, sort_keys=True), flush=True)


OPS = {
    "pipes-attack": pipes_attack, "pipes-victim": pipes_victim,
    "fds-attack": fds_attack, "fds-victim": fds_victim,
    "inotify-attack": inotify_attack, "inotify-victim": inotify_victim,
    "watches-attack": watches_attack, "watches-victim": watches_victim,
}


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "limits":
        limits()
    elif len(sys.argv) == 3 and sys.argv[1] in OPS:
        OPS[sys.argv[1]](int(sys.argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
