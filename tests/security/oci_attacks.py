#!/usr/bin/python3
"""Attacks on airlock as an OCI runtime (issue 30) by a hostile bundle:
its config.json (which whoever may create pods writes), its annotations and
its root filesystem, and the code running inside (TAP).

usage: oci_attacks.py AIRLOCK_RUNC [CASE-SUBSTRING...]

Each case builds a bundle under one temporary directory (a busybox root
from tests/oci/images.py, on this host's own file system), runs it with
AIRLOCK_RUNC --root TMP/state (`run`, or `create` for a container left
waiting), and judges what happened from the host: the owners and contents
of host files, what was created where, the audit files. A case asserts what
airlock promises (docs/security.md: only the files given, never host root,
nothing of one sandbox reaching another's), so it fails while the hole it
describes is open. Victims are files and directories the case made itself
under the temporary directory, never the host's own (/etc, another user's
files): a bind of a root-owned 0700 directory made here stands for a bind of
/etc or of / itself.

Everything made is removed at the end, even on failure: every container is
deleted with `delete --force`, the one overlay mount (the case of a file
system that cannot be idmapped) is made in a mount namespace of this
script's own (harness.own_mount_ns) and unmounted by the case.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "oci"))

import images  # noqa: E402
from harness import diag, own_mount_ns  # noqa: E402

POOL_BASE = 0x70000000  # src/ids/slots.h AL_IDS_POOL_BASE
SLOT_SIZE = 65536
POOL_END = POOL_BASE + 4094 * SLOT_SIZE
TIMEOUT = 90

RUNC = None
TMP = None
BUSYBOX = None
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def base_config(args, root):
    """A config as podman gives one (the namespaces, the usual mounts, masks),
    with no terminal."""
    return {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
                    "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "cwd": "/",
                    "noNewPrivileges": True},
        "root": {"path": root, "readonly": True},
        "hostname": "attacks",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev"]},
        ],
        "annotations": {"io.airlock.timeout": "60"},
        "linux": {
            "namespaces": [{"type": t} for t in
                           ("pid", "network", "ipc", "uts", "mount", "cgroup")],
            "maskedPaths": ["/proc/kcore", "/proc/keys"],
            "readonlyPaths": ["/proc/sys"],
        },
    }


def bundle(name, args, root=None, mounts=(), annotations=None, edit=None):
    """TMP/NAME with its config.json; the busybox root unless root is given."""
    path = os.path.join(TMP, name)
    os.makedirs(path, exist_ok=True)
    c = base_config(args, root or BUSYBOX)
    c["mounts"] += list(mounts)
    c["annotations"].update(annotations or {})
    if edit:
        edit(c)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    return path


def runc(*args, operator=None, audit_dir=None, detach=False):
    argv = [RUNC, "--root", os.path.join(TMP, "state")]
    if operator:
        argv += ["--operator-policy", operator]
    if audit_dir:
        argv += ["--audit-dir", audit_dir]
    argv += list(args)
    if detach:
        # create leaves the supervisor behind holding its stdio: files,
        # never pipes this script would wait on.
        with open(os.path.join(TMP, "create.out"), "wb") as out:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, timeout=TIMEOUT)
        with open(os.path.join(TMP, "create.out"), "rb") as f:
            r.stdout = f.read()
        return r
    return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=TIMEOUT)


def run(name, path, **kw):
    """`run` of the bundle at path as container NAME, always deleted after."""
    try:
        return runc("run", "-b", path, name, **kw)
    finally:
        runc("delete", "--force", name)


def out(r):
    return r.stdout.decode(errors="replace").strip()


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def victim_dir(name):
    """A directory of host root's, mode 0700, with a secret file of mode
    0600 in it: what /etc or /root look like to the sandbox."""
    d = os.path.join(TMP, name)
    os.mkdir(d, 0o700)
    with open(os.path.join(d, "secret"), "w") as f:
        f.write("TOPSECRET\n")
    os.chmod(os.path.join(d, "secret"), 0o600)
    return d


def read(path):
    with open(path) as f:
        return f.read()


# --- holes ------------------------------------------------------------------


@case
def bind_of_any_host_path_as_its_owner():
    """A config's bind of a root-owned 0700 host directory (/etc, /root, /
    stand for it), with no operator policy: the container must not read the
    0600 secret, change it, or create files there owned by host root.
    Today: it does all three: binds are not bounded without an operator
    policy (src/oci/config.c mount_one takes any source) and each is
    idmapped with the engine's map, default host 0-65535 as the container's
    0-65535 (src/policy/plan-root.c take_map, src/backend/native/inputs.c
    root_map), so container root is the owner of host root's files."""
    v = victim_dir("victim-bind")
    b = bundle("bind", ["/bin/sh", "-c",
                        "cat /mnt/v/secret; echo changed > /mnt/v/secret; "
                        "echo x > /mnt/v/planted; true"],
               mounts=[{"destination": "/mnt/v", "type": "bind", "source": v,
                        "options": ["rbind", "rw"]}])
    r = run("bind", b)
    diag("run: rc %d: %s" % (r.returncode, out(r)[:300]))
    expect("TOPSECRET" not in out(r), "the container read host root's 0600 file")
    expect(read(os.path.join(v, "secret")) == "TOPSECRET\n",
           "the container changed host root's 0600 file")
    planted = os.path.join(v, "planted")
    expect(not os.path.exists(planted),
           "the container created %s owned by host uid %d" %
           (planted, os.stat(planted).st_uid) if os.path.exists(planted) else "")


@case
def root_path_outside_operator_bounds():
    """Under an operator policy whose profile lets a task read only the
    bundles' directory, a config whose root.path is another host directory
    (a root-owned 0700 one; "/" itself is the same path through the code)
    must be refused. Today it runs, read-write, as that directory's owner,
    and the host-side supervisor makes mountpoints (proc, dev, sys, tmp) in
    it as root: the container's root is judged only against never paths
    (src/policy/engine-paths.c al_engine_plan: the "/" entry has no task
    mount, so it is taken as airlock's own)."""
    v = victim_dir("victim-root")
    os.mkdir(os.path.join(v, "bin"), 0o755)
    shutil.copy2("/bin/busybox", os.path.join(v, "bin", "busybox"))
    before = sorted(os.listdir(v))
    op = os.path.join(TMP, "operator.json")
    with open(op, "w") as f:
        json.dump({"version": 1, "profiles": {"default": {
            "filesystem": {"ro": [os.path.join(TMP, "bundles-only")], "rw": []}}}}, f)
    b = bundle("rootpath", ["/bin/busybox", "sh", "-c",
                            "/bin/busybox cat /secret; echo changed > /secret"],
               root=v, edit=lambda c: c["root"].update(readonly=False))
    r = run("rootpath", b, operator=op)
    diag("run: rc %d: %s" % (r.returncode, out(r)[:300]))
    expect(r.returncode != 0, "a root.path outside the operator's bounds ran")
    expect(read(os.path.join(v, "secret")) == "TOPSECRET\n",
           "the container changed a file outside the operator's bounds")
    after = sorted(os.listdir(v))
    expect(after == before, "the runtime made %s in a host directory outside the "
           "operator's bounds" % sorted(set(after) - set(before)))


@case
def uid_map_host_ids_chosen_by_config():
    """linux.uidMappings' hostID is taken as it comes: a config mapping its
    root to the first id of the pool's last slot (another sandbox's ids)
    writes files owned by that host id through the idmapped root. It must be
    refused, or at least nothing of the run's may land on disk under ids of
    another slot. Today the file is created with that host id
    (src/policy/plan-root.c take_map checks only the container side)."""
    other = POOL_BASE + 4093 * SLOT_SIZE
    root = os.path.join(TMP, "root-map")
    shutil.copytree(BUSYBOX, root, symlinks=True)
    w = os.path.join(root, "w")
    os.mkdir(w, 0o700)
    os.chown(w, other, other)
    m = [{"containerID": 0, "hostID": other, "size": SLOT_SIZE}]

    def edit(c):
        c["root"]["readonly"] = False
        c["linux"]["uidMappings"] = m
        c["linux"]["gidMappings"] = m
        c["linux"]["namespaces"].append({"type": "user"})
    b = bundle("uidmap", ["/bin/sh", "-c", "echo x > /w/made"], root=root, edit=edit)
    r = run("uidmap", b)
    diag("run: rc %d: %s" % (r.returncode, out(r)[:300]))
    made = os.path.join(w, "made")
    if os.path.exists(made):
        uid = os.stat(made).st_uid
        expect(False, "the container wrote %s as host uid %#x, an id of another slot "
               "chosen by the config" % (made, uid))
    expect(r.returncode != 0, "a hostID of another slot was accepted")


@case
def audit_annotation_names_another_stream():
    """io.airlock.audit names a shared sink of the operator's --audit-dir
    (NAME.jsonl): it can never name another container's own stream
    (container-ID.jsonl), so a hostile pod's events never land in its
    neighbour's audit. The attacker naming the victim's stream is refused;
    the victim's stream holds its own events alone."""
    ad = os.path.join(TMP, "audit")
    os.mkdir(ad, 0o700)
    r1 = run("victim", bundle("victim", ["/bin/true"]), audit_dir=ad)
    expect(r1.returncode == 0, "the victim did not run: %s" % out(r1))
    r2 = run("attacker", bundle("attacker", ["/bin/true"],
                                annotations={"io.airlock.audit": "container-victim"}),
             audit_dir=ad)
    expect(r2.returncode != 0 and "io.airlock.audit" in out(r2),
           "naming the victim's own stream was not refused: %s" % out(r2))
    ids = set()
    with open(os.path.join(ad, "container-victim.jsonl")) as f:
        for line in f:
            ev = json.loads(line)
            oci = ev.get("oci") or (ev.get("data") or {}).get("oci")
            if isinstance(oci, dict):
                ids.add(oci.get("id"))
    diag("containers in container-victim.jsonl: %s" % sorted(i for i in ids if i))
    expect(ids == {"victim"}, "the victim's audit stream holds %s" % sorted(ids))


@case
def per_run_ids_on_disk_where_no_idmap():
    """A bind on a file system that cannot be idmapped (an overlayfs made
    here, as podman's volumes on overlay or fuse are) is shown with host ids
    (src/backend/native/inputs.c open_root_input's fallback); what the
    container writes there belongs to its per-run host ids (the slot's), so
    the next sandbox given the same slot owns it. airlock run never lets a
    per-run id reach a disk (inputs.c disk_map): a rw bind that cannot be
    idmapped must be refused, or written as a fixed disk id. Today the file
    is owned by the slot's id."""
    o = os.path.join(TMP, "ovl")
    for d in ("l", "u", "w", "m"):
        os.makedirs(os.path.join(o, d))
    m = os.path.join(o, "m")
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    "lowerdir=%s/l,upperdir=%s/u,workdir=%s/w" % (o, o, o), m], check=True)
    try:
        os.chmod(m, 0o1777)
        b = bundle("ovl", ["/bin/sh", "-c", "echo x > /vol/made"],
                   mounts=[{"destination": "/vol", "type": "bind", "source": m,
                            "options": ["rbind", "rw"]}])
        r = run("ovl", b)
        diag("run: rc %d: %s" % (r.returncode, out(r)[:300]))
        made = os.path.join(m, "made")
        if os.path.exists(made):
            uid = os.stat(made).st_uid
            expect(not POOL_BASE <= uid < POOL_END,
                   "the container's file on disk is owned by per-run host uid %#x "
                   "(slot %d)" % (uid, (uid - POOL_BASE) // SLOT_SIZE))
    finally:
        subprocess.run(["umount", m])


@case
def state_root_reachable_from_a_container():
    """A config's bind of the runtime's own --root: the container then holds
    every container's state directory (state.json, the supervisors'
    sockets). Here one container deletes another's state.json, and the
    engine loses it: `state` of the victim must still answer. Today the bind
    is accepted (as any host path is: see bind_of_any_host_path_as_its_owner)
    and the victim's state is gone."""
    r = runc("create", "-b", bundle("waiting", ["/bin/sleep", "30"]), "waiting", detach=True)
    saved = None
    try:
        expect(r.returncode == 0, "create of the victim failed: %s" % out(r))
        before = runc("state", "waiting")
        expect(before.returncode == 0, "state of the victim: %s" % out(before))
        want = json.loads(before.stdout)
        st = os.path.join(TMP, "state")
        with open(os.path.join(st, "waiting", "state.json"), "rb") as f:
            saved = f.read()
        b = bundle("reach", ["/bin/sh", "-c", "ls /st; rm /st/waiting/state.json"],
                   mounts=[{"destination": "/st", "type": "bind", "source": st,
                            "options": ["rbind", "rw"]}])
        r2 = run("reach", b)
        diag("run: rc %d: %s" % (r2.returncode, out(r2)[:300]))
        s = runc("state", "waiting")
        diag("state of the victim after: rc %d: %s" % (s.returncode, out(s)[:300]))
        expect(s.returncode == 0, "the victim's state is gone: %s" % out(s))
        got = json.loads(s.stdout)
        expect((got.get("status"), got.get("pid")) == (want["status"], want["pid"]),
               "the victim's state changed from %s (pid %s) to %s (pid %s)" %
               (want["status"], want["pid"], got.get("status"), got.get("pid")))
    finally:
        # The victim's state.json put back, so that delete finds its
        # supervisor and ends it the ordinary way (its cgroups removed).
        sj = os.path.join(TMP, "state", "waiting", "state.json")
        if saved is not None and os.path.isdir(os.path.dirname(sj)) and not os.path.exists(sj):
            with open(sj, "wb") as f:
                f.write(saved)
        runc("delete", "--force", "waiting")


@case
def profile_annotation_picks_any_profile():
    """io.airlock.profile lets a config pick any profile of the operator
    policy: a pod names the one the operator keeps for trusted work (here
    "admin", rw on a root-owned directory) and gets its bounds. The OCI
    runtime has no caller identity to grant profiles to (the request layer's
    grant_profile runs only with one, src/request/request.c), so the
    annotation must be refused unless the operator says which profiles a
    container may choose. Today the pod reads and changes the file."""
    v = victim_dir("victim-profile")
    op = os.path.join(TMP, "operator-profiles.json")
    with open(op, "w") as f:
        json.dump({"version": 1, "profiles": {
            "default": {"filesystem": {"ro": [os.path.join(TMP, "bundles-only")]}},
            "admin": {"filesystem": {"rw": [v]}}}}, f)
    b = bundle("profile", ["/bin/sh", "-c", "cat /v/secret; echo changed > /v/secret"],
               mounts=[{"destination": "/v", "type": "bind", "source": v,
                        "options": ["rbind", "rw"]}],
               annotations={"io.airlock.profile": "admin"})
    r = run("profile", b, operator=op)
    diag("run: rc %d: %s" % (r.returncode, out(r)[:300]))
    expect(r.returncode != 0, "a pod chose the operator's \"admin\" profile")
    expect(read(os.path.join(v, "secret")) == "TOPSECRET\n",
           "the pod changed a file only the admin profile may write")


@case
def exec_client_killed_mid_exec():
    """The engine's `exec` killed while its process runs (a probe's
    timeout in containerd's shim, ^C on podman exec): the container must go
    on. Today its supervisor frees the exec's connection twice and dies
    ("double free or corruption"), and the container with it:
    src/oci/super.c on_conn frees the connection when its verb hangs up
    (conn_free, which only signals the exec), and exec_ended frees it again
    when the exec ends."""
    r = runc("create", "-b", bundle("probe", ["/bin/sleep", "60"]), "probe", detach=True)
    sup = None
    try:
        expect(r.returncode == 0, "create failed: %s" % out(r))
        sup = json.loads(runc("state", "probe").stdout)["pid"]
        expect(runc("start", "probe").returncode == 0, "start failed")
        x = subprocess.Popen([RUNC, "--root", os.path.join(TMP, "state"), "exec", "probe",
                              "/bin/sleep", "2"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Its exec started (the supervisor made its cgroup, exec-2: the
        # container's own process is exec-1), then the verb
        # is killed by its pid.
        ok = _wait(lambda: any(os.path.isdir(d + "/exec-2") for d in _cgroups_of(sup)), 20)
        x.kill()
        x.wait()
        expect(ok, "the exec did not start")
        # The exec's own end (2 s), and a second for the supervisor.
        _wait(lambda: False, 3.5)
        s = runc("state", "probe")
        got = json.loads(s.stdout) if s.returncode == 0 else {}
        diag("state after: %s; the supervisor's output: %s" %
             (got.get("status"), read(os.path.join(TMP, "create.out")).strip()[:200]))
        expect(got.get("status") == "running",
               "the container is %s after its exec's verb was killed" % got.get("status"))
    finally:
        runc("delete", "--force", "probe")
        if sup:
            _remove_cgroups(sup)


def _wait(pred, timeout):
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _cgroups_of(sup):
    """The run cgroups of the supervisor with pid sup, in every hierarchy
    (named PID-START-N under airlock/)."""
    found = []
    base = "/sys/fs/cgroup"
    for h in os.listdir(base):
        for parent in (os.path.join(base, h, "airlock"), os.path.join(base, h)):
            if not os.path.isdir(parent):
                continue
            for name in os.listdir(parent):
                if name.startswith("%d-" % sup):
                    found.append(os.path.join(parent, name))
    return found


def _remove_cgroups(sup):
    """A crashed supervisor's cgroups (empty once its sandbox is gone),
    removed deepest first."""
    for d in _cgroups_of(sup):
        for dirpath, _dirs, _files in sorted(os.walk(d), key=lambda t: -len(t[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def _end_orphans():
    """Supervisors this script started that delete could not find (their
    state.json removed by an attack): found by their command line naming
    this script's --root, told to end (SIGTERM) by pid."""
    mine = os.path.join(TMP, "state")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0].decode(errors="replace")) in (
                "airlock-runc", "airlock") and mine.encode() in argv:
            diag("ending a supervisor of ours left behind: pid %s" % pid)
            try:
                os.kill(int(pid), 15)
            except OSError:
                pass


# --- what held --------------------------------------------------------------


@case
def mountpoint_symlinks_stay_in_root():
    """Mount targets behind links in the image (absolute, relative with
    ../ past the top, a dangling /etc/resolv.conf) resolve inside the
    container's root (RESOLVE_IN_ROOT) and are refused when they lead
    nowhere: nothing is made outside the root."""
    root = os.path.join(TMP, "root-links")
    shutil.copytree(BUSYBOX, root, symlinks=True)
    os.symlink("/../../../../../../../.." + TMP + "/escape-abs", os.path.join(root, "abs"))
    os.symlink("../../../../../../../.." + TMP + "/escape-rel", os.path.join(root, "rel"))
    for dest in ("/abs/a/b", "/rel/a"):
        b = bundle("links", ["/bin/true"], root=root,
                   mounts=[{"destination": dest, "type": "tmpfs", "source": "tmpfs"}])
        r = run("links", b)
        diag("%s: rc %d: %s" % (dest, r.returncode, out(r)[:200]))
        expect(r.returncode != 0, "a mount at %s behind a dangling link ran" % dest)
    for e in ("escape-abs", "escape-rel"):
        expect(not os.path.exists(os.path.join(TMP, e)), "%s was made on the host" % e)


@case
def no_setuid_file_through_a_bind():
    """Even as the owner of a host directory (the hole above), the container
    cannot make a setuid file there: chmod with S_ISUID is refused by the
    seccomp allowlist (src/policy/seccomp.c)."""
    d = os.path.join(TMP, "suid-dir")
    os.mkdir(d, 0o755)
    b = bundle("suid", ["/bin/sh", "-c", "cp /bin/busybox /d/x; chmod 4755 /d/x"],
               mounts=[{"destination": "/d", "type": "bind", "source": d,
                        "options": ["rbind", "rw"]}])
    r = run("suid", b)
    diag("run: rc %d: %s" % (r.returncode, out(r)[:200]))
    x = os.path.join(d, "x")
    expect(not (os.path.exists(x) and os.stat(x).st_mode & 0o4000),
           "a setuid file was made on the host")


def main():
    global RUNC, TMP, BUSYBOX
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    RUNC = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    if os.geteuid() != 0:
        print("1..0 # SKIP the OCI runtime runs as root")
        return 0
    own_mount_ns()
    TMP = tempfile.mkdtemp(prefix="airlock-oci-attacks-")
    os.chmod(TMP, 0o755)
    failed = 0
    try:
        BUSYBOX = os.path.join(TMP, "busybox")
        images.busybox_root(BUSYBOX)
        cases = [c for c in CASES if not only or any(o in c.__name__ for o in only)]
        print("1..%d" % len(cases), flush=True)
        for i, fn in enumerate(cases, 1):
            try:
                fn()
                print("ok %d - %s" % (i, fn.__name__), flush=True)
            except AssertionError as e:
                failed += 1
                print("not ok %d - %s" % (i, fn.__name__), flush=True)
                diag(str(e))
                diag(fn.__doc__)
            except Exception as e:  # a bug in the test or an unexpected host state
                failed += 1
                print("not ok %d - %s" % (i, fn.__name__), flush=True)
                diag("%s: %s" % (type(e).__name__, e))
    finally:
        _end_orphans()
        left = os.listdir(os.path.join(TMP, "state")) if os.path.isdir(
            os.path.join(TMP, "state")) else []
        if left:
            diag("state left behind: %s" % left)
        shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
