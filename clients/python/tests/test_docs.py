"""docs/clients.md's glue-count example, extracted and run as it is
written, so the documentation cannot drift from the client."""

import os
import re
import subprocess
import sys

from airlock import Sandbox

CLIENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(os.path.dirname(os.path.dirname(CLIENT)), "docs", "clients.md")


def glue_example():
    text = open(DOC).read()
    section = text.split("\n## The glue count\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block in docs/clients.md's glue count section"
    return m.group(1)


def test_glue_count_example_runs(daemon):
    """The new-user integration (create, three runs keeping files, a file
    read back, kill) is at most 10 lines, runs, prints the report, and
    leaves no sandbox behind."""
    code = glue_example()
    lines = [l for l in code.splitlines() if l.strip()]
    assert len(lines) <= 10, "the glue example has %d lines" % len(lines)
    before = len(Sandbox.list())
    env = dict(os.environ, PYTHONPATH=CLIENT, AIRLOCK_SOCKET=daemon.socket)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "total: 15\n", p.stdout
    assert len(Sandbox.list()) == before
