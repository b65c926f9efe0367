#!/usr/bin/python3
"""A hostile image and config against a container in a guest
(io.airlock.backend=microvm, docs/oci.md), judged from the host (TAP).

usage: oci_microvm.py AIRLOCK_RUNC [CASE-SUBSTRING...]

Each case makes a bundle under one temporary directory (a busybox root from
tests/oci/images.py, with what the case plants in it), runs it with
`AIRLOCK_RUNC --root TMP/state --log TMP/ID.log run`, and judges by what
comes out: the container's own output (what a helper program the image
planted wrote, if it ever ran), the runtime's log, what reached the guest.
Two static helpers are compiled with cc: one calls socket() with families
no guest kernel has built in (the kernel would ask for a module), one
request_key() (the kernel would start /sbin/request-key). No network is
used; nothing is a bomb. Every container is deleted and the temporary
directory removed at the end, even on failure; the one tmpfs mounted into
a root is in this script's own mount namespace.

The cases come from an attack review of the feature; each failed before
its fix:
- the image's /sbin/modprobe and /sbin/request-key, which the guest kernel
  would start as its root with every capability (PID 1 shared its root
  with the kernel's threads);
- a config with no readonlyPaths (an engine that unmasks /proc/sys): the
  container's uid 0 writing the guest kernel's core_pattern;
- a link in the image at an engine's file target into /proc (the agent
  writing through it into /proc/sysrq-trigger, or mounting over a kernel
  file), and a FIFO there (the agent's setup held until the boot
  deadline, with no word of why);
- a mount inside the bundle's root, which mkfs.ext4 copied into the guest.
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
from harness import Skip, Suite, expect, own_mount_ns  # noqa: E402

TIMEOUT = 180
HELPERS = {
    "sock": "#include <sys/socket.h>\n#include <stdlib.h>\n"
            "int main(int c, char **v) { for (int i = 1; i < c; i++)"
            " socket(atoi(v[i]), SOCK_DGRAM, 0); return 0; }\n",
    "rk": "#include <unistd.h>\n#include <sys/syscall.h>\n"
          "int main(void) { syscall(SYS_request_key, \"user\", \"al:x\", \"callout\", -2);"
          " return 0; }\n",
}
# What a planted helper writes if the kernel ever starts it.
SPY = ("#!/bin/sh\necho \"helper-ran $0\" >> /tmp/spy\n"
       "grep -E '^(Uid|CapEff)' /proc/self/status >> /tmp/spy\nchmod 644 /tmp/spy\n")


class Env:
    def __init__(self, runtime):
        self.runtime = runtime
        self.base = tempfile.mkdtemp(prefix="airlock-sec-oci-microvm-")
        self.state = os.path.join(self.base, "state")
        self.ids = []
        self.images_before = root_images()

    def helper(self, name):
        out = os.path.join(self.base, name)
        if not os.path.exists(out):
            with open(out + ".c", "w") as f:
                f.write(HELPERS[name])
            r = subprocess.run(["cc", "-static", "-O1", "-o", out, out + ".c"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            if r.returncode != 0:
                raise Skip("cc cannot build a static helper: %s" % r.stdout.decode()[-200:])
        return out

    def bundle(self, name, script, uid=0, mounts=(), readonly_paths=None):
        """A bundle whose root is a busybox root (podman's mounts from
        `spec`, a writable root) running script in a guest as uid."""
        b = os.path.join(self.base, name)
        root = images.busybox_root(os.path.join(b, "rootfs"))
        r = subprocess.run([self.runtime, "spec", "--bundle", b], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        expect(r.returncode == 0, "spec failed: %s" % r.stderr)
        with open(os.path.join(b, "config.json")) as f:
            cfg = json.load(f)
        cfg["process"].update(terminal=False, args=["/bin/sh", "-c", script],
                              user={"uid": uid, "gid": uid})
        cfg["root"] = {"path": root, "readonly": False}
        cfg["annotations"] = {"io.airlock.backend": "microvm", "io.airlock.timeout": "120"}
        cfg["mounts"] = [m for m in cfg["mounts"] if m["destination"] != "/tmp"]
        cfg["mounts"] += list(mounts)
        if readonly_paths is not None:
            cfg["linux"]["readonlyPaths"] = readonly_paths
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(cfg, f)
        return b, root

    def run(self, b, cid):
        """(exit code, stdout and stderr, the runtime's log)."""
        self.ids.append(cid)
        log = os.path.join(self.base, cid + ".log")
        r = subprocess.run([self.runtime, "--root", self.state, "--log", log, "run", "--bundle",
                            b, cid], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT)
        out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
        logged = open(log).read() if os.path.exists(log) else ""
        return r.returncode, out, logged

    def close(self):
        for cid in self.ids:
            subprocess.run([self.runtime, "--root", self.state, "delete", "--force", cid],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        shutil.rmtree(self.base, ignore_errors=True)


VM_ROOTS = "/var/lib/airlock/vm-run"  # guest-root.c's root images


def root_images():
    return set(os.listdir(VM_ROOTS)) if os.path.isdir(VM_ROOTS) else set()


class MicrovmSuite(Suite):
    def nothing_left_behind(self, env):
        """No root image (or its mount point) the cases' containers made is
        left on the host: none that was not there before."""
        left = root_images() - env.images_before
        expect(not left, "root images left in %s: %s" % (VM_ROOTS, sorted(left)))


suite = MicrovmSuite()
case = suite.case


def plant(root, path, text, mode=0o755):
    """A new file at path in root. What the root has there is removed
    first, never written through: busybox's /sbin/modprobe is a link to
    /bin/busybox, which on the host is the host's."""
    p = root + path
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if os.path.lexists(p):
        os.unlink(p)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(p, mode)


@case
def image_modprobe_never_runs(env):
    """An unprivileged container's socket() of families the guest kernel
    would load a module for: the image's /sbin/modprobe never runs (the
    kernel loads no module once the agent set up, and its helpers find
    their programs in the initramfs, not in the container's root)."""
    b, root = env.bundle("modprobe", "/sock 5 3 9 40; sleep 1; cat /tmp/spy 2>/dev/null; true",
                         uid=1000)
    shutil.copy(env.helper("sock"), root + "/sock")
    plant(root, "/sbin/modprobe", SPY)
    rc, out, log = env.run(b, "modprobe")
    expect(rc == 0, "the container failed (%d): %s %s" % (rc, out, log))
    expect("helper-ran" not in out, "the image's /sbin/modprobe ran in the guest:\n" + out)


@case
def image_request_key_never_runs(env):
    """request_key(2) from an unprivileged container: the image's
    /sbin/request-key (a path fixed in the kernel) never runs."""
    b, root = env.bundle("reqkey", "/rk; sleep 1; cat /tmp/spy 2>/dev/null; true", uid=1000)
    shutil.copy(env.helper("rk"), root + "/rk")
    plant(root, "/sbin/request-key", SPY)
    rc, out, log = env.run(b, "reqkey")
    expect(rc == 0, "the container failed (%d): %s %s" % (rc, out, log))
    expect("helper-ran" not in out, "the image's /sbin/request-key ran in the guest:\n" + out)


@case
def proc_sys_read_only_without_config(env):
    """A config with no readonlyPaths: the container's uid 0 (no
    capability, but the guest's owner of /proc/sys) still cannot set the
    guest kernel's core_pattern (a pipe to an image file would run it with
    every capability) nor write /proc/sysrq-trigger."""
    b, _ = env.bundle("procsys",
                      "echo '|/evil' > /proc/sys/kernel/core_pattern 2>/dev/null;"
                      " cat /proc/sys/kernel/core_pattern;"
                      " echo h > /proc/sysrq-trigger 2>/dev/null && echo sysrq-written; true",
                      readonly_paths=[])
    rc, out, log = env.run(b, "procsys")
    expect(rc == 0, "the container failed (%d): %s %s" % (rc, out, log))
    expect("|/evil" not in out and "sysrq-written" not in out,
           "the container wrote the guest kernel's settings:\n" + out)


def hostname_bind(env, name, content):
    src = os.path.join(env.base, name)
    with open(src, "w") as f:
        f.write(content)
    return {"destination": "/etc/hostname", "type": "bind", "source": src,
            "options": ["rbind", "rw"]}


@case
def link_into_proc_at_mount_target(env):
    """The image's /etc/hostname links to /proc/sysrq-trigger and the
    config binds a host file there writable (as podman does): the agent
    replaces the link with the copy and writes nothing through it ("c"
    would panic the guest kernel): the container runs and reads "c" there.
    The image's /etc/motd links to /proc/sys/kernel/hostname and the config
    binds a host file there read-only: the setup is refused, the runtime's
    log naming the target (a mount there would shadow a kernel file)."""
    b, root = env.bundle("sysrq", "cat /etc/hostname; [ -L /etc/hostname ] || echo no-link",
                         mounts=[hostname_bind(env, "hostname-c", "c\n")])
    if os.path.lexists(root + "/etc/hostname"):
        os.unlink(root + "/etc/hostname")
    os.symlink("/proc/sysrq-trigger", root + "/etc/hostname")
    rc, out, log = env.run(b, "sysrq")
    expect(rc == 0 and out.split() == ["c", "no-link"],
           "the copy did not replace the link (%d): %r %r" % (rc, out, log))
    src = os.path.join(env.base, "motd-src")
    with open(src, "w") as f:
        f.write("motd\n")
    b, root = env.bundle("motd", "echo container-ran", mounts=[
        {"destination": "/etc/motd", "type": "bind", "source": src, "options": ["rbind", "ro"]}])
    os.symlink("/proc/sys/kernel/hostname", root + "/etc/motd")
    rc, out, log = env.run(b, "motd")
    expect(rc != 0 and "container-ran" not in out, "the container ran (%d): %s" % (rc, out))
    expect("/etc/motd" in log and "/proc/sys/kernel/hostname" in log,
           "the runtime's log does not name the target and the link: %r" % log)


@case
def magic_links_refused(env):
    """Paths through /proc's magic links lead out of the container's root
    (/proc/2/root: the kernel threads' root, the initramfs): the image's
    /data -> /proc/2/root under a bind the config makes at /data/sbin/x
    (which would put a file where the kernel looks for its helpers), and a
    config's maskedPaths entry /proc/1/root/etc: each refuses the setup,
    the runtime's log naming it."""
    src = os.path.join(env.base, "helper-src")
    with open(src, "w") as f:
        f.write("#!/bin/sh\n")
    b, root = env.bundle("magic", "echo container-ran", mounts=[
        {"destination": "/data/sbin/x", "type": "bind", "source": src, "options": ["rbind", "ro"]}])
    os.symlink("/proc/2/root", root + "/data")
    rc, out, log = env.run(b, "magic")
    expect(rc != 0 and "container-ran" not in out, "the container ran (%d): %s" % (rc, out))
    expect("/data/sbin/x" in log and "/proc/2/root" in log,
           "the runtime's log does not name the target and the link: %r" % log)
    b, _ = env.bundle("magicmask", "echo container-ran")
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["linux"]["maskedPaths"] = cfg["linux"].get("maskedPaths", []) + ["/proc/1/root/etc"]
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    rc, out, log = env.run(b, "magicmask")
    expect(rc != 0 and "container-ran" not in out, "the container ran (%d): %s" % (rc, out))
    expect("/proc/1/root/etc" in log and "link of /proc" in log,
           "the runtime's log does not name the path: %r" % log)


@case
def fifo_at_mount_target(env):
    """A FIFO in the image where the config binds a file: refused at once,
    the runtime's log naming it, never a setup held until the boot
    deadline."""
    b, root = env.bundle("fifo", "echo container-ran",
                         mounts=[hostname_bind(env, "hostname-h", "h\n")])
    os.mkfifo(root + "/etc/hostname")
    rc, out, log = env.run(b, "fifo")
    expect(rc != 0 and "container-ran" not in out, "the container ran (%d): %s" % (rc, out))
    expect("copying to /etc/hostname" in log, "the runtime's log does not name it: %r" % log)
    expect("did not boot" not in log, "the setup was held to the deadline: %r" % log)


@case
def mount_inside_root_not_copied(env):
    """A tmpfs mounted inside the bundle's root (the engine's business, or
    an accident): mkfs copies the root's own file system only, so the
    file on that mount never reaches the guest."""
    b, root = env.bundle("xdev", "cat /m/host-secret 2>/dev/null; ls /m; true")
    os.makedirs(root + "/m")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "al-xdev", root + "/m"],
                   check=True)
    try:
        with open(root + "/m/host-secret", "w") as f:
            f.write("host-only\n")
        rc, out, log = env.run(b, "xdev")
    finally:
        subprocess.run(["umount", root + "/m"], check=True)
    expect(rc == 0, "the container failed (%d): %s %s" % (rc, out, log))
    expect("host-only" not in out and "host-secret" not in out,
           "a mount inside the root was copied to the guest:\n" + out)


def main():
    if len(sys.argv) < 2:
        print("usage: %s AIRLOCK_RUNC [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        return 2
    runtime = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (a container's own root)")
        return 0
    r = subprocess.run([runtime.replace("airlock-runc", "airlock"), "backends", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    mv = [b for b in json.loads(r.stdout or b"{}").get("backends", [])
          if b.get("name") == "microvm"]
    if not mv or not mv[0].get("usable"):
        print("1..0 # SKIP the microvm backend is not usable here: %s"
              % (mv[0].get("why") if mv else "none"))
        return 0
    own_mount_ns()
    env = Env(runtime)
    try:
        return suite.run(env, only=sys.argv[2:])
    finally:
        env.close()


if __name__ == "__main__":
    sys.exit(main())
