#!/usr/bin/python3
"""Kubernetes' path to an OCI runtime, without a kubelet (TAP): the calls a
kubelet makes for a pod with `runtimeClassName: airlock`, made here on
containerd's CRI plugin, whose `runtimes.airlock` handler runs the runc v2
shim with RUNTIME as its BinaryName and passes the pod's `io.airlock.*`
annotations (`pod_annotations`).

usage: run_oci_cri.py RUNTIME [NAME] [CASE-SUBSTRING...]

The test starts a containerd of its own with the CRI plugin (tests/oci/
images.py; its own root, state, socket, runtime root, log directory, the
stream server on 127.0.0.1 at a port the kernel picks), speaks CRI to it
with tests/oci/cri.py (python3-grpcio), and imports two images made from
this host's files into the CRI's namespace: the busybox root, and the same
root as the pods' sandbox image (its command sleeps). The pods' network is
a CNI plugin the test writes itself (type al-net, also serving `loopback`):
in the namespace the CRI made for the pod it adds eth0 with 192.0.2.2/24
(TEST-NET-1, never reached) and a default route through it, the shape of
an engine's pod network; eth0 is one end of a veth pair whose other end
is in the same namespace, without an address and with forwarding off, so
nothing sent there leaves the namespace; it records each namespace path
it was given.

  - a pod runs: its sandbox (pause) container under RUNTIME too, in a
    network namespace of airlock's own (its supervisor in the pod's, where
    containerd finds it for the app containers), so the pod's namespace
    holds no airlock table until the app container runs in it;
  - the app container's egress by the pod's annotations: an allowed name
    mapped to the test's HTTP server on 127.0.0.1 answers (ExecSync), a
    denied one gets nothing and the server sees no request for it; the
    pod's namespace holds airlock's tables while the container runs, and
    none once it is removed;
  - a container's memory limit (as the kubelet passes it) is its cgroup's
    at the cgroupsPath the CRI gives (the pod's cgroup parent);
  - init containers: each reaches the server, and its tables leave the
    pod's namespace when it exits, so the next one and the app container
    can run there;
  - ExecSync's exit code and output; a container's own exit code and its
    log (CRI's log format) after it ends;
  - after the pod is stopped and removed: no process, mount, cgroup or
    network namespace of it, and the CRI lists no pod.

Skipped with the reason when containerd is missing, the test is not root,
python3-grpcio is missing, or the daemon does not start here.
"""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oci"))

import images  # noqa: E402
from harness import LoopbackApi, Skip, Suite, children_of, expect, own_mount_ns, \
    wait_for  # noqa: E402

IMAGE = "localhost/al-busybox:latest"
PAUSE = "localhost/al-pause:latest"
HANDLER = "airlock"
CGROUP_PARENT = "/airlock-cri-test"
MiB = 1024 * 1024

# The pods' CNI plugin (see the module doc). CNI: the command in
# CNI_COMMAND, the network's config on stdin, the result on stdout.
CNI_PLUGIN = r'''#!/usr/bin/python3
import json, os, subprocess, sys
cmd, netns = os.environ.get("CNI_COMMAND"), os.environ.get("CNI_NETNS", "")
conf = json.load(sys.stdin) if cmd != "VERSION" else {}
ver = conf.get("cniVersion", "0.4.0")
if cmd == "VERSION":
    print(json.dumps({"cniVersion": "0.4.0",
                      "supportedVersions": ["0.3.0", "0.3.1", "0.4.0"]}))
    sys.exit(0)
def ns(*argv):
    subprocess.run(["nsenter", "--net=" + netns] + list(argv), check=True)
if cmd == "ADD":
    if conf.get("type") == "loopback":
        ns("ip", "link", "set", "lo", "up")
        res = {"cniVersion": ver, "interfaces": [{"name": "lo", "sandbox": netns}],
               "ips": [{"version": "4", "address": "127.0.0.1/8", "interface": 0}]}
    else:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns.log"), "a") as f:
            f.write(netns + "\n")
        ifname = os.environ.get("CNI_IFNAME", "eth0")
        ns("ip", "link", "add", ifname, "type", "veth", "peer", "name", "al-peer0")
        ns("ip", "addr", "add", "192.0.2.2/24", "dev", ifname)
        ns("ip", "link", "set", "al-peer0", "up")
        ns("ip", "link", "set", ifname, "up")
        ns("ip", "route", "add", "default", "dev", ifname)
        res = {"cniVersion": ver, "interfaces": [{"name": ifname, "sandbox": netns}],
               "ips": [{"version": "4", "address": "192.0.2.2/24", "interface": 0}],
               "routes": [{"dst": "0.0.0.0/0"}], "dns": {}}
    print(json.dumps(res))
sys.exit(0)
'''

CRI_CONFIG = """
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "{handler}"
"""
# One runtime handler (a RuntimeClass's handler): the runc v2 shim with the
# runtime as its BinaryName, its state under its own root.
CRI_HANDLER = """
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{handler}]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["io.airlock.*"]
      container_annotations = ["io.airlock.*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{handler}.options]
        BinaryName = "{runtime}"
        Root = "{runc_root}"
"""


class CriSuite(Suite):
    def nothing_left_behind(self, env):
        """After all cases: the CRI lists no pod and no container, no
        trace of any pod a case made (see pod_traces), no child process of
        the test but the daemon."""
        expect(not env.cri.list_pods(), "the CRI still lists pods: %s" % env.cri.list_pods())
        expect(not env.cri.list_containers(),
               "the CRI still lists containers: %s" % env.cri.list_containers())
        left = {p: t for p in env.pods for t in [pod_traces(env, p)] if t}
        expect(not left, "traces of the cases' pods remain: %s" % left)
        kids = [k for k in children_of(os.getpid()) if k != env.ctd.proc.pid]
        expect(not kids, "child processes of the test remain: %s" % kids)


suite = CriSuite()
case = suite.case


class Env:
    """The containerd with the CRI plugin, its images, CNI plugin and pods.
    handlers: runtime handler name -> runtime binary (default: HANDLER ->
    runtime); the first is the default one."""

    def __init__(self, runtime, name, handlers=None, prefix="airlock-e2e-oci-cri-"):
        import cri  # python3-grpcio: main() checks it first
        self.cri_mod = cri
        self.runtime = os.path.abspath(runtime)
        self.name = name
        self.base = tempfile.mkdtemp(prefix=prefix)
        self.cni_bin = os.path.join(self.base, "cni-bin")
        self.cni_conf = os.path.join(self.base, "cni-conf")
        self.logs = os.path.join(self.base, "pod-logs")
        self.runc_root = os.path.join(self.base, "runc-root")
        handlers = handlers or {HANDLER: self.runtime}
        toml = CRI_CONFIG.format(pause=PAUSE, handler=next(iter(handlers)),
                                 cni_bin=self.cni_bin, cni_conf=self.cni_conf)
        for h, rt in handlers.items():
            toml += CRI_HANDLER.format(handler=h, runtime=os.path.abspath(rt),
                                       runc_root=os.path.join(self.runc_root, h))
        self.ctd = images.Containerd(os.path.join(self.base, "containerd"), cri=toml)
        r = subprocess.run([self.runtime, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
        self.is_airlock = r.stdout.startswith(b"airlock")
        self.cri = None
        self.last_inode = None  # the egress pod's namespace
        self.pods = {}  # pod id -> its uid (metadata), for traces
        self.seq = 0

    def setup(self):
        t0 = time.monotonic()
        for d in (self.cni_bin, self.cni_conf, self.logs):
            os.makedirs(d)
        for name in ("al-net", "loopback"):
            with open(os.path.join(self.cni_bin, name), "w") as f:
                f.write(CNI_PLUGIN)
            os.chmod(os.path.join(self.cni_bin, name), 0o755)
        with open(os.path.join(self.cni_conf, "10-al-net.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": "al-net",
                       "plugins": [{"type": "al-net"}]}, f)
        self.ctd.start()
        bb = images.busybox_root(os.path.join(self.base, "busybox"))
        self.ctd.import_root(bb, IMAGE)
        self.ctd.import_root(bb, PAUSE, cmd=("/bin/sleep", "2147483647"))
        self.cri = self.cri_mod.Client(self.ctd.sock)
        # The CRI plugin answers, and on the API the client speaks.
        v = self.cri.version()
        if v["runtime_api_version"] != "v1":
            raise RuntimeError("the CRI answers %s" % v)
        return time.monotonic() - t0

    def netns_paths(self):
        try:
            with open(os.path.join(self.cni_bin, "netns.log")) as f:
                return f.read().split()
        except OSError:
            return []

    def run_pod(self, annotations=None, handler=HANDLER):
        """A pod as the kubelet asks for one with runtimeClassName airlock:
        (its id, its config, the network namespace the CNI plugin was
        given)."""
        self.seq += 1
        uid = "al-cri-%d-%d" % (os.getpid(), self.seq)
        log_dir = os.path.join(self.logs, uid)
        os.makedirs(log_dir)
        config = self.cri_mod.Client.pod_config(
            "pod%d" % self.seq, uid, log_dir, annotations=annotations,
            cgroup_parent="%s/%s" % (CGROUP_PARENT, uid))
        before = len(self.netns_paths())
        pod = self.cri.run_pod(config, handler)
        self.pods[pod] = uid
        paths = self.netns_paths()
        expect(len(paths) == before + 1, "the CNI plugin was not called once for the pod: %s"
               % paths[before:])
        return pod, config, paths[-1]

    def remove_pod(self, pod):
        """Stop and remove pod, once: a pod the CRI no longer lists is left
        alone."""
        try:
            if pod not in self.cri.list_pods():
                return
            self.cri.stop_pod(pod)
            self.cri.remove_pod(pod)
        except Exception as err:  # noqa: BLE001 - cleanup: say it, go on
            print("# removing pod %s: %s" % (pod, err))

    def close(self):
        if self.cri:
            for pod in list(self.pods):
                self.remove_pod(pod)
            self.cri.close()
        self.ctd.close()
        # The pods' pinned namespaces are the CRI's to remove; one a failed
        # case left (the daemon stopped first) is a file in /run/netns, and
        # a mount where the daemon's mount namespace is ours.
        for path in self.netns_paths():
            if os.path.exists(path):
                subprocess.run(["umount", "-l", path], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30)
                try:
                    os.unlink(path)
                except OSError as err:
                    print("# the pod namespace's pin %s: %s" % (path, err))
        # The pods' cgroup parent, made by the runtime's cgroupsPath (as runc
        # leaves it): removed where empty, deepest first.
        for top in cgroup_tops():
            for uid in self.pods.values():
                rmdir_quiet(os.path.join(top, CGROUP_PARENT.lstrip("/"), uid))
            rmdir_quiet(os.path.join(top, CGROUP_PARENT.lstrip("/")))
        left = images.mounts_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)
        return left


def rmdir_quiet(path):
    try:
        os.rmdir(path)
    except OSError:
        pass


def cgroup_tops():
    tops = ["/sys/fs/cgroup"]
    for c in os.listdir("/sys/fs/cgroup"):
        p = os.path.join("/sys/fs/cgroup", c)
        if os.path.isdir(p) and not os.path.islink(p):
            tops.append(p)
    return tops


def pod_traces(env, pod):
    """What of pod (its id; its uid names its cgroup parent) is on the
    host: processes naming its id (the shim, the runtime), mounts naming
    it, cgroups below its cgroup parent, its network namespace's pin."""
    found = []
    uid = env.pods[pod]
    for top in cgroup_tops():
        d = os.path.join(top, CGROUP_PARENT.lstrip("/"), uid)
        if os.path.isdir(d):
            kids = [k for k in os.listdir(d) if os.path.isdir(os.path.join(d, k))]
            if kids:
                found.append("cgroups %s/%s" % (d, kids))
    with open("/proc/self/mountinfo") as f:
        found += ["mount " + l.split()[4] for l in f if pod in l]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if pod.encode() in cmd:
                found.append("process %s: %s" % (p, cmd.replace(b"\0", b" ")[:200]))
    return found


def in_daemons_mounts(env, *argv):
    """argv run in containerd's mount namespace, where the CRI pins the
    pods' network namespaces (the suite's own, made after the daemon
    started, does not see mounts made there since)."""
    return subprocess.run(["nsenter", "--mount=/proc/%d/ns/mnt" % env.ctd.proc.pid, "--"]
                          + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=30)


def airlock_tables(env, netns):
    """The airlock tables in the namespace at netns ("ip airlock", ...)."""
    r = in_daemons_mounts(env, "nsenter", "--net=" + netns, "nft", "list", "tables")
    expect(r.returncode == 0, "nft list tables in %s: %s" % (netns, r.stderr.decode()))
    return sorted(" ".join(l.split()[1:]) for l in r.stdout.decode().splitlines()
                  if l.split()[-1:] == ["airlock"])


def wait_state(env, cid, state, timeout=30):
    ok = wait_for(lambda: env.cri.status(cid)["state"] == state, timeout, step=0.2)
    st = env.cri.status(cid)
    expect(ok, "container %s is not in state %d after %d s: %s" % (cid, state, timeout, st))
    return st


def in_egress_pod(env, checks):
    """checks(env, api, pod, config, netns) in a pod whose annotations
    allow api.test:PORT, mapped to the host's 127.0.0.1 where the test's
    API listens; the pod removed after, whatever happened. (pod, netns)."""
    if not env.is_airlock:
        raise Skip("%s is not airlock: egress annotations and tables are airlock's" % env.name)
    with LoopbackApi() as api:
        pod, config, netns = env.run_pod({
            "io.airlock.network.allow": "api.test:%d" % api.port,
            "io.airlock.network.hosts": "api.test=127.0.0.1"})
        try:
            checks(env, api, pod, config, netns)
        finally:
            env.remove_pod(pod)
    return pod, netns


def netns_inode(env, netns):
    r = in_daemons_mounts(env, "stat", "-L", "-c", "%i", netns)
    expect(r.returncode == 0, "stat %s: %s" % (netns, r.stderr.decode()))
    return int(r.stdout)


def in_netns(inode):
    """The processes whose network namespace has inode."""
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat("/proc/%s/ns/net" % p).st_ino == inode:
                    found.append(int(p))
            except OSError:
                pass
    return found


@case
def pod_egress_by_annotation(env):
    """A pod with `io.airlock.network.allow=api.test:PORT` and
    `io.airlock.network.hosts=api.test=127.0.0.1`: its sandbox container
    leaves the pod's namespace without airlock tables; its app container
    (sleep) puts them there, reaches the test's server as api.test (an
    ExecSync of wget), denied.test gets nothing, its memory limit is its
    cgroup's; once removed, its tables are gone; the pod then goes with
    nothing left."""
    pod, netns = in_egress_pod(env, pod_egress_checks)
    expect(in_daemons_mounts(env, "test", "-e", netns).returncode != 0,
           "the pod's namespace %s is still pinned" % netns)
    wait_for(lambda: not pod_traces(env, pod) and not in_netns(env.last_inode), 15, step=0.2)
    left = pod_traces(env, pod)
    expect(not left, "left 15 s after the pod was removed: %s" % left)
    left = in_netns(env.last_inode)
    expect(not left, "processes in the removed pod's namespace: %s" % left)


def pod_egress_checks(env, api, pod, config, netns):
    C, port = env.cri_mod, api.port
    env.last_inode = netns_inode(env, netns)
    expect(in_netns(env.last_inode), "no process is in the pod's namespace (the check is blind)")
    expect(airlock_tables(env, netns) == [],
           "the pod's namespace holds airlock tables with only its sandbox: %s"
           % airlock_tables(env, netns))
    cid = env.cri.create(pod, config, "app", IMAGE, ["/bin/sleep", "600"], "app.log",
                         memory_limit=64 * MiB)
    env.cri.start(cid)
    wait_state(env, cid, C.CONTAINER_RUNNING)
    tables = airlock_tables(env, netns)
    expect(tables == ["ip airlock", "ip6 airlock"],
           "the running app container's rules are not in the pod's namespace: %s" % tables)
    out, err, rc = env.cri.exec_sync(cid, ["wget", "-q", "-O-",
                                           "http://api.test:%d/ok" % port])
    expect(rc == 0 and b"api-answer-marker" in out,
           "the allowed API did not answer: exit %d, %r %r" % (rc, out, err))
    out, err, rc = env.cri.exec_sync(cid, ["wget", "-q", "-O-",
                                           "http://denied.test:%d/no" % port])
    expect(rc != 0, "the denied host answered: %r" % out)
    expect("/no" not in api.paths(),
           "the server got the denied host's request: %s" % api.hits)
    limits = []
    for top in cgroup_tops():
        f = os.path.join(top, CGROUP_PARENT.lstrip("/"), env.pods[pod], cid,
                         "memory.limit_in_bytes")
        if os.path.exists(f):
            limits.append(int(open(f).read()))
        f = os.path.join(top, CGROUP_PARENT.lstrip("/"), env.pods[pod], cid, "memory.max")
        if os.path.exists(f):
            limits.append(int(open(f).read()))
    expect(limits and all(v == 64 * MiB for v in limits),
           "the container's cgroup at its cgroupsPath has memory limits %s, not 64 MiB"
           % limits)
    env.cri.stop(cid, timeout=0)
    wait_state(env, cid, C.CONTAINER_EXITED)
    env.cri.remove(cid)
    gone = wait_for(lambda: airlock_tables(env, netns) == [], 15, step=0.2)
    expect(gone, "the removed container's tables stay in the pod's namespace: %s"
           % airlock_tables(env, netns))


@case
def init_containers_then_app(env):
    """A pod's init containers, as the kubelet runs them: one after the
    other, each left exited (not removed) before the next is made. Each
    reaches the test's server by the pod's annotations (its own rules in
    the pod's namespace), and once it has exited its tables are gone, so
    the next one and then the app container can put theirs there."""
    in_egress_pod(env, init_then_app_checks)


def init_then_app_checks(env, api, pod, config, netns):
    C, port = env.cri_mod, api.port
    for i in range(2):
        cid = env.cri.create(pod, config, "init%d" % i, IMAGE,
                             ["wget", "-q", "-O-", "http://api.test:%d/init%d" % (port, i)],
                             "init%d.log" % i)
        env.cri.start(cid)
        st = wait_state(env, cid, C.CONTAINER_EXITED)
        expect(st["exit_code"] == 0, "init container %d: %s" % (i, st))
        expect(airlock_tables(env, netns) == [],
               "init container %d exited, its tables stay: %s"
               % (i, airlock_tables(env, netns)))
    expect(api.paths() == ["/init0", "/init1"],
           "the server saw %s, not each init container once" % api.hits)
    cid = env.cri.create(pod, config, "app", IMAGE, ["/bin/sleep", "600"], "app.log")
    env.cri.start(cid)
    wait_state(env, cid, C.CONTAINER_RUNNING)
    expect(airlock_tables(env, netns) == ["ip airlock", "ip6 airlock"],
           "the app container's rules are not in the pod's namespace: %s"
           % airlock_tables(env, netns))


@case
def pod_in_microvm(env):
    """A pod with `io.airlock.backend=microvm` and the egress annotations:
    its app container runs in a guest (the guest kernel's command line)
    and in the pod's namespace through the VMM (airlock's tables there
    while it runs), reaches the test's server as api.test by an ExecSync
    of wget, and its exit code comes back; the pod then goes with nothing
    left."""
    if not env.is_airlock:
        raise Skip("%s is not airlock: io.airlock.backend is airlock's" % env.name)
    r = subprocess.run([env.runtime.replace("airlock-runc", "airlock"), "backends", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    mv = [b for b in json.loads(r.stdout or b"{}").get("backends", [])
          if b.get("name") == "microvm"]
    if not mv or not mv[0].get("usable"):
        raise Skip("the microvm backend is not usable here: %s"
                   % (mv[0].get("why") if mv else "none"))
    C = env.cri_mod
    with LoopbackApi() as api:
        pod, config, netns = env.run_pod({
            "io.airlock.backend": "microvm", "io.airlock.timeout": "600",
            "io.airlock.network.allow": "api.test:%d" % api.port,
            "io.airlock.network.hosts": "api.test=127.0.0.1"})
        try:
            cid = env.cri.create(pod, config, "app", IMAGE, ["/bin/sleep", "600"], "app.log")
            env.cri.start(cid)
            wait_state(env, cid, C.CONTAINER_RUNNING, timeout=90)
            expect(airlock_tables(env, netns) == ["ip airlock", "ip6 airlock"],
                   "the guest's container left no rules in the pod's namespace: %s"
                   % airlock_tables(env, netns))
            out, err, rc = env.cri.exec_sync(cid, ["sh", "-c",
                                                   "grep -c airlock.guest=1 /proc/cmdline;"
                                                   " wget -q -O- http://api.test:%d/ok; exit 5"
                                                   % api.port])
            expect(rc == 5 and out.startswith(b"1\n") and b"api-answer-marker" in out,
                   "in the guest: exit %d, %r %r" % (rc, out, err))
            env.cri.stop(cid, timeout=0)
            wait_state(env, cid, C.CONTAINER_EXITED, timeout=60)
            env.cri.remove(cid)
        finally:
            env.remove_pod(pod)
    wait_for(lambda: not pod_traces(env, pod), 15, step=0.2)
    expect(not pod_traces(env, pod), "left after the pod: %s" % pod_traces(env, pod))


@case
def exit_codes_and_log(env):
    """In a pod without annotations: ExecSync returns the command's exit
    code (4) and output; a container whose command ends returns its exit
    code (3) in ContainerStatus, and its output is in its CRI log."""
    C = env.cri_mod
    pod, config, _ = env.run_pod()
    try:
        cid = env.cri.create(pod, config, "svc", IMAGE, ["/bin/sleep", "600"], "svc.log")
        env.cri.start(cid)
        wait_state(env, cid, C.CONTAINER_RUNNING)
        out, err, rc = env.cri.exec_sync(cid, ["sh", "-c", "echo exec-marker; exit 4"])
        expect(rc == 4 and out == b"exec-marker\n",
               "ExecSync: exit %d, stdout %r, stderr %r" % (rc, out, err))
        env.cri.stop(cid, timeout=0)
        wait_state(env, cid, C.CONTAINER_EXITED)
        env.cri.remove(cid)
        cid = env.cri.create(pod, config, "job", IMAGE,
                             ["sh", "-c", "echo log-marker; exit 3"], "job.log")
        env.cri.start(cid)
        st = wait_state(env, cid, C.CONTAINER_EXITED)
        expect(st["exit_code"] == 3, "the job's exit code: %s" % st)
        log = os.path.join(env.logs, env.pods[pod], "job.log")
        with open(log) as f:
            lines = f.read().splitlines()
        # CRI's log format: TIME STREAM TAG TEXT
        expect(any(l.split(" ", 3)[1:] == ["stdout", "F", "log-marker"] for l in lines),
               "the job's log %s: %s" % (log, lines))
        env.cri.remove(cid)
    finally:
        env.remove_pod(pod)


def main():
    if len(sys.argv) < 2:
        print("usage: %s RUNTIME [NAME] [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        return 2
    runtime = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else os.path.basename(runtime)
    for prog in ("containerd", "containerd-shim-runc-v2", "nsenter", "nft", "ip"):
        if shutil.which(prog) is None:
            print("1..0 # SKIP %s is not installed" % prog)
            return 0
    # Found, not imported: gRPC's threads would keep own_mount_ns() from
    # unsharing (a namespace is a whole process's only while it has one).
    if importlib.util.find_spec("grpc") is None:
        print("1..0 # SKIP python3-grpcio is not installed (the CRI client's gRPC)")
        return 0
    if not os.access(runtime, os.X_OK):
        print("1..0 # SKIP runtime %s not found" % runtime)
        return 0
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (containerd)")
        return 0
    t0 = time.monotonic()
    own_mount_ns()  # the daemon's and the shims' mounts in a namespace of ours
    env = Env(runtime, name)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        try:
            took = env.setup()
        except RuntimeError as err:
            print("1..0 # SKIP containerd's CRI cannot run here: %s" % str(err).splitlines()[0])
            return 0
        print("# runtime %s (%s); containerd with CRI started and images imported in %.1fs"
              % (name, env.runtime, took), flush=True)
        rc = suite.run(env, only=sys.argv[3:])
    finally:
        left = env.close()
        print("# total %.1fs" % (time.monotonic() - t0), flush=True)
    if left:
        print("# mounts left below %s after cleanup: %s" % (env.base, left))
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
