"""A job of N ranks on this machine: real processes, real TCP over loopback (given).

    job = cluster.run(ring.ring_allreduce, inputs, op="sum", timeout=5.0)
    outs = job.outputs()                 # one array per rank (raises what a rank raised)
    job.link_bytes(0, 1)                 # bytes rank 1 received from rank 0 during the call

`run` builds a full mesh of TCP sockets (one connection per pair of ranks), then starts one
process per rank: each is forked from a fresh Python interpreter (a small server this module
starts once, with numpy imported), never from the test process, so a rank holds its own rank,
its own sockets (passed to it as descriptors) and its own input, and nothing else. Every
socket has the timeout; once all ranks are up they start together and each calls
``fn(comm, inputs[rank], **kwargs)`` (your function, imported by its module and name). A rank's
result comes back through a pipe of its own with the start and end time of each call
(CLOCK_MONOTONIC, one clock for every process). The test process keeps its own copy of every
socket and reads there what the kernel counted (TCP_INFO ``tcpi_bytes_received``) and the
sockets' buffer sizes (SO_SNDBUF, SO_RCVBUF: a job whose ranks changed them fails).

Nothing here hangs: a rank that has not finished `deadline` seconds after the start is killed
(SIGKILL) and reported as hung; every process is reaped and every descriptor closed before
`run` returns, whatever the ranks did (raised, exited, crashed, stalled).

`roles` replaces chosen ranks' function by one of the roles below (the fault and probe ranks of
the tests: `die`, `stall`, `die_after_first_step`, `stall_after_first_step`, and
``role(name, ...)`` for the others). A role rank is started exactly like yours.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import select
import signal
import socket
import struct
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .comm import DATA, HEADER, Comm, RankFailure

_TCP_INFO_BYTES_RECEIVED = 128  # offset of tcpi_bytes_received (u64) in struct tcp_info
_PR_SET_PDEATHSIG = 1


class RankError(Exception):
    """A rank's code raised (or returned something that is not an array)."""


@dataclass
class RankResult:
    rank: int
    output: np.ndarray | None = None
    error: str | None = None  # "TypeName: message"
    error_type: str | None = None
    failed_rank: int | None = None  # the rank a RankFailure named
    where: tuple[str, int] | None = None  # innermost frame outside the given modules
    received: dict[int, int] = field(default_factory=dict)  # peer -> bytes received from it
    times: list[tuple[float, float]] = field(default_factory=list)  # (start, end) per call
    end: float | None = None  # when the rank's function returned or raised
    role_value: Any = None  # what a role function returned (JSON)
    hung: bool = False  # killed at the deadline
    exit_status: int | None = None  # from waitpid
    resized: list[int] = field(default_factory=list)  # peers whose socket's buffers it changed


@dataclass
class Job:
    size: int
    results: list[RankResult]
    start: float  # when the ranks were released (CLOCK_MONOTONIC)
    roles: frozenset[int] = frozenset()
    bufsize: int | None = None  # the socket buffers the test set

    def link_bytes(self, src: int, dst: int) -> int:
        """Bytes rank `dst` received on its socket from rank `src` during the call."""
        return self.results[dst].received.get(src, 0)

    def sent_by(self, src: int) -> int:
        return sum(self.link_bytes(src, d) for d in range(self.size) if d != src)

    def received_by(self, dst: int) -> int:
        return sum(self.results[dst].received.values())

    def check(self) -> None:
        """Raise what the ranks raised (the first rank whose own code failed; RankFailures only
        when nothing else failed), KataTodo as KataTodo, and name any rank that hung."""
        learner = [r for r in self.results if r.rank not in self.roles]
        resized = [r for r in learner if r.resized]
        if resized:
            r = resized[0]
            raise RankError(
                f"rank {r.rank} changed the buffers (SO_SNDBUF/SO_RCVBUF) of its socket(s) to "
                f"rank(s) {r.resized}: the job's sockets keep the buffers the test gave them"
                + (f" ({self.bufsize} bytes)" if self.bufsize else "")
            )
        errors = [r for r in learner if r.error is not None]
        first = next((r for r in errors if r.error_type != "RankFailure"), None)
        first = first or (errors[0] if errors else None)
        if first is not None:
            if first.error_type == "KataTodo":
                from harness import KataTodo

                raise KataTodo(first.error.split(": ", 1)[-1])
            _reraise(f"rank {first.rank} raised {first.error}", first.where)
        hung = [r.rank for r in learner if r.hung]
        if hung:
            raise RankError(f"rank(s) {hung} did not finish within the job's deadline (killed)")

    def outputs(self) -> list[np.ndarray]:
        self.check()
        return [r.output for r in self.results if r.rank not in self.roles]  # type: ignore[misc]

    def seconds(self) -> float:
        """Median time of one call: from the last rank's start to the last rank's end."""
        calls = min(len(r.times) for r in self.results if r.rank not in self.roles)
        per = [
            max(r.times[i][1] for r in self.results if r.rank not in self.roles)
            - max(r.times[i][0] for r in self.results if r.rank not in self.roles)
            for i in range(calls)
        ]
        return float(np.median(per))


def _reraise(message: str, where: tuple[str, int] | None) -> None:
    """Raise RankError from a frame at `where` (the learner's file and line in the rank that
    raised), so the failure reads as the exception in your code that it was."""
    if where is None:
        raise RankError(message)
    path, line = where
    code = compile("\n" * (max(line, 1) - 1) + "raise RankError(message)", path, "exec")
    exec(code, {"RankError": RankError, "message": message})


# --------------------------------------------------------------------------- framing helpers
def _frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def chunk_bounds(count: int, n: int) -> list[tuple[int, int]]:
    """The ring's split of `count` elements into n chunks (the first count % n one longer)."""
    q, rem = divmod(count, n)
    out, start = [], 0
    for c in range(n):
        end = start + q + (1 if c < rem else 0)
        out.append((start, end))
        start = end
    return out


def slices(start: int, end: int, slice_elems: int) -> list[tuple[int, int]]:
    """A chunk's frames: slices of at most slice_elems elements; an empty chunk is one frame."""
    if end == start:
        return [(start, end)]
    return [(a, min(a + slice_elems, end)) for a in range(start, end, slice_elems)]


# --------------------------------------------------------------------------- roles
@dataclass(frozen=True)
class Role:
    """A rank the tests run in place of yours: the role `name` of this module (_role_<name>)
    with its parameters. It runs in a rank process of its own, started exactly like yours."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()


def role(name: str, **params: Any) -> Role:
    if f"_role_{name}" not in globals():
        raise ValueError(f"cluster.py has no role {name!r}")
    return Role(name, tuple(sorted(params.items())))


def _read_frame(sock: socket.socket) -> tuple[int, bytes] | None:
    """One frame, or None on EOF or when nothing comes for the socket's timeout."""

    def exact(k: int) -> bytes | None:
        buf = b""
        while len(buf) < k:
            try:
                more = sock.recv(k - len(buf))
            except OSError:
                return None
            if not more:
                return None
            buf += more
        return buf

    head = exact(HEADER.size)
    if head is None:
        return None
    kind, length = HEADER.unpack(head)
    body = exact(length)
    return None if body is None else (kind, body)


def _op(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.add(a, b) if op == "sum" else np.maximum(a, b)


def _leave(comm: Comm) -> None:
    """Close every connection (shutdown: the test process holds a copy of each socket too)."""
    for s in comm.peers.values():
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def _die(comm: Comm) -> None:
    _leave(comm)
    os._exit(17)


def _wait_silently(comm: Comm, seconds: float = 3600.0) -> None:
    """A stalled rank: it waits in poll() on its sockets like any rank waiting for data, reads
    (and drops) what arrives, and never sends."""
    poller = select.poll()
    socks = {s.fileno(): s for s in comm.peers.values()}
    for fd in socks:
        poller.register(fd, select.POLLIN)
    until = time.monotonic() + seconds
    while socks and (left := until - time.monotonic()) > 0:
        for fd, _ev in poller.poll(left * 1000):
            try:
                more = socks[fd].recv(1 << 16)
            except (BlockingIOError, TimeoutError):
                continue
            except OSError:
                more = b""
            if not more:
                poller.unregister(fd)
                del socks[fd]
    if not socks:
        time.sleep(max(0.0, until - time.monotonic()))


def _role_die(comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any) -> None:
    _die(comm)


def _role_stall(comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any) -> None:
    _wait_silently(comm)


def _first_step(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    """Send what this rank sends in the ring's first reduce-scatter step (its own chunk)."""
    a, b = chunk_bounds(x.size, comm.size)[comm.rank]
    se = kwargs.get("slice_elems", 1 << 16)  # ring.SLICE_ELEMS
    sock = comm.peer(comm.right)
    for s, e in slices(a, b, se):
        sock.sendall(_frame(DATA, x[s:e].tobytes()))


def _role_die_after_first_step(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any
) -> None:
    _first_step(comm, x, kwargs)
    time.sleep(0.05)
    _die(comm)


def _role_stall_after_first_step(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any
) -> None:
    _first_step(comm, x, kwargs)
    _wait_silently(comm)


def _role_first_slices_then_leave(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any, *, slice_elems: int,
    limit: float, k: int = 1,
) -> None:  # fmt: skip
    """Send the right neighbour only the first k slices of this rank's reduce-scatter chunk,
    wait until the recorder is done (at most `limit` s), then close every socket."""
    a, b = chunk_bounds(x.size, comm.size)[comm.rank]
    for j in range(k):
        part = x[a + j * slice_elems : min(b, a + (j + 1) * slice_elems)]
        comm.peer(comm.right).sendall(_frame(DATA, part.tobytes()))
    select.select([done[0]], [], [], limit)
    _leave(comm)


def _role_ring_steps_then(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any, *, fail: str, steps: int
) -> None:
    """The ring, faithfully (README, "The ring, exactly"), for `steps` of its 2(n-1) receiving
    steps (reduce-scatter first, then all-gather), then die or stall."""
    n, r = comm.size, comm.rank
    se, op = kwargs.get("slice_elems", 1 << 16), kwargs.get("op", "sum")
    out, bounds = x.copy(), chunk_bounds(x.size, comm.size)
    right, left = comm.peer(comm.right), comm.peer(comm.left)
    for a, b in slices(*bounds[r], se):
        right.sendall(_frame(DATA, out[a:b].tobytes()))
    for step in range(steps):
        gather = step >= n - 1
        c = (r - step - 1) % n if not gather else (r - (step - (n - 1))) % n
        for a, b in slices(*bounds[c], se):
            f = _read_frame(left)
            if f is None:
                os._exit(18)
            got = np.frombuffer(f[1], dtype=out.dtype)
            out[a:b] = got if gather else _op(op, got, out[a:b])
            if step < 2 * (n - 1) - 1:
                right.sendall(_frame(DATA, out[a:b].tobytes()))
    time.sleep(0.05)
    if fail == "die":
        _die(comm)
    _wait_silently(comm)


def _role_record_from_left(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any, *, frames: int
) -> list[list[Any]]:
    """Read up to `frames` frames from the left neighbour (until EOF or nothing for
    comm.timeout s) and return them as [kind, hex payload]; then say done."""
    got: list[list[Any]] = []
    while len(got) < frames:
        f = _read_frame(comm.peer(comm.left))
        if f is None:
            break
        got.append([f[0], f[1].hex()])
    os.write(done[1], b"x")
    return got


def _role_wait_then_leave(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any, *, limit: float
) -> None:
    select.select([done[0]], [], [], limit)
    _leave(comm)


def _role_abort(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any, *, to: list[int], names: int,
    reason: str = "test",
) -> None:  # fmt: skip
    """Send ABORT naming `names` to the ranks `to`, then stay (alive, silent)."""
    body = struct.pack("<I", names) + reason.encode()
    for k in to:
        comm.peer(k).sendall(_frame(1, body))
    _wait_silently(comm)


def _role_rd_first_message_then(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any, *, fail: str
) -> None:
    """Recursive doubling up to this rank's first message sent (the fold to r - p, or the first
    exchange with r ^ 1 after folding r + p in), then die or stall."""
    n, r = comm.size, comm.rank
    p = 1 << (n.bit_length() - 1)
    v = x.copy()
    if r >= p:
        comm.peer(r - p).sendall(_frame(DATA, v.tobytes()))
    else:
        if r + p < n:
            f = _read_frame(comm.peer(r + p))
            if f is None:
                os._exit(18)
            v = _op(kwargs.get("op", "sum"), v, np.frombuffer(f[1], dtype=v.dtype))
        comm.peer(r ^ 1).sendall(_frame(DATA, v.tobytes()))
    time.sleep(0.05)
    if fail == "die":
        _die(comm)
    _wait_silently(comm)


def _role_ring_checker(comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any) -> list[str]:
    """The whole ring, faithfully, in the place of one of your ranks: every frame it receives
    from its left neighbour comes back to the test (hex payloads, in order), which checks each
    against the ring's partial sums of the real inputs."""
    n, r = comm.size, comm.rank
    se, op = kwargs.get("slice_elems", 1 << 16), kwargs.get("op", "sum")
    out, bounds = x.copy(), chunk_bounds(x.size, comm.size)
    right, left = comm.peer(comm.right), comm.peer(comm.left)
    got: list[str] = []
    for a, b in slices(*bounds[r], se):
        right.sendall(_frame(DATA, out[a:b].tobytes()))
    for step in range(2 * (n - 1)):
        gather = step >= n - 1
        c = (r - step - 1) % n if not gather else (r - (step - (n - 1))) % n
        for a, b in slices(*bounds[c], se):
            f = _read_frame(left)
            if f is None or f[0] != DATA or len(f[1]) != (b - a) * out.itemsize:
                got.append("" if f is None else f"kind {f[0]}, {len(f[1])} bytes")
                return got
            got.append(f[1].hex())
            recv = np.frombuffer(f[1], dtype=out.dtype)
            out[a:b] = recv if gather else _op(op, recv, out[a:b])
            if step < 2 * (n - 1) - 1:
                right.sendall(_frame(DATA, out[a:b].tobytes()))
    return got


def _role_rd_checker(
    comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any
) -> list[list[Any]]:
    """Recursive doubling, faithfully, in the place of one of your ranks: every message it
    receives comes back to the test as [from rank, hex payload], in order."""
    n, r, op = comm.size, comm.rank, kwargs.get("op", "sum")
    p = 1 << (n.bit_length() - 1)
    v, got = x.copy(), []

    def recv(k: int) -> np.ndarray | None:
        f = _read_frame(comm.peer(k))
        if f is None or f[0] != DATA or len(f[1]) != v.nbytes:
            got.append([k, "" if f is None else f"kind {f[0]}, {len(f[1])} bytes"])
            return None
        got.append([k, f[1].hex()])
        return np.frombuffer(f[1], dtype=v.dtype)

    if r >= p:
        comm.peer(r - p).sendall(_frame(DATA, v.tobytes()))
        recv(r - p)
        return got
    if r + p < n:
        other = recv(r + p)
        if other is None:
            return got
        v = _op(op, other, v)
    d = 1
    while d < p:
        k = r ^ d
        comm.peer(k).sendall(_frame(DATA, v.tobytes()))
        other = recv(k)
        if other is None:
            return got
        v = _op(op, v, other) if r < k else _op(op, other, v)
        d <<= 1
    if r + p < n:
        comm.peer(r + p).sendall(_frame(DATA, v.tobytes()))
    return got


die = Role("die")
stall = Role("stall")
die_after_first_step = Role("die_after_first_step")
stall_after_first_step = Role("stall_after_first_step")


# --------------------------------------------------------------------------- the rank
_FIN_RECEIVED = {6, 8, 9, 11}  # TIME_WAIT, CLOSE_WAIT, LAST_ACK, CLOSING: the peer's FIN is in


def _bytes_received(sock: socket.socket) -> int:
    """Payload bytes the kernel received on `sock` (a FIN counts one in the kernel: not here)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    fin = 1 if info[0] in _FIN_RECEIVED else 0
    return struct.unpack_from("<Q", info, _TCP_INFO_BYTES_RECEIVED)[0] - fin


def _buffers(sock: socket.socket) -> tuple[int, int]:
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    )


def _send_msg(fd: int, tag: bytes, payload: bytes) -> None:
    data = memoryview(tag + struct.pack("<I", len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, k: int) -> bytes:
    buf = bytearray()
    while len(buf) < k:
        more = os.read(fd, min(k - len(buf), 1 << 20))
        if not more:
            raise EOFError("the test process closed the rank's input")
        buf += more
    return bytes(buf)


_GIVEN = {"cluster.py", "comm.py"}


def _where(exc: BaseException) -> tuple[str, int] | None:
    """The innermost frame of the traceback in a kata file that is not given code."""
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        path = Path(frame.f_code.co_filename)
        if path.name not in _GIVEN and "harness" not in path.parts and path.suffix == ".py":
            found = (str(path), lineno)
    return found


def _rank_main(spec: dict[str, Any], x: np.ndarray, fds: list[int]) -> None:
    """One rank, in a process of its own forked from a fresh interpreter (never from the test
    process): it holds its own sockets, its own input and its own spec, nothing else."""
    out_fd, go_fd, done_r, done_w, *peer_fds = fds
    n, rank, timeout = spec["n"], spec["rank"], spec["timeout"]
    peers = {k: socket.socket(fileno=fd) for k, fd in zip(spec["peers"], peer_fds, strict=True)}
    for s in peers.values():
        s.settimeout(timeout)
    comm = Comm(rank, n, dict(peers), timeout)
    kwargs = spec["kwargs"]
    is_role = "role" in spec
    fn: Any
    if is_role:
        fn = globals()[f"_role_{spec['role']}"]
        params = dict(spec["params"])
    else:
        import importlib

        module = importlib.import_module(spec["module"])
        fn = module
        for part in spec["qualname"].split("."):
            fn = getattr(fn, part)
    _send_msg(out_fd, b"R", b"")
    os.read(go_fd, 1)
    report: dict[str, Any] = {"times": []}
    out: Any = None
    try:
        if is_role:
            report["role_value"] = fn(comm, x, kwargs, (done_r, done_w), **params)
        else:
            for _ in range(spec["repeat"]):
                t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
                out = fn(comm, x, **kwargs)
                report["times"].append((t0, time.clock_gettime(time.CLOCK_MONOTONIC)))
            if type(out) is not np.ndarray:
                raise TypeError(
                    f"{getattr(fn, '__name__', 'fn')} returned {type(out).__name__}; "
                    "return a numpy.ndarray"
                )
    except BaseException as e:  # everything a rank's code can do, reported
        report["error"] = f"{type(e).__name__}: {e}"
        report["error_type"] = type(e).__name__
        if isinstance(e, RankFailure):
            report["failed_rank"] = e.rank
        report["where"] = _where(e)
        if report["where"] is None and not is_role:
            code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
            if code is not None:
                report["where"] = (code.co_filename, code.co_firstlineno)
        out = None
    report["end"] = time.clock_gettime(time.CLOCK_MONOTONIC)
    _send_msg(out_fd, b"F", b"")
    os.read(go_fd, 1)  # every rank has finished: the test process counts the bytes now
    if isinstance(out, np.ndarray):
        report["dtype"], report["shape"] = out.dtype.str, list(out.shape)
        body = np.ascontiguousarray(out).tobytes()
    else:
        body = b""
    _send_msg(out_fd, b"D", json.dumps(report).encode())
    _send_msg(out_fd, b"O", body)
    os.read(go_fd, 1)  # every rank has reported: now the sockets may close


# The rank server: a fresh interpreter (numpy imported once) that forks one process per rank on
# request, with the descriptors the test process passes it (SCM_RIGHTS). A rank forked from it
# holds nothing of the test process; it reads its own spec and input from its own pipe.
_SERVER = r"""
import ctypes, json, os, signal, socket, struct, sys, time
import numpy as np
ctl = socket.socket(fileno=int(sys.argv[1]))
libc = ctypes.CDLL(None)
sys.path[:] = json.loads(sys.argv[2])
try:  # imported once here, not in every rank (the stubs' todo, the import fence)
    import harness
    from harness.sandbox import fence
except ImportError:
    fence = None
import gc
gc.freeze()  # a rank's collections skip what is here: fewer pages copied after each fork

def read_exact(fd, k):
    buf = bytearray()
    while len(buf) < k:
        more = os.read(fd, min(k - len(buf), 1 << 20))
        if not more:
            raise EOFError
        buf += more
    return bytes(buf)

clusters = {}

def given(req):
    # The kata package and its given cluster.py, imported once here (given code only).
    name = req["package"]
    if name not in clusters:
        import importlib, importlib.machinery, importlib.util
        from pathlib import Path
        ms = importlib.machinery.ModuleSpec(name, None, is_package=True)
        ms.submodule_search_locations = list(req["path"])
        pkg = importlib.util.module_from_spec(ms)
        pkg.__path__ = list(req["path"])
        sys.modules[name] = pkg
        if req.get("fence"):
            f = req["fence"]
            fence.register(name, f["kata"], [Path(d) for d in req["path"]], tuple(f["files"]),
                           None if f["given"] is None else tuple(f["given"]))
        clusters[name] = importlib.import_module(req["cluster"])
        gc.freeze()
    return clusters[name]

def rank(cluster, fds):
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:
        os._exit(71)
    ctl.close()
    in_fd, fds = fds[0], fds[1:]
    (length,) = struct.unpack("<Q", read_exact(in_fd, 8))
    spec = json.loads(read_exact(in_fd, length))
    x = np.frombuffer(read_exact(in_fd, spec["nbytes"]), dtype=np.dtype(spec["dtype"]))
    x = x.reshape(spec["shape"]).copy()
    os.close(in_fd)
    cluster._rank_main(spec, x, fds)

while True:
    try:
        msg, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 256)
    except OSError:
        break
    if not msg:
        break
    req = json.loads(msg)
    if req["op"] == "spawn":
        try:
            cluster = given(req)
        except BaseException as e:
            for fd in fds:
                os.close(fd)
            ctl.sendall(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                rank(cluster, fds)
            except BaseException:
                status = 70
            finally:
                os._exit(status)
        for fd in fds:
            os.close(fd)
        ctl.sendall(json.dumps({"pid": pid}).encode())
    elif req["op"] == "reap":
        status = {}
        until = time.monotonic() + req.get("grace", 2.0)
        for pid in req["pids"]:
            while True:
                try:
                    got, st = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    got, st = pid, None
                if got:
                    break
                if time.monotonic() > until:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    until = float("inf")
                time.sleep(0.005)
            status[str(pid)] = st
        ctl.sendall(json.dumps(status).encode())
"""


class _Server:
    """The test process's handle on the rank server (one per process, started on first use)."""

    _current: _Server | None = None

    def __init__(self) -> None:
        import subprocess
        import sys

        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        libc = ctypes.CDLL(None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(theirs.fileno()), json.dumps(sys.path)],
            pass_fds=[theirs.fileno()],
            preexec_fn=lambda: libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0),
        )
        theirs.close()
        self.owner = os.getpid()

    @classmethod
    def get(cls) -> _Server:
        s = cls._current
        if s is None or s.owner != os.getpid() or s.proc.poll() is not None:
            cls._current = s = cls()
        return s

    def ask(self, req: dict[str, Any], fds: Sequence[int] = (), wait: float = 60.0) -> Any:
        try:
            socket.send_fds(self.ctl, [json.dumps(req).encode()], list(fds))
            ready, _, _ = select.select([self.ctl], [], [], wait)
            if not ready:
                raise RankError("the rank server did not answer")
            reply = self.ctl.recv(1 << 16)
            if not reply:
                raise RankError("the rank server is gone")
            return json.loads(reply)
        except BaseException:
            self.close()  # a request cut in the middle: never reuse this server
            raise

    def close(self) -> None:
        if _Server._current is self:
            _Server._current = None
        self.ctl.close()
        _kill(self.proc.pid)
        self.proc.wait()


def _target(
    fn: Any, role_: Role | None, timeout: float, repeat: int, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Where a rank finds its code: the kata package's module and name (never the object)."""
    import inspect
    import sys

    cluster_name = __name__
    package = cluster_name.rpartition(".")[0]
    spec: dict[str, Any] = {
        "timeout": timeout, "repeat": repeat, "kwargs": kwargs, "package": package,
        "path": list(getattr(sys.modules.get(package), "__path__", [str(Path(__file__).parent)])),
        "cluster": cluster_name,
    }  # fmt: skip
    try:
        from harness.sandbox import fence

        kf = fence.kata_files(package)
        if kf is not None:
            spec["fence"] = {
                "kata": kf.kata, "files": sorted(kf.files),
                "given": None if kf.given is None else sorted(kf.given),
            }  # fmt: skip
    except ImportError:
        pass
    if role_ is not None:
        spec["role"], spec["params"] = role_.name, list(role_.params)
    else:
        raw = inspect.unwrap(fn)
        spec["module"], spec["qualname"] = raw.__module__, raw.__qualname__
    return spec


_PACKAGE_KEYS = ("package", "path", "cluster", "fence")


def _mesh(n: int, bufsize: int | None) -> dict[tuple[int, int], socket.socket]:
    """Every pair of ranks connected over loopback, built here: socks[(i, j)] is rank i's end
    of its connection to rank j. The test process keeps its own copy of every end."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    socks: dict[tuple[int, int], socket.socket] = {}
    try:
        if bufsize:
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
        lst.bind(("127.0.0.1", 0))
        lst.listen(n * n)
        for i in range(n):
            for j in range(i + 1, n):
                a = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks[(i, j)] = a
                if bufsize:
                    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
                    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
                a.connect(lst.getsockname())
                b, _ = lst.accept()
                socks[(j, i)] = b
        for s in socks.values():
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return socks
    except BaseException:
        for s in socks.values():
            s.close()
        raise
    finally:
        lst.close()


# --------------------------------------------------------------------------- the parent
class _Reader:
    def __init__(self, fd: int) -> None:
        self.fd, self.buf, self.msgs, self.eof = fd, bytearray(), [], False

    def pump(self) -> None:
        try:
            data = os.read(self.fd, 1 << 20)
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return
        self.buf += data
        while len(self.buf) >= 5:
            (length,) = struct.unpack_from("<I", self.buf, 1)
            if len(self.buf) < 5 + length:
                break
            self.msgs.append((bytes(self.buf[:1]), bytes(self.buf[5 : 5 + length])))
            del self.buf[: 5 + length]

    def tags(self) -> list[bytes]:
        return [t for t, _ in self.msgs]


def _pump_until(readers: dict[int, _Reader], want: Callable[[_Reader], bool], until: float) -> None:
    while True:
        waiting = [r for r in readers.values() if not want(r) and not r.eof]
        if not waiting:
            return
        left = until - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select([r.fd for r in waiting], [], [], left)
        for r in waiting:
            if r.fd in ready:
                r.pump()


def _write_input(fd: int, spec: dict[str, Any], x: np.ndarray) -> None:
    body = json.dumps(spec).encode()
    _send_all(fd, struct.pack("<Q", len(body)) + body)
    _send_all(fd, np.ascontiguousarray(x).tobytes())


def _send_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run(
    fn: Callable[..., Any],
    inputs: Sequence[np.ndarray],
    *,
    timeout: float = 10.0,
    deadline: float = 30.0,
    repeat: int = 1,
    roles: dict[int, Role] | None = None,
    bufsize: int | None = None,
    **kwargs: Any,
) -> Job:
    """Run ``fn(comm, inputs[rank], **kwargs)`` on len(inputs) ranks (`repeat` times each).

    timeout: every socket's timeout (comm.timeout); deadline: seconds after the start when any
    rank still running is killed; bufsize: SO_SNDBUF and SO_RCVBUF of every socket (small
    buffers make a rank that sends a whole chunk before it receives wait forever)."""
    n = len(inputs)
    roles = dict(roles or {})
    for k, r in roles.items():
        if not isinstance(r, Role):
            raise TypeError(f"roles[{k}] must be a cluster.Role (cluster.role(name, ...))")
    pids: dict[int, int] = {}
    readers: dict[int, _Reader] = {}
    go_fds: dict[int, int] = {}
    socks: dict[tuple[int, int], socket.socket] = {}
    done = os.pipe()
    server = _Server.get()
    try:
        socks = _mesh(n, bufsize)
        before = {key: _bytes_received(s) for key, s in socks.items()}
        buffers = {key: _buffers(s) for key, s in socks.items()}
        for rank in range(n):
            spec = _target(fn, roles.get(rank), timeout, repeat, kwargs)
            x = np.asarray(inputs[rank])
            others = [k for k in range(n) if k != rank]
            spec.update(
                rank=rank, n=n, peers=others, dtype=x.dtype.str, shape=list(x.shape),
                nbytes=x.nbytes,
            )  # fmt: skip
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            go_r, go_w = os.pipe()
            readers[rank], go_fds[rank] = _Reader(out_r), go_w
            try:
                fds = [in_r, out_w, go_r, done[0], done[1]]
                fds += [socks[(rank, k)].fileno() for k in others]
                req = {"op": "spawn", **{k: spec[k] for k in _PACKAGE_KEYS if k in spec}}
                got = server.ask(req, fds)
                if "pid" not in got:
                    raise RankError(f"the rank server could not load cluster.py: {got['error']}")
                pids[rank] = got["pid"]
            finally:
                for fd in (in_r, out_w, go_r):
                    os.close(fd)
            try:
                _write_input(in_w, spec, x)
            except OSError:
                pass  # the rank is gone: it is reported below
            finally:
                os.close(in_w)
        setup_until = time.monotonic() + 10.0
        _pump_until(readers, lambda r: b"R" in r.tags(), setup_until)
        not_ready = [k for k, r in readers.items() if b"R" not in r.tags()]
        if not_ready:
            raise RankError(f"rank(s) {not_ready} could not start")
        start = time.clock_gettime(time.CLOCK_MONOTONIC)
        for fd in go_fds.values():
            os.write(fd, b"g")
        until = time.monotonic() + deadline
        learners = {k: r for k, r in readers.items() if k not in roles}
        _pump_until(learners, lambda r: b"F" in r.tags(), until)
        # Roles that are still running (a stalled rank) may run as long as the others did.
        role_until = min(until, time.monotonic() + 0.2) if learners else until
        _pump_until(readers, lambda r: b"F" in r.tags(), role_until)
        finished = {k for k, r in readers.items() if b"F" in r.tags()}
        for k, pid in pids.items():
            if k not in finished:
                _kill(pid)
        received: dict[int, dict[int, int]] = {k: {} for k in range(n)}
        resized: dict[int, list[int]] = {}
        for (i, j), s in socks.items():
            received[i][j] = _bytes_received(s) - before[(i, j)]
            if bufsize and _buffers(s) != buffers[(i, j)]:  # unset, the kernel tunes them
                resized.setdefault(i, []).append(j)
        for k in finished:
            os.write(go_fds[k], b"g")
        _pump_until(
            {k: readers[k] for k in finished}, lambda r: b"O" in r.tags(), time.monotonic() + 30
        )
        for k in finished:
            os.write(go_fds[k], b"g")
        results = []
        for k in range(n):
            res = RankResult(k, hung=k not in finished and k not in roles)
            res.received = received[k]
            res.resized = sorted(resized.get(k, []))
            msgs = dict(readers[k].msgs)
            if b"D" in msgs:
                rep = json.loads(msgs[b"D"])
                res.error, res.error_type = rep.get("error"), rep.get("error_type")
                res.failed_rank = rep.get("failed_rank")
                res.where = tuple(rep["where"]) if rep.get("where") else None  # type: ignore[assignment]
                res.times = [tuple(t) for t in rep["times"]]  # type: ignore[misc]
                res.end, res.role_value = rep["end"], rep.get("role_value")
                if "dtype" in rep:
                    res.output = (
                        np.frombuffer(msgs.get(b"O", b""), dtype=np.dtype(rep["dtype"]))
                        .reshape(rep["shape"])
                        .copy()
                    )
            elif k in finished or not res.hung:
                if k not in roles:
                    res.error = res.error or "RankError: the rank's process ended without a result"
                    res.error_type = res.error_type or "RankError"
            results.append(res)
        status = server.ask({"op": "reap", "pids": list(pids.values())}) if pids else {}
        for k, pid in pids.items():
            results[k].exit_status = status.get(str(pid))
        pids = {}
        return Job(n, results, start, frozenset(roles), bufsize)
    finally:
        for pid in pids.values():
            _kill(pid)
        if pids and _Server._current is server:
            try:
                server.ask({"op": "reap", "pids": list(pids.values())}, wait=10.0)
            except BaseException:
                pass
        for s in socks.values():
            s.close()
        for fd in [*(r.fd for r in readers.values()), *go_fds.values(), *done]:
            try:
                os.close(fd)
            except OSError:
                pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --------------------------------------------------------------------------- the bound
def _role_exchange(comm: Comm, x: np.ndarray, kwargs: dict[str, Any], done: Any) -> float:
    """Every rank sends nbytes to its right while it receives nbytes from its left, with the
    best this machine's Python can do (one sendall in a thread, recv_into a buffer): the ring's
    traffic without its arithmetic. Returns the seconds it took."""
    import threading

    nbytes, rounds = kwargs["nbytes"], kwargs.get("rounds", 3)
    payload = bytes(nbytes)
    buf = bytearray(nbytes)
    view = memoryview(buf)
    best = math.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        th = threading.Thread(target=comm.peer(comm.right).sendall, args=(payload,))
        th.start()
        got, src = 0, comm.peer(comm.left)
        while got < nbytes:
            got += src.recv_into(view[got:])
        th.join()
        best = min(best, time.perf_counter() - t0)
    return best


def link_bandwidth(n: int, nbytes: int, rounds: int = 3) -> float:
    """Bytes per second each link of an n-rank ring carries when every link is busy at once:
    the bound a ring all-reduce's busbw is measured against (same machine, same sockets, same
    moment). The slowest rank's best round decides."""
    job = run(
        _role_exchange,
        [np.zeros(1, np.uint8)] * n,
        roles={k: Role("exchange") for k in range(n)},
        deadline=60.0,
        nbytes=nbytes,
        rounds=rounds,
    )
    secs = [r.role_value for r in job.results]
    if any(not isinstance(s, float) for s in secs):
        raise RankError(f"the bandwidth probe failed: {[r.error for r in job.results]}")
    return nbytes / max(secs)


def algbw(nbytes: int, seconds: float) -> float:
    """nccl-tests' algorithm bandwidth: the message size over the time of one call."""
    return nbytes / seconds


def busbw(nbytes: int, seconds: float, n: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: algbw x 2(n-1)/n, comparable to a link's."""
    return algbw(nbytes, seconds) * 2 * (n - 1) / n


__all__ = [
    "Job",
    "RankError",
    "RankResult",
    "Role",
    "algbw",
    "busbw",
    "chunk_bounds",
    "die",
    "die_after_first_step",
    "link_bandwidth",
    "role",
    "run",
    "slices",
    "stall",
    "stall_after_first_step",
]
