#!/usr/bin/python3
"""Output to a terminal: 20 MB through airlock with its stdout a pty (re-encoded by
supervisor/ttyfilter.c) against a pipe (passed as it is), interleaved medians.
Usage: bench/terminal.py AIRLOCK [BASELINE_AIRLOCK]
"""
A = sys.argv[1]
cmd = [A, "run", "--output-limit", "100M", "--", "sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' a"]
def run(pty):
    if pty:
        m, s = os.openpty()
        import tty; tty.setraw(s)
        out = s
    else:
        m, out = os.pipe()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(out)
    n = 0
    while True:
        try:
            b = os.read(m, 1 << 16)
        except OSError:
            break
        if not b:
            break
        n += len(b)
        if n >= 20000000 and p.poll() is not None:
            break
    p.wait()
    os.close(m)
    return time.perf_counter() - t, n
for k in range(2):
    for pty in (False, True):
        r = [run(pty) for _ in range(5)]
        print("pty" if pty else "pipe", "median %.3f s" % statistics.median(x[0] for x in r), "bytes", r[0][1])
