#!/usr/bin/python3
"""Test images for the OCI tests, built from this host's own files (CI has
no registry to pull from), and the private podman and containerd stores
they are imported into.

usage: images.py busybox|python DEST     make the root directory at DEST
       images.py selftest                build both, import them into a
                                         private podman and containerd,
                                         run /bin/true in each, clean up

Two roots:
  busybox  Debian's busybox-static (/bin/busybox) with every applet as a
           link, /etc/passwd and /etc/group (root, nobody), /tmp.
  python   the busybox root plus python3: the interpreter, the standard
           library of libpython3.11-minimal and libpython3.11-stdlib
           (dpkg's file lists) without its tests, GUI and packaging
           parts, and every shared library those need (ldd). Enough for
           `python3 -c 'import json, socket, urllib.request'`.

Stores (each under a directory the caller owns and removes; nothing touches
the machine's default podman or containerd storage):
  Podman      podman with --root, --runroot, --tmpdir, a storage.conf and
              a containers.conf of its own (CONTAINERS_STORAGE_CONF,
              CONTAINERS_CONF), storage driver overlay; images by
              `podman import` of the root's tar.
  Containerd  a containerd daemon on its own config, root, state and
              socket (no CRI plugin), started here and stopped by its pid;
              images by `ctr images import` of an OCI archive made here.

Python 3 standard library only.
"""

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

BUSYBOX = "/bin/busybox"
PY_VERSION = "3.11"
PY_PACKAGES = ("libpython%s-minimal" % PY_VERSION, "libpython%s-stdlib" % PY_VERSION)
PY_LIB = "/usr/lib/python%s" % PY_VERSION
# Parts of the standard library no test imports: its own tests, the GUI,
# packaging and 2to3. Dropping them takes the root from ~60 to ~25 MB.
PY_SKIP = ("test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
           "distutils", "config-%s-x86_64-linux-gnu" % PY_VERSION, "__pycache__")
PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
SH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def _run(argv, timeout=120, **kw):
    """argv's CompletedProcess; a nonzero exit raises with its stderr."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       **kw)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(map(str, argv)), r.returncode,
                                                  r.stderr.decode(errors="replace").strip()))
    return r


def _copy_host_file(root, path):
    """Copy host file path (following links for its content) to the same path
    under root; the links on the way (/usr/bin/python3 ->) stay links."""
    dest = os.path.join(root, path.lstrip("/"))
    if os.path.lexists(dest):
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.islink(path):
        target = os.readlink(path)
        os.symlink(target, dest)
        _copy_host_file(root, os.path.normpath(os.path.join(os.path.dirname(path), target)))
    else:
        shutil.copy2(path, dest)


def busybox_root(dest):
    """Make the busybox root at dest (a directory that may exist, empty)."""
    if not os.access(BUSYBOX, os.X_OK):
        raise RuntimeError("%s is missing: install busybox-static" % BUSYBOX)
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "tmp", "root", "proc", "sys", "dev"):
        os.makedirs(os.path.join(dest, d), exist_ok=True)
    os.chmod(os.path.join(dest, "tmp"), 0o1777)
    shutil.copy2(BUSYBOX, os.path.join(dest, "bin/busybox"))
    applets = _run([BUSYBOX, "--list-full"]).stdout.decode().split()
    for a in applets:
        link = os.path.join(dest, a)
        if a == "bin/busybox" or os.path.lexists(link):
            continue
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink("/bin/busybox", link)
    with open(os.path.join(dest, "etc/passwd"), "w") as f:
        f.write(PASSWD)
    with open(os.path.join(dest, "etc/group"), "w") as f:
        f.write(GROUP)
    return dest


def _libs_of(path):
    """The shared libraries ldd says path needs (host paths)."""
    r = subprocess.run(["ldd", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       timeout=30)
    libs = []
    for line in r.stdout.decode().splitlines():
        parts = line.split()
        if "=>" in parts and parts[parts.index("=>") + 1].startswith("/"):
            libs.append(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])  # the loader itself
    return libs


def python_root(dest):
    """Make the python root at dest: the busybox root plus python3."""
    busybox_root(dest)
    binary = os.path.realpath("/usr/bin/python%s" % PY_VERSION)
    _copy_host_file(dest, "/usr/bin/python%s" % PY_VERSION)
    os.symlink("python%s" % PY_VERSION, os.path.join(dest, "usr/bin/python3"))
    elfs = [binary]
    listed = _run(["dpkg", "-L"] + list(PY_PACKAGES)).stdout.decode().splitlines()
    for path in listed:
        if not path.startswith(PY_LIB + "/"):
            continue
        rel = path[len(PY_LIB) + 1:].split("/")
        if any(part in PY_SKIP for part in rel) or not os.path.isfile(path):
            continue
        _copy_host_file(dest, path)
        if path.endswith(".so"):
            elfs.append(path)
    seen = set()
    for elf in elfs:
        for lib in _libs_of(elf):
            if lib not in seen:
                seen.add(lib)
                _copy_host_file(dest, lib)
    return dest


def make_root(kind, dest):
    """busybox_root or python_root by name."""
    if kind == "busybox":
        return busybox_root(dest)
    if kind == "python":
        return python_root(dest)
    raise ValueError("unknown image %r (busybox or python)" % kind)


def _tar_filter(info):
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def root_tar(root, tar_path):
    """root as an uncompressed tar owned by 0:0 (a layer, or podman import's
    input)."""
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(os.listdir(root)):
            t.add(os.path.join(root, name), arcname=name, filter=_tar_filter)
    return tar_path


def _blob(blobs, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest


def oci_archive(root, name, archive_path, cmd=("/bin/sh",)):
    """root as a one-layer OCI image layout in a tar at archive_path, named
    name (e.g. localhost/al-busybox:latest) for ctr images import."""
    work = tempfile.mkdtemp(prefix="al-oci-layout-")
    try:
        blobs = os.path.join(work, "blobs", "sha256")
        os.makedirs(blobs)
        raw = root_tar(root, os.path.join(work, "layer.tar"))
        with open(raw, "rb") as f:
            layer = f.read()
        os.unlink(raw)
        diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
        gz = gzip.compress(layer, compresslevel=1, mtime=0)
        layer_digest = _blob(blobs, gz)
        config = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=" + SH_PATH], "Cmd": list(cmd)},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }).encode()
        config_digest = _blob(blobs, config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": layer_digest, "size": len(gz)}],
        }).encode()
        manifest_digest = _blob(blobs, manifest)
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest, "size": len(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}]}
        with open(os.path.join(work, "index.json"), "w") as f:
            json.dump(index, f)
        with open(os.path.join(work, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        with tarfile.open(archive_path, "w") as t:
            for n in ("oci-layout", "index.json", "blobs"):
                t.add(os.path.join(work, n), arcname=n, filter=_tar_filter)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return archive_path


def _unmount_below(path):
    """Unmount every mount at or below path, deepest first (lazily, so that
    a busy one does not stop the cleanup)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [l.split()[4] for l in f]
    for p in sorted((p for p in points if p == path or p.startswith(path + "/")),
                    key=len, reverse=True):
        subprocess.run(["umount", "-l", p], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)


def mounts_below(path):
    """The mount points at or below path in our mount table."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [l.split()[4] for l in f]
    return [p for p in points if p == path or p.startswith(path + "/")]


class Podman:
    """podman on a private store under base (see the module doc).

    ulimits: the default_ulimits of the test containers.conf (this machine's
    root lacks CAP_SYS_RESOURCE, so podman's defaults of 1048576 open files
    fail with every runtime)."""

    def __init__(self, base, runtime=None, ulimits=("nofile=1024:1024", "nproc=1024:1024")):
        self.base = base
        self.runtime = runtime
        self.root = os.path.join(base, "storage")
        self.runroot = os.path.join(base, "run")
        self.tmpdir = os.path.join(base, "libpod-tmp")
        for d in (self.root, self.runroot, self.tmpdir, os.path.join(base, "net")):
            os.makedirs(d, exist_ok=True)
        self.storage_conf = os.path.join(base, "storage.conf")
        with open(self.storage_conf, "w") as f:
            f.write('[storage]\ndriver = "overlay"\nrunroot = "%s"\ngraphroot = "%s"\n'
                    % (self.runroot, self.root))
        self.containers_conf = os.path.join(base, "containers.conf")
        with open(self.containers_conf, "w") as f:
            f.write("[containers]\n"
                    "default_ulimits = [%s]\n"
                    'netns = "none"\n'
                    "[engine]\n"
                    'cgroup_manager = "cgroupfs"\n'
                    'events_logger = "file"\n'
                    'events_logfile_path = "%s"\n'
                    'tmp_dir = "%s"\n'
                    "[network]\n"
                    'network_config_dir = "%s"\n'
                    % (", ".join('"%s"' % u for u in ulimits),
                       os.path.join(base, "events.log"), self.tmpdir,
                       os.path.join(base, "net")))
        self.env = dict(os.environ, CONTAINERS_CONF=self.containers_conf,
                        CONTAINERS_STORAGE_CONF=self.storage_conf,
                        CONTAINERS_REGISTRIES_CONF=os.path.join(base, "registries.conf"))
        with open(self.env["CONTAINERS_REGISTRIES_CONF"], "w") as f:
            f.write("unqualified-search-registries = []\n")

    def argv(self, *args):
        a = ["podman", "--root", self.root, "--runroot", self.runroot, "--tmpdir", self.tmpdir,
             "--storage-driver", "overlay", "--cgroup-manager", "cgroupfs",
             "--events-backend", "file"]
        if self.runtime:
            a += ["--runtime", self.runtime]
        return a + list(args)

    def run(self, *args, timeout=120, check=False, input=None):
        """One podman command: CompletedProcess (stdout, stderr bytes)."""
        r = subprocess.run(self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL,
                           timeout=timeout, env=self.env)
        if check and r.returncode != 0:
            raise RuntimeError("podman %s exited %d: %s" % (" ".join(args), r.returncode,
                                                             r.stderr.decode(errors="replace")))
        return r

    def import_root(self, root, tag):
        """Import root as image tag (localhost/NAME:latest)."""
        tar = root_tar(root, os.path.join(self.base, os.path.basename(tag) + ".tar"))
        try:
            self.run("import", "--change", "ENV=PATH=" + SH_PATH, "--change", "CMD=/bin/sh",
                     tar, tag, check=True, timeout=300)
        finally:
            os.unlink(tar)
        return tag

    def close(self):
        """Remove every container of this store and the store itself (its
        overlay mounts unmounted first)."""
        try:
            self.run("rm", "--all", "--force", "--time", "0", timeout=120)
        except (OSError, subprocess.SubprocessError):
            pass
        try:
            self.run("rmi", "--all", "--force", timeout=120)
        except (OSError, subprocess.SubprocessError):
            pass
        _unmount_below(self.base)


# Where containerd 1.6's runc v2 shim puts its socket (s/), whatever the
# daemon's state directory.
SHIM_RUN_DIR = "/run/containerd"
CONTAINERD_CONFIG = """version = 2
root = "{root}"
state = "{state}"
disabled_plugins = [{cri}"io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[debug]
  address = "{sock}.debug"
[metrics]
  address = ""
[plugins."io.containerd.runtime.v1.linux"]
  shim_debug = false
{runtimes}"""


class Containerd:
    """A private containerd daemon under base (see the module doc), started
    by start() and stopped by close() through its pid. runtimes: extra TOML
    appended to the config (run_oci_containerd.py's runtime handlers)."""

    NAMESPACE = "airlock-test"

    def __init__(self, base, snapshotter="overlayfs", runtimes="", cri=None):
        """cri: the CRI plugin's TOML (run_oci_cri.py); None: no CRI plugin.
        With it, images go to the CRI's namespace, k8s.io."""
        self.base = base
        self.runtimes = runtimes
        self.cri = cri
        self.namespace = "k8s.io" if cri is not None else self.NAMESPACE
        self.snapshotter = snapshotter
        self.root = os.path.join(base, "root")
        self.state = os.path.join(base, "state")
        self.sock = os.path.join(base, "containerd.sock")
        self.config = os.path.join(base, "config.toml")
        self.log = os.path.join(base, "containerd.log")
        self.proc = None
        # The shim's socket directory (see run_flags()): removed at close
        # when this daemon's run made it and it is empty again.
        self.made_run_dir = not os.path.exists(SHIM_RUN_DIR)

    def start(self, timeout=30):
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(self.state, exist_ok=True)
        with open(self.config, "w") as f:
            f.write(CONTAINERD_CONFIG.format(
                root=self.root, state=self.state, sock=self.sock,
                cri="" if self.cri is not None else '"io.containerd.grpc.v1.cri", ',
                runtimes=self.runtimes + (self.cri or "")))
        logf = open(self.log, "wb")
        self.proc = subprocess.Popen(["containerd", "--config", self.config], stdout=logf,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("containerd exited %d at start: %s"
                                   % (self.proc.returncode, self.log_tail()))
            if os.path.exists(self.sock) and self.ctr("version", check=False).returncode == 0:
                return self
            time.sleep(0.1)
        raise RuntimeError("containerd did not answer on %s within %ds: %s"
                           % (self.sock, timeout, self.log_tail()))

    def log_tail(self, n=2000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def ctr_argv(self, *args):
        return ["ctr", "--address", self.sock, "--namespace", self.namespace] + list(args)

    def ctr(self, *args, timeout=120, check=True, input=None):
        r = subprocess.run(self.ctr_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("ctr %s exited %d: %s" % (" ".join(args), r.returncode,
                                                          r.stderr.decode(errors="replace")))
        return r

    def run_flags(self):
        """Flags of `ctr run` that keep its FIFOs and the runtime's state
        under base (ctr and the runc shim default to /run/containerd/fifo
        and /run/containerd/runc/NAMESPACE). The runc v2 shim of 1.6 still
        puts its socket in /run/containerd/s, removed when it ends."""
        return ["--fifo-dir", os.path.join(self.base, "fifo"),
                "--runc-root", os.path.join(self.base, "runc-root")]

    def import_root(self, root, name, cmd=("/bin/sh",)):
        """Import root as image name (localhost/NAME:latest), unpacked for
        the snapshotter; cmd: the image's Cmd."""
        archive = oci_archive(root, name, os.path.join(self.base, "image.tar"), cmd)
        try:
            self.ctr("images", "import", "--snapshotter", self.snapshotter, archive, timeout=300)
        finally:
            os.unlink(archive)
        return name

    def close(self):
        """Kill and delete every task and container, stop the daemon (SIGTERM,
        then SIGKILL after 10 s) by its pid, unmount what is below base."""
        if self.proc and self.proc.poll() is None:
            try:
                ids = self.ctr("containers", "list", "--quiet", check=False, timeout=30)
                for cid in ids.stdout.decode().split():
                    self.ctr("tasks", "kill", "--signal", "SIGKILL", cid, check=False, timeout=30)
                    self.ctr("tasks", "delete", "--force", cid, check=False, timeout=30)
                    self.ctr("containers", "delete", cid, check=False, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        _unmount_below(self.base)
        # The parent of the containers' cgroups (ctr's cgroupsPath is
        # /NAMESPACE/ID), made by the runtime and left, as runc leaves it:
        # removed where empty.
        for top in ["/sys/fs/cgroup"] + [os.path.join("/sys/fs/cgroup", c)
                                         for c in os.listdir("/sys/fs/cgroup")]:
            try:
                os.rmdir(os.path.join(top, self.NAMESPACE))
            except OSError:
                pass
        if self.made_run_dir:
            for d in (os.path.join(SHIM_RUN_DIR, "s"), os.path.join(SHIM_RUN_DIR, "fifo"),
                      SHIM_RUN_DIR):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


def selftest():
    """Build both roots, import them into both stores, run /bin/true and a
    python import in each; print what took how long."""
    base = tempfile.mkdtemp(prefix="al-images-")
    pod = ctd = None
    try:
        t0 = time.monotonic()
        bb = busybox_root(os.path.join(base, "busybox"))
        py = python_root(os.path.join(base, "python"))
        size = _run(["du", "-sm", py]).stdout.split()[0].decode()
        print("roots made in %.1fs (python root %s MB)" % (time.monotonic() - t0, size))
        pod = Podman(os.path.join(base, "podman"), runtime=shutil.which("runc"))
        pod.import_root(bb, "localhost/al-busybox")
        pod.import_root(py, "localhost/al-python")
        r = pod.run("run", "--rm", "--network", "none", "localhost/al-python", "python3", "-c",
                    "import json, socket, urllib.request; print('py ok')", check=True)
        print("podman: %s" % r.stdout.decode().strip())
        ctd = Containerd(os.path.join(base, "containerd")).start()
        ctd.import_root(bb, "localhost/al-busybox:latest")
        r = ctd.ctr("run", "--rm", *ctd.run_flags(), "localhost/al-busybox:latest",
                    "al-selftest", "/bin/sh", "-c", "echo ctr ok")
        print("containerd: %s" % r.stdout.decode().strip())
    finally:
        if pod:
            pod.close()
        if ctd:
            ctd.close()
        left = mounts_below(base)
        shutil.rmtree(base, ignore_errors=True)
        if left:
            print("mounts left below %s: %s" % (base, left), file=sys.stderr)
            return 1
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) != 3 or argv[1] not in ("busybox", "python"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    make_root(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
