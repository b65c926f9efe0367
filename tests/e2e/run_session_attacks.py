#!/usr/bin/python3
"""Attacks on a live session from inside its execs, judged from the host
(TAP). Each case is one that the review of issue 25's sessions found
open; each asserts the promise that the attack breaks, so it fails while
the hole is there.

1. init's stop is forged: an exec fills the sandbox uid's queue of
   pending signals (RLIMIT_SIGPENDING, 4096) with real-time signals to
   itself, then kill(1, AL_SIGNAL_STOP_ALL): with no room to queue it the
   kernel delivers it with its info lost, as SI_USER with si_pid 0 (what
   init takes for the supervisor), and init ends the session.
2. Same, by lowering init's own RLIMIT_SIGPENDING with prlimit(1, ...).
3. prlimit(1, ...) on init changes the next exec's limits (RLIMIT_FSIZE).
4. prlimit(1, RLIMIT_NPROC, 0) on init: no exec can start again.
5. setpriority / sched_setscheduler(SCHED_IDLE) / sched_setaffinity on
   init: the next exec inherits them.
6. A background exec SIGSTOPs each new process: an exec stopped between
   init's fork and its execve blocked init in go_exec()'s read of the
   exec's error pipe: no exec started and none was reaped or reported (a
   background exec that ends on its own was reported only when the session
   was killed). The stopped exec itself stays stopped: the execs of one
   sandbox share its uid and may signal each other (one trust domain,
   docs/security.md); what must hold is that it holds up nothing else.
7. The driver (the supervisor) killed with SIGKILL while an exec runs:
   `airlock gc` cannot remove the run's cgroups, which hold exec-N
   children (rmdir of a v1 cgroup with children fails). The test removes
   what is left itself, children first.

Bombs are bounded: the signal queue by RLIMIT_SIGPENDING (4096 entries),
the SIGSTOP loop by a deadline of 5 s with a sleep in each round."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import own_mount_ns  # noqa: E402

DRIVER = sys.argv[1]
AIRLOCK = sys.argv[2]
n = 0
failed = 0
drivers = []


def ok(cond, what):
    global n, failed
    n += 1
    # one TAP line: a message that quotes a command's output keeps its lines on it
    print(("ok" if cond else "not ok") + " %d - %s" % (n, " | ".join(str(what).splitlines())),
          flush=True)
    if not cond:
        failed += 1


def drive(*scripts, opts=()):
    with subprocess.Popen([DRIVER, *opts, *scripts], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as q:
        drivers.append(q.pid)
        try:
            out, err = q.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            q.kill()
            out, err = q.communicate()
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    ex = {l["exec_id"]: l for l in lines if "exec_id" in l}
    return q.returncode, err, ex, lines


def cgroup_dirs(pid):
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if d.startswith("%d-" % pid):
                found.append(os.path.join(root, d))
        if root.count("/") > 8:
            dirs[:] = []
    return found


def py(src):
    return "python3 -c '%s'" % src


own_mount_ns()

# 1. The stop forged through a full signal queue.
FILL = py("import os, signal\n"
          "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])\n"
          "for i in range(4200): os.kill(os.getpid(), signal.SIGRTMIN)\n"
          "os.kill(1, signal.SIGRTMIN + 2)\n"
          "print(\"sent\", flush=True)")
rc, err, ex, lines = drive(FILL, "echo alive")
ok("e2" in ex and ex["e2"]["stdout"] == "alive\n",
   "a stop signal sent to init from inside with the signal queue full is "
   "not taken for the supervisor's: the next exec runs (%s)" % err.strip())

# 2. The same, through init's own RLIMIT_SIGPENDING.
LOWER_SIG = py("import os, signal, resource as r\n"
               "r.prlimit(1, r.RLIMIT_SIGPENDING, (0, 0))\n"
               "os.kill(1, signal.SIGRTMIN + 2)")
rc, err, ex, lines = drive(LOWER_SIG, "echo alive")
ok("e2" in ex and ex["e2"]["stdout"] == "alive\n",
   "prlimit(1, RLIMIT_SIGPENDING) then a stop from inside: the next exec "
   "runs (%s)" % err.strip())

# 3. init's limits, and so the next exec's, changed from inside.
SET_FSIZE = py("import resource as r\n"
               "try: r.prlimit(1, r.RLIMIT_FSIZE, (1024, 1024))\n"
               "except OSError as e: print(e)")
rc, err, ex, lines = drive("ulimit -f", SET_FSIZE, "ulimit -f")
ok("e3" in ex and ex["e3"]["stdout"] == ex["e1"]["stdout"],
   "an exec cannot change init's RLIMIT_FSIZE for the next exec: %r then %r"
   % (ex.get("e1", {}).get("stdout"), ex.get("e3", {}).get("stdout")))

# 4. No exec ever again.
NPROC = py("import resource as r\n"
           "try: r.prlimit(1, r.RLIMIT_NPROC, (0, 0))\n"
           "except OSError as e: print(e)")
rc, err, ex, lines = drive(NPROC, "echo alive")
ok("e2" in ex and ex["e2"]["stdout"] == "alive\n",
   "after prlimit(1, RLIMIT_NPROC, 0) from inside the next exec runs: %s"
   % {k: (v["reason"], v.get("errno")) for k, v in ex.items()})

# 5. Scheduling inherited.
SCHED = py("import os\n"
           "for f in (lambda: os.setpriority(os.PRIO_PROCESS, 1, 19),\n"
           "          lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)),\n"
           "          lambda: os.sched_setaffinity(1, {0})):\n"
           "    try: f()\n"
           "    except OSError as e: print(e)")
SHOW = py("import os\n"
          "print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),"
          " sorted(os.sched_getaffinity(0)))")
rc, err, ex, lines = drive(SHOW, SCHED, SHOW)
ok("e3" in ex and ex["e3"]["stdout"] == ex["e1"]["stdout"],
   "an exec cannot change the nice value, policy or CPUs the next exec gets: "
   "%r then %r" % (ex.get("e1", {}).get("stdout"), ex.get("e3", {}).get("stdout")))

# 6. init blocked by a stopped exec. The attacker waits for "go", then for
# 5 s SIGSTOPs every process that appears; bg2 ends by itself at 1.5 s.
STOPPER = py("import os, signal, time\n"
             "while not os.path.exists(\"go\"): time.sleep(0.01)\n"
             "ps = lambda: {int(p) for p in os.listdir(\"/proc\") if p.isdigit()}\n"
             "seen = ps(); end = time.time() + 5\n"
             "while time.time() < end:\n"
             "    for p in ps() - seen:\n"
             "        seen.add(p)\n"
             "        try: os.kill(p, signal.SIGSTOP)\n"
             "        except OSError: pass\n"
             "    time.sleep(0.0005)")
victims = ["echo v%d" % i for i in range(6)]
rc, err, ex, lines = drive("sleep 0.3; touch go", *victims,
                           opts=("--wait-ms", "2500", "--bg", STOPPER,
                                 "--bg", "sleep 1.5; echo bg2"))
stuck = [l["stuck"] for l in lines if "stuck" in l]
victim_ids = {"e%d" % i for i in range(4, 4 + len(victims))}
run_end = [l["run_end"] for l in lines if "run_end" in l]
ok(set(stuck) <= victim_ids and run_end == ["killed"],
   "an exec stopped by another exec's process holds up only itself (stuck: "
   "%s), and the session still takes its stop (run_end: %s)" % (stuck, run_end))
bg2 = ex.get("e2", {})
ok(bg2.get("reason") == "exited" and bg2.get("t_ms", 1e9) < 4000,
   "a background exec's own end is reported while another exec is stopped "
   "before its execve: %s" % {k: bg2.get(k) for k in ("reason", "stdout", "t_ms")})

# 7. The supervisor killed during an exec; airlock gc afterwards.
q = subprocess.Popen([DRIVER, "sleep 30"], stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True)
drivers.append(q.pid)
q.stdout.readline()  # {"scratch": ...}: the session is ready
time.sleep(1)        # the exec was started and moved into its cgroup
had_exec = any(d.endswith("/exec-1") or os.path.isdir(d + "/exec-1")
               for d in cgroup_dirs(q.pid))
q.kill()
q.wait()
time.sleep(0.5)      # init dies with its parent
g = subprocess.run([AIRLOCK, "gc"], capture_output=True, text=True, timeout=60)
left = cgroup_dirs(q.pid)
ok(had_exec and not left,
   "airlock gc removes a killed session's cgroups with their exec-N "
   "children (had exec-1: %s; left: %s; gc said: %s)"
   % (had_exec, left, (g.stdout + g.stderr).strip()))
for d in left:  # ours to clean, children first
    for sub in sorted(os.listdir(d)):
        if os.path.isdir(os.path.join(d, sub)):
            try:
                os.rmdir(os.path.join(d, sub))
            except OSError:
                pass
    try:
        os.rmdir(d)
    except OSError as e:
        print("# could not remove %s: %s" % (d, e))

print("1..%d" % n)
sys.exit(1 if failed else 0)
