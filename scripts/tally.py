#!/usr/bin/python3
"""usage: tally.py BUILD_DIR

Counts the results of the last `meson test -C BUILD_DIR` from its JSON test
log and prints "PASSED FAILED SKIPPED"; what failed (the test, the case and
the first line that says why) goes to BUILD_DIR/meson-logs/failed.txt, one
line each, which scripts/test prints beside its summary so that the last
lines of a run name every failure. A TAP test counts each of its cases
as meson judges them (ok, not ok, # SKIP, # TODO), plus one failure if meson
failed the test for another reason too (a crash, a wrong plan, a timeout);
any other test counts once.
"""

import json
import re
import subprocess
import sys

CASE_RE = re.compile(r"^(not ok|ok)\b[^#]*(?:#\s*(SKIP|TODO)\S*)?", re.I)


def tap_tests(build_dir):
    """Names, as the test log spells them, of the tests that speak TAP."""
    out = subprocess.run(["meson", "introspect", build_dir, "--tests"], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for t in json.loads(out):
        if t["protocol"] != "tap":
            continue
        names.add(t["name"])
        if t["suite"]:
            project = t["suite"][0].split(":", 1)[0]
            suites = "+".join(s.split(":", 1)[-1] for s in t["suite"])
            names.add(f"{project}:{suites} / {t['name']}")
    return names


def count_cases(stdout, failed):
    """[passed, failed, skipped] of one TAP output; each failed case's line,
    with the first diagnostic line after it, is appended to failed."""
    n = [0, 0, 0]
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        m = CASE_RE.match(line)
        if not m:
            continue
        ok, directive = m.group(1).lower() == "ok", (m.group(2) or "").upper()
        if directive == "SKIP" and ok:
            n[2] += 1
            continue
        # an unexpected pass fails, an expected failure passes
        bad = ok if directive == "TODO" else not ok
        n[1 if bad else 0] += 1
        if bad:
            why = next((x.strip() for x in lines[i + 1:i + 4] if x.lstrip().startswith("#")), "")
            if len(why) > 400:
                why = why[:400] + "..."
            failed.append("%s %s" % (line.strip(), why))
    return n


def main(argv):
    build_dir = argv[1]
    tap = tap_tests(build_dir)
    total = [0, 0, 0]
    failed = []
    with open(f"{build_dir}/meson-logs/testlog.json", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            bad = t["result"] not in ("OK", "EXPECTEDFAIL", "SKIP")
            cases = []
            n = count_cases(t.get("stdout") or "", cases) if t["name"] in tap else [0, 0, 0]
            if sum(n) == 0:
                n = [0, 0, 1] if t["result"] == "SKIP" else [0, 1, 0] if bad else [1, 0, 0]
            elif bad and n[1] == 0:
                n[1] = 1
            if bad and not cases:
                cases.append(t["result"])
            failed += ["%s: %s" % (t["name"], c) for c in cases]
            total = [a + b for a, b in zip(total, n)]
    with open(f"{build_dir}/meson-logs/failed.txt", "w", encoding="utf-8") as f:
        for line in failed:
            f.write(line[:300] + "\n")
    print(*total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
