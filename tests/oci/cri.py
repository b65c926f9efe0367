"""A small client of the Kubernetes Container Runtime Interface (CRI,
runtime.v1) for the tests: what the kubelet asks a CRI server (containerd's
CRI plugin) to do for a pod, over gRPC on the server's unix socket.

The messages are encoded here, field by field, from the CRI's published
field numbers (k8s.io/cri-api, runtime/v1/api.proto): only the fields the
tests use. gRPC itself is Debian's python3-grpcio, used with raw bytes
(no generated code, no .proto at run time).
"""

import grpc

SERVICE = "/runtime.v1.RuntimeService/"

# ContainerState (ContainerStatus.state)
CONTAINER_CREATED, CONTAINER_RUNNING, CONTAINER_EXITED, CONTAINER_UNKNOWN = 0, 1, 2, 3
# NamespaceMode (NamespaceOption's fields)
NS_POD, NS_CONTAINER, NS_NODE = 0, 1, 2


def _varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class M:
    """An embedded message: msg()'s bytes, tagged as a message."""

    def __init__(self, data):
        self.data = data


def msg(*fields):
    """A message from (number, value) pairs: str and bytes are length-
    delimited, bool and int varints, M an embedded message, dict a map of
    strings, list a repeated field; None is left out."""
    out = bytearray()
    for num, v in fields:
        if v is None:
            continue
        vals = v if isinstance(v, list) else [v]
        if isinstance(v, dict):
            vals = [M(msg((1, k), (2, x))) for k, x in sorted(v.items())]
        for x in vals:
            if isinstance(x, bool) or isinstance(x, int):
                out += _varint(num << 3) + _varint(int(x))
            else:
                data = x.data if isinstance(x, M) else x.encode() if isinstance(x, str) else x
                out += _varint(num << 3 | 2) + _varint(len(data)) + data
    return bytes(out)


def parse(data):
    """A message's fields: number -> list of values (int for varints,
    bytes for length-delimited ones)."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(data, i)
        elif wt == 2:
            n, i = _read_varint(data, i)
            v, i = data[i:i + n], i + n
        elif wt == 1:
            v, i = data[i:i + 8], i + 8
        elif wt == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d in a CRI answer" % wt)
        fields.setdefault(num, []).append(v)
    return fields


def _read_varint(data, i):
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def one(fields, num, default=None):
    v = fields.get(num)
    return v[-1] if v else default


def text(fields, num):
    return one(fields, num, b"").decode()


def signed(n):
    """An int32 or int64 varint as its signed value."""
    return n - (1 << 64) if n >= 1 << 63 else n


class Client:
    """RuntimeService calls on a CRI server's unix socket. Each call waits
    at most timeout seconds; a gRPC error is raised as grpc.RpcError."""

    def __init__(self, sock, timeout=120):
        self.ch = grpc.insecure_channel("unix://" + sock)
        self.timeout = timeout

    def call(self, method, request, timeout=None):
        fn = self.ch.unary_unary(SERVICE + method)
        return parse(fn(request, timeout=timeout or self.timeout))

    def close(self):
        self.ch.close()

    def version(self):
        f = self.call("Version", msg((1, "v1")))
        return {"runtime_name": text(f, 2), "runtime_version": text(f, 3),
                "runtime_api_version": text(f, 4)}

    @staticmethod
    def pod_config(name, uid, log_dir, annotations=None, cgroup_parent=None, hostname=None):
        """A PodSandboxConfig as the kubelet makes one (metadata, hostname,
        log directory, annotations, the pod's cgroup parent)."""
        return msg((1, M(msg((1, name), (2, uid), (3, "default"), (4, 0)))),
                   (2, hostname or name), (3, log_dir), (7, annotations or {}),
                   (8, M(msg((1, cgroup_parent)))))

    def run_pod(self, config, handler):
        return text(self.call("RunPodSandbox", msg((1, M(config)), (2, handler))), 1)

    def stop_pod(self, pod_id):
        self.call("StopPodSandbox", msg((1, pod_id)))

    def remove_pod(self, pod_id):
        self.call("RemovePodSandbox", msg((1, pod_id)))

    def create(self, pod_id, pod_config, name, image, command, log_path, annotations=None,
               memory_limit=None, envs=None):
        """CreateContainer: ContainerConfig with metadata, image, command,
        envs, annotations, log path and the memory limit."""
        resources = M(msg((4, memory_limit))) if memory_limit else None
        config = msg((1, M(msg((1, name), (2, 0)))), (2, M(msg((1, image)))),
                     (3, list(command)),
                     (6, [M(msg((1, k), (2, v))) for k, v in sorted((envs or {}).items())]),
                     (10, annotations or {}), (11, log_path),
                     (15, M(msg((1, resources))) if resources else None))
        f = self.call("CreateContainer", msg((1, pod_id), (2, M(config)), (3, M(pod_config))))
        return text(f, 1)

    def start(self, cid):
        self.call("StartContainer", msg((1, cid)))

    def stop(self, cid, timeout=0):
        self.call("StopContainer", msg((1, cid), (2, timeout)))

    def remove(self, cid):
        self.call("RemoveContainer", msg((1, cid)))

    def status(self, cid):
        """ContainerStatus: state, exit code, reason and message."""
        st = parse(one(self.call("ContainerStatus", msg((1, cid))), 1, b""))
        return {"state": one(st, 3, 0), "exit_code": signed(one(st, 7, 0)),
                "reason": text(st, 10), "message": text(st, 11)}

    def exec_sync(self, cid, cmd, timeout=60):
        f = self.call("ExecSync", msg((1, cid), (2, list(cmd)), (3, timeout)),
                      timeout=timeout + 30)
        return one(f, 1, b""), one(f, 2, b""), signed(one(f, 3, 0))

    def list_pods(self):
        """The pod sandbox ids the server lists."""
        f = self.call("ListPodSandbox", msg())
        return [text(parse(p), 1) for p in f.get(1, [])]

    def list_containers(self):
        f = self.call("ListContainers", msg())
        return [text(parse(c), 1) for c in f.get(1, [])]
