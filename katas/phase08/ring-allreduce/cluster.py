"""A job of N ranks on this machine: real processes, real TCP over loopback (given).

    job = cluster.run(ring.ring_allreduce, inputs, op="sum", timeout=5.0)
    outs = job.outputs()                 # one array per rank (raises what a rank raised)
    job.link_bytes(0, 1)                 # bytes rank 1 received from rank 0 during the call

`run` forks one process per rank (``os.fork``: the rank starts with your modules already
imported), builds a full mesh of TCP sockets between them (rank i connects to rank j's listener
for i < j; no other process holds those sockets), sets every socket's timeout, waits until all
ranks are connected, then starts them together and calls ``fn(comm, inputs[rank], **kwargs)``
in each. A rank's result comes back to the test through a pipe of its own, with the bytes that
crossed each of its sockets as the kernel counted them (TCP_INFO ``tcpi_bytes_received``), and
the start and end time of each call (CLOCK_MONOTONIC, one clock for every process).

Nothing here hangs: a rank that has not finished `deadline` seconds after the start is killed
(SIGKILL) and reported as hung; every process is reaped and every descriptor closed before
`run` returns, whatever the ranks did (raised, exited, crashed, stalled).

`roles` replaces chosen ranks' function by another (the fault and probe ranks of the tests:
`die`, `stall`, `die_after_first_step`, `stall_after_first_step` are here).
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

Role = Callable[[Comm, np.ndarray, dict[str, Any]], Any]
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


@dataclass
class Job:
    size: int
    results: list[RankResult]
    start: float  # when the ranks were released (CLOCK_MONOTONIC)
    roles: frozenset[int] = frozenset()

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
def die(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    os._exit(17)


def stall(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    time.sleep(3600)


def _first_step(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    """Send what this rank sends in the ring's first reduce-scatter step (its own chunk)."""
    a, b = chunk_bounds(x.size, comm.size)[comm.rank]
    se = kwargs.get("slice_elems", 1 << 16)  # ring.SLICE_ELEMS
    sock = comm.peer(comm.right)
    for s, e in slices(a, b, se):
        sock.sendall(_frame(DATA, x[s:e].tobytes()))


def die_after_first_step(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    _first_step(comm, x, kwargs)
    time.sleep(0.05)
    os._exit(17)


def stall_after_first_step(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    _first_step(comm, x, kwargs)
    time.sleep(3600)


# --------------------------------------------------------------------------- the child
_FIN_RECEIVED = {6, 8, 9, 11}  # TIME_WAIT, CLOSE_WAIT, LAST_ACK, CLOSING: the peer's FIN is in


def _bytes_received(sock: socket.socket) -> int:
    """Payload bytes the kernel received on `sock` (a FIN counts one in the kernel: not here)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    fin = 1 if info[0] in _FIN_RECEIVED else 0
    return struct.unpack_from("<Q", info, _TCP_INFO_BYTES_RECEIVED)[0] - fin


def _send_msg(fd: int, tag: bytes, payload: bytes) -> None:
    data = memoryview(tag + struct.pack("<I", len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


_GIVEN = {"cluster.py", "comm.py"}


def _where(exc: BaseException) -> tuple[str, int] | None:
    """The innermost frame of the traceback in a kata file that is not given code."""
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        path = Path(frame.f_code.co_filename)
        if path.name not in _GIVEN and "harness" not in path.parts and path.suffix == ".py":
            found = (str(path), lineno)
    return found


def _child(
    rank: int,
    n: int,
    listeners: list[socket.socket],
    ports: list[int],
    out_fd: int,
    go_fd: int,
    fn: Callable[..., Any] | Role,
    is_role: bool,
    x: np.ndarray,
    kwargs: dict[str, Any],
    timeout: float,
    repeat: int,
    bufsize: int | None,
) -> None:
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    for k, lst in enumerate(listeners):
        if k != rank:
            lst.close()
    me = listeners[rank]
    peers: dict[int, socket.socket] = {}
    for j in range(rank):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if bufsize:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
        s.connect(("127.0.0.1", ports[j]))
        s.sendall(struct.pack("<I", rank))
        peers[j] = s
    for _ in range(n - 1 - rank):
        s, _addr = me.accept()
        got = b""
        while len(got) < 4:
            more = s.recv(4 - len(got))
            if not more:
                raise ConnectionError("a peer closed during the handshake")
            got += more
        peers[struct.unpack("<I", got)[0]] = s
    me.close()
    for s in peers.values():
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(timeout)
    comm = Comm(rank, n, dict(peers), timeout)
    before = {k: _bytes_received(s) for k, s in peers.items()}  # nothing flows before "go"
    _send_msg(out_fd, b"R", b"")
    os.read(go_fd, 1)
    report: dict[str, Any] = {"times": []}
    out: Any = None
    try:
        if is_role:
            report["role_value"] = fn(comm, x, kwargs)
        else:
            for _ in range(repeat):
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
    os.read(go_fd, 1)  # every rank has finished: every byte sent to us has arrived
    counts = {}
    for k, s in peers.items():
        try:
            counts[k] = _bytes_received(s) - before[k]
        except OSError:
            counts[k] = -1  # the socket was closed by the rank's code
    report["received"] = counts
    if isinstance(out, np.ndarray):
        report["dtype"], report["shape"] = out.dtype.str, list(out.shape)
        body = np.ascontiguousarray(out).tobytes()
    else:
        body = b""
    _send_msg(out_fd, b"D", json.dumps(report).encode())
    _send_msg(out_fd, b"O", body)
    os.read(go_fd, 1)  # every rank has counted: now the sockets may close


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
    listeners, pids, readers, go_fds = [], {}, {}, {}
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if bufsize:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
            s.bind(("127.0.0.1", 0))
            s.listen(n)
            listeners.append(s)
        ports = [s.getsockname()[1] for s in listeners]
        for rank in range(n):
            out_r, out_w = os.pipe()
            go_r, go_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the rank
                status = 0
                try:
                    for r in readers.values():
                        os.close(r.fd)
                    for fd in go_fds.values():
                        os.close(fd)
                    os.close(out_r)
                    os.close(go_w)
                    is_role = rank in roles
                    _child(
                        rank, n, listeners, ports, out_w, go_r,
                        roles.get(rank, fn), is_role, inputs[rank], kwargs,
                        timeout, repeat, bufsize,
                    )  # fmt: skip
                except BaseException:
                    status = 70
                finally:
                    os._exit(status)
            os.close(out_w)
            os.close(go_r)
            pids[rank], readers[rank], go_fds[rank] = pid, _Reader(out_r), go_w
        for s in listeners:
            s.close()
        listeners = []
        setup_until = time.monotonic() + 10.0
        _pump_until(readers, lambda r: b"R" in r.tags(), setup_until)
        not_ready = [k for k, r in readers.items() if b"R" not in r.tags()]
        if not_ready:
            raise RankError(f"rank(s) {not_ready} could not connect to the others")
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
            msgs = dict(readers[k].msgs)
            if b"D" in msgs:
                rep = json.loads(msgs[b"D"])
                res.error, res.error_type = rep.get("error"), rep.get("error_type")
                res.failed_rank = rep.get("failed_rank")
                res.where = tuple(rep["where"]) if rep.get("where") else None  # type: ignore[assignment]
                res.received = {int(p): c for p, c in rep["received"].items()}
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
        for k, pid in pids.items():
            results[k].exit_status = _reap(pid)
        return Job(n, results, start, frozenset(roles))
    finally:
        for s in listeners:
            s.close()
        for pid in pids.values():
            _kill(pid)
            _reap(pid)
        for r in readers.values():
            try:
                os.close(r.fd)
            except OSError:
                pass
        for fd in go_fds.values():
            try:
                os.close(fd)
            except OSError:
                pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> int | None:
    try:
        _, status = os.waitpid(pid, 0)
        return status
    except ChildProcessError:
        return None


# --------------------------------------------------------------------------- the bound
def _exchange(comm: Comm, x: np.ndarray, kwargs: dict[str, Any]) -> float:
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
        _exchange,
        [np.zeros(1, np.uint8)] * n,
        roles={k: _exchange for k in range(n)},
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
    "algbw",
    "busbw",
    "chunk_bounds",
    "die",
    "die_after_first_step",
    "link_bandwidth",
    "run",
    "slices",
    "stall",
    "stall_after_first_step",
]
