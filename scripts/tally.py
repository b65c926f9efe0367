#!/usr/bin/python3
"""usage: tally.py BUILD_DIR

Counts the results of the last `meson test -C BUILD_DIR` from its JSON test
log and prints "PASSED FAILED SKIPPED". A TAP test counts each of its cases
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


def count_cases(stdout):
    n = [0, 0, 0]
    for line in stdout.splitlines():
        m = CASE_RE.match(line)
        if not m:
            continue
        ok, directive = m.group(1).lower() == "ok", (m.group(2) or "").upper()
        if directive == "SKIP" and ok:
            n[2] += 1
        elif directive == "TODO":
            n[1 if ok else 0] += 1  # an unexpected pass fails, an expected failure passes
        else:
            n[0 if ok else 1] += 1
    return n


def main(argv):
    build_dir = argv[1]
    tap = tap_tests(build_dir)
    total = [0, 0, 0]
    with open(f"{build_dir}/meson-logs/testlog.json", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            bad = t["result"] not in ("OK", "EXPECTEDFAIL", "SKIP")
            n = count_cases(t.get("stdout") or "") if t["name"] in tap else [0, 0, 0]
            if sum(n) == 0:
                n = [0, 0, 1] if t["result"] == "SKIP" else [0, 1, 0] if bad else [1, 0, 0]
            elif bad and n[1] == 0:
                n[1] = 1
            total = [a + b for a, b in zip(total, n)]
    print(*total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
