#!/usr/bin/python3
"""Real programs under the seccomp allowlist (TAP).

usage: run_compat.py AIRLOCK PROBE [CASE-SUBSTRING...]

Each case runs an ordinary workload with the default policy (Python with
numpy and pandas, Node, gcc and make, git, curl against a server in the same
sandbox, bash and coreutils, the JVM where one can run) and checks its exact
output, and that the audit stream has no syscall.denied event: a call the
allowlist (src/policy/seccomp.c) refuses is listed by name, number and
errno, so the table can be extended (docs/security.md, "The seccomp
allowlist"). A program that is not installed skips its case.
"""

import glob
import hashlib
import os
import shutil
import subprocess

from harness import (Skip, Suite, TempDir, expect, expect_rc, main, read_outputs, write_file)

suite = Suite()
case = suite.case

PYTHON = "/usr/bin/python3"  # Debian's, with python3-numpy and python3-pandas


def need(*programs):
    for p in programs:
        if not (shutil.which(p) if "/" not in p else os.access(p, os.X_OK)):
            raise Skip("%s is not installed" % p)


def run_job(e, cmd, files=None, opts=(), timeout=120):
    """Run cmd under `airlock run` with an audit stream; files maps a sandbox
    path to its content (bound read-only from a host temp dir). Returns
    (result, syscall.denied events)."""
    with TempDir(prefix="airlock-compat-in-") as src, \
            TempDir(mode=0o777, prefix="airlock-compat-out-") as out:
        argv = ["--audit", os.path.join(out, "audit.jsonl"), "--timeout", str(timeout)]
        for i, (path, content) in enumerate(sorted((files or {}).items())):
            host = write_file(os.path.join(src, "f%d" % i), content)
            argv += ["--ro", "%s:%s" % (host, path)]
        res = e.run(cmd, opts=argv + list(opts), timeout=timeout + 30, bind_probe=False)
        _, events = read_outputs(out)
    # An empty stream would make "nothing denied" vacuous.
    expect([ev.get("event") for ev in events][-1:] == ["run.end"],
           "the audit stream has no run.end event", res)
    return res, [ev for ev in events if ev.get("event") == "syscall.denied"]


def expect_job(res, denied, want):
    """Exit 0, exactly the expected stdout, and no denied system call."""
    expect_rc(res, 0)
    expect(res.text == want, "expected stdout %r, got %r" % (want, res.text), res)
    if denied:
        calls = {}
        for ev in denied:
            key = "%s (nr %s) -> %s" % (ev.get("syscall"), ev.get("nr"), ev.get("errno"))
            calls[key] = calls.get(key, 0) + 1
        raise AssertionError("the allowlist refused: %s\n%s" % (
            "; ".join("%s x%d" % kv for kv in sorted(calls.items())), res.describe()))


# ---- Python: numpy, pandas, processes ----------------------------------------

PY_JOB = r"""
import multiprocessing, subprocess
import numpy as np
import pandas as pd

def square(x):
    return x * x

a = np.arange(12, dtype=np.float64).reshape(3, 4)
b = np.arange(8, dtype=np.float64).reshape(4, 2)
print("matmul", (a @ b).astype(int).tolist())
print("big", int((np.ones((300, 300)) @ np.ones((300, 300))).sum()))
df = pd.read_csv("/input/sales.csv")
g = df.groupby("city")["amount"].sum().sort_index()
print("groupby", ",".join("%s=%d" % kv for kv in g.items()))
with multiprocessing.Pool(2) as pool:
    print("pool", pool.map(square, range(5)))
print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout, end="")
"""


@case
def python_numpy_pandas(e):
    """Debian's python3: a numpy matrix product (small, checked, and one
    large enough for BLAS), a pandas groupby over a --ro CSV, a
    multiprocessing pool and a subprocess."""
    need(PYTHON)
    if subprocess.run([PYTHON, "-c", "import numpy, pandas"], capture_output=True).returncode:
        raise Skip("%s cannot import numpy and pandas" % PYTHON)
    res, den = run_job(e, [PYTHON, "/opt/job/job.py"], {
        "/opt/job/job.py": PY_JOB,
        "/input/sales.csv": "city,amount\nParis,5\nBerlin,10\nParis,7\nOslo,1\nBerlin,20\n"})
    expect_job(res, den, "matmul [[28, 34], [76, 98], [124, 162]]\nbig 27000000\n"
               "groupby Berlin=30,Oslo=1,Paris=12\npool [0, 1, 4, 9, 16]\nchild\n")


# ---- Node ----------------------------------------------------------------------

NODE_JOB = r"""
const fs = require('fs');
const crypto = require('crypto');
const cp = require('child_process');
const http = require('http');
const { Worker } = require('worker_threads');
fs.writeFileSync('/tmp/n.txt', 'hello node\n');
console.log('fs', fs.readFileSync('/tmp/n.txt', 'utf8').trim());
console.log('sha256', crypto.createHash('sha256').update('airlock').digest('hex'));
console.log('child', cp.execFileSync('/bin/echo', ['from child']).toString().trim());
const w = new Worker('require("worker_threads").parentPort.postMessage(6 * 7);', { eval: true });
w.on('message', (v) => {
  console.log('worker', v);
  const srv = http.createServer((req, res) => res.end('pong ' + req.url));
  srv.listen(0, '127.0.0.1', () => {
    http.get({ host: '127.0.0.1', port: srv.address().port, path: '/ping' }, (res) => {
      let body = '';
      res.on('data', (d) => body += d);
      res.on('end', () => { console.log('http', body); srv.close(); });
    });
  });
});
"""


@case
def node_fs_crypto_workers_http(e):
    """node: fs, crypto, child_process, a worker thread, and an http server
    and client on the sandbox's own 127.0.0.1."""
    need("node")
    res, den = run_job(e, ["node", "/opt/job/job.js"], {"/opt/job/job.js": NODE_JOB})
    digest = hashlib.sha256(b"airlock").hexdigest()
    expect_job(res, den, "fs hello node\nsha256 %s\nchild from child\nworker 42\n"
               "http pong /ping\n" % digest)


# ---- gcc and make --------------------------------------------------------------

C_JOB = r"""
set -e
mkdir -p /work/cproj && cd /work/cproj
cp /opt/job/main.c /opt/job/add.c /opt/job/Makefile .
make -s -j2 CC=gcc
./prog
"""


@case
def gcc_make_two_files(e):
    """gcc and make build a two-file C program from a Makefile on the
    scratch (make -j2), and it runs."""
    need("gcc", "make")
    res, den = run_job(e, ["/bin/bash", "/opt/job/job.sh"], {
        "/opt/job/job.sh": C_JOB,
        "/opt/job/main.c": '#include <stdio.h>\nint add(int a, int b);\n'
                           'int main(void) { printf("sum=%d\\n", add(40, 2)); return 0; }\n',
        "/opt/job/add.c": "int add(int a, int b) { return a + b; }\n",
        "/opt/job/Makefile": "prog: main.o add.o\n\t$(CC) -o $@ main.o add.o\n"
                             "%.o: %.c\n\t$(CC) -O2 -c $<\n"})
    expect_job(res, den, "sum=42\n")


# ---- git -------------------------------------------------------------------------

GIT_JOB = r"""
set -e
export GIT_CONFIG_NOSYSTEM=1
cd /work && mkdir repo && cd repo
git init -q -b main .
git config user.email t@example.invalid && git config user.name tester
echo one > a.txt && git add a.txt && git commit -q -m first
git checkout -q -b feature
echo two > b.txt && git add b.txt && git commit -q -m second
git checkout -q main
echo three >> a.txt && git commit -q -am third
git merge -q --no-edit feature
git log --format=%s
git ls-files
git status --porcelain | wc -l
"""


@case
def git_branch_and_merge(e):
    """git init, add, commit, a branch and a merge on the scratch, with HOME
    there; the log and the tree are exact."""
    need("git")
    res, den = run_job(e, ["/bin/bash", "/opt/job/job.sh"], {"/opt/job/job.sh": GIT_JOB},
                       opts=["--env", "HOME=/work"])
    expect_job(res, den, "Merge branch 'feature'\nthird\nsecond\nfirst\na.txt\nb.txt\n0\n")


# ---- curl against a server in the same sandbox ----------------------------------

CURL_JOB = r"""
cd /work && mkdir www && echo "served by http.server" > www/hello.txt
/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory www 8765 >/dev/null 2>&1 &
pid=$!
for i in $(seq 1 200); do curl -s -o /dev/null http://127.0.0.1:8765/ && break; sleep 0.1; done
curl -sS http://127.0.0.1:8765/hello.txt
curl -sS -o /dev/null -w '%{http_code}\n' http://127.0.0.1:8765/missing
kill $pid; wait $pid 2>/dev/null
echo done
"""


@case
def curl_local_http_server(e):
    """curl fetches a file and a 404 from python's http.server started on
    127.0.0.1 inside the same sandbox (its own network namespace)."""
    need("curl", PYTHON)
    res, den = run_job(e, ["/bin/bash", "/opt/job/job.sh"], {"/opt/job/job.sh": CURL_JOB})
    expect_job(res, den, "served by http.server\n404\ndone\n")


# ---- bash and coreutils ------------------------------------------------------------

SH_JOB = r"""
set -e
cd /work && mkdir -p t/a t/b
for i in 3 1 2; do echo "line $i" > t/a/f$i.txt; done
echo zed > t/b/z.txt
find t -name '*.txt' | sort | xargs cat | sort -r | head -n 2
tar -czf t.tgz t && mkdir u && tar -xzf t.tgz -C u && find u -type f | wc -l
seq 1 1000 | awk '{s+=$1} END {print s}' | tee /tmp/s | cat
sha256sum t/b/z.txt | cut -c1-16
cp -a t v && mv v w && ln -s w/a/f1.txt link && cat link
chmod 600 w/b/z.txt && stat -c %a w/b/z.txt
timeout 5 sleep 0.1 && echo timed
du -s w >/dev/null && df /work >/dev/null && echo fs
(echo sub; exit 3) || echo "status $?"
read -r x < <(echo procsub) && echo "$x"
"""


@case
def bash_coreutils_pipeline(e):
    """bash with coreutils, findutils, tar and gzip: find | sort | xargs, a
    tar round trip, awk, tee, sha256sum, cp/mv/ln/chmod/stat, timeout,
    du/df, a subshell and a process substitution."""
    res, den = run_job(e, ["/bin/bash", "/opt/job/job.sh"], {"/opt/job/job.sh": SH_JOB})
    digest = hashlib.sha256(b"zed\n").hexdigest()[:16]
    expect_job(res, den, "zed\nline 3\n4\n500500\n%s\nline 1\n600\ntimed\nfs\nsub\nstatus 3\n"
               "procsub\n" % digest)


# ---- the JVM -------------------------------------------------------------------------

JAVA_JOB = r"""
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.*;

public class Main {
    public static void main(String[] args) throws Exception {
        ExecutorService ex = Executors.newFixedThreadPool(4);
        List<Future<Long>> parts = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            final int k = i;
            parts.add(ex.submit(() -> {
                long s = 0;
                for (int j = 0; j <= 1000 * k; j++) s += j;
                return s;
            }));
        }
        long total = 0;
        for (Future<Long> f : parts) total += f.get();
        ex.shutdown();
        System.out.println("java total=" + total);
    }
}
"""


def jvms():
    """(java binary, None) for each JVM under /usr/lib/jvm that can run in
    the default sandbox, (java binary, reason) for the others."""
    found, seen = [], set()
    for java in sorted(glob.glob("/usr/lib/jvm/*/bin/java")):
        home = os.path.realpath(os.path.join(os.path.dirname(java), ".."))
        if home in seen or not os.access(java, os.X_OK):
            continue
        seen.add(home)
        conf = os.path.realpath(os.path.join(home, "conf", "security", "java.security"))
        if not conf.startswith("/usr/"):
            found.append((java, "its java.security is %s, outside /usr (not in the sandbox)"
                          % conf))
            continue
        found.append((java, None))
    return found


@case
def java_single_file_threads(e):
    """Each JVM under /usr/lib/jvm that can run in the sandbox launches a
    single-file source program (compiled in memory) that sums on a pool of
    four threads, under a 1G memory limit."""
    found = jvms()
    runnable = [j for j, why in found if why is None]
    for java, why in found:
        if why:
            print("# not run: %s: %s" % (java, why), flush=True)
    if not runnable:
        raise Skip("no JVM under /usr/lib/jvm can run here" if not found
                   else "no runnable JVM: " + "; ".join("%s: %s" % f for f in found))
    for java in runnable:
        res, den = run_job(e, [java, "/opt/job/Main.java"], {"/opt/job/Main.java": JAVA_JOB},
                           opts=["--memory", "1G"], timeout=240)
        expect_job(res, den, "java total=70014000\n")


if __name__ == "__main__":
    main(suite)
