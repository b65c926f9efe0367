#!/bin/sh
# systemd-analyze verify of the Debian package's units (debian/airlock.socket,
# debian/airlock.service), run without systemd as PID 1: it loads the units
# as the manager would and reports bad keys and values, a missing command and
# dependencies that do not resolve. It exits 0 on mere warnings ("Unknown
# key ..., ignoring"), so any output at all fails the test. ExecStart names
# the built airlock instead of /usr/bin/airlock, which only the installed
# package has (scripts/test's deb stage verifies the installed units as they
# are), and the man page is not looked up. Then the few settings other
# parts rely on: the socket's path and mode, the command, KillMode.
#
# usage: verify-units.sh SOURCE_DIR AIRLOCK; exit 77 (skip) without
# systemd-analyze.
set -u
src=$1
airlock=$(realpath "$2") || exit 1
if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "systemd-analyze is not installed (Debian: the systemd package): skipped"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
cp "$src/debian/airlock.socket" "$tmp/airlock.socket" || exit 1
sed "s|^ExecStart=/usr/bin/airlock serve\$|ExecStart=$airlock serve|" \
	"$src/debian/airlock.service" >"$tmp/airlock.service" || exit 1
if ! grep -qx "ExecStart=$airlock serve" "$tmp/airlock.service"; then
	echo "debian/airlock.service: no line ExecStart=/usr/bin/airlock serve"
	fail=1
fi
out=$(systemd-analyze verify --man=no "$tmp/airlock.socket" "$tmp/airlock.service" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
	echo "systemd-analyze verify exited $rc and said:"
	echo "$out"
	fail=1
fi
# One setting per line, as the docs describe them.
for want in "airlock.socket:ListenStream=/run/airlock/serve.sock" \
	"airlock.socket:SocketMode=0600" \
	"airlock.service:Requires=airlock.socket" \
	"airlock.service:KillMode=mixed" \
	"airlock.service:Delegate=yes" \
	"airlock.service:OOMPolicy=continue"; do
	f=${want%%:*}
	line=${want#*:}
	if ! grep -qx "$line" "$src/debian/$f"; then
		echo "debian/$f: no line $line"
		fail=1
	fi
done
[ "$fail" -eq 0 ] && echo "ok: systemd-analyze verify of airlock.socket and airlock.service"
exit "$fail"
