"""Fixtures of the ring-allreduce tests: your modules and the given ones, loaded once per module,
and what the tests compute themselves (never with your code): the ring's result in the ring's
order, recursive doubling's result in its order, and the bytes each algorithm puts on each link."""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="module")
def wire(kata: Any) -> Any:
    """wire.py (yours): task "framing"."""
    return kata.module("wire")


@pytest.fixture(scope="module")
def ring(kata: Any) -> Any:
    """ring.py (yours): tasks "ring", "pipeline", "small", "faults"."""
    return kata.module("ring")


@pytest.fixture(scope="module")
def cluster(kata: Any) -> Any:
    """cluster.py (given): jobs of N real processes over loopback TCP."""
    return kata.module("cluster")


@pytest.fixture(scope="module")
def comm(kata: Any) -> Any:
    """comm.py (given): Comm, RankFailure, the wire format's constants."""
    return kata.module("comm")


@pytest.fixture
def tcp_pair() -> Iterator[Any]:
    """make(bufsize=None, timeout=None) -> (a, b): two connected loopback TCP sockets, closed
    after the test."""
    made: list[socket.socket] = []

    def make(bufsize: int | None = None, timeout: float | None = 10.0) -> tuple[Any, Any]:
        lst = socket.socket()
        if bufsize:
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        a = socket.socket()
        if bufsize:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
            a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
        a.connect(lst.getsockname())
        b, _ = lst.accept()
        lst.close()
        for s in (a, b):
            s.settimeout(timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        made.extend((a, b))
        return a, b

    yield make
    for s in made:
        s.close()


@pytest.fixture(scope="module")
def background() -> Any:
    """background(fn, *args) -> join(): run fn in a thread; join() returns its result or
    raises its exception (within 20 s)."""

    def start(fn: Any, *args: Any) -> Any:
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn(*args)
            except BaseException as e:  # handed to join()
                box["error"] = e

        th = threading.Thread(target=target, daemon=True)
        th.start()

        def join() -> Any:
            th.join(20)
            assert not th.is_alive(), f"{getattr(fn, '__name__', fn)} did not finish in 20 s"
            if "error" in box:
                raise box["error"]
            return box.get("value")

        return join

    return start


# --------------------------------------------------------------------------- oracles
def _op(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.add(a, b) if op == "sum" else np.maximum(a, b)


def _bounds(count: int, n: int) -> list[tuple[int, int]]:
    q, rem = divmod(count, n)
    out, start = [], 0
    for c in range(n):
        end = start + q + (1 if c < rem else 0)
        out.append((start, end))
        start = end
    return out


def _frames(length: int, slice_elems: int) -> int:
    return max(1, -(-length // slice_elems))


@pytest.fixture(scope="module")
def oracle() -> Any:
    """The expected results and link bytes, computed here with numpy."""

    class Oracle:
        @staticmethod
        def ring(xs: list[np.ndarray], op: str) -> np.ndarray:
            """Chunk c reduced in the ring's order: x[c], then x[c+1], ..., in the dtype."""
            n, count = len(xs), xs[0].size
            out = np.empty_like(xs[0])
            for c, (a, b) in enumerate(_bounds(count, n)):
                acc = xs[c][a:b].copy()
                for k in range(1, n):
                    acc = _op(op, acc, xs[(c + k) % n][a:b])
                out[a:b] = acc
            return out

        @staticmethod
        def recursive_doubling(xs: list[np.ndarray], op: str) -> np.ndarray:
            n = len(xs)
            p = 1 << (n.bit_length() - 1)
            v = [x.copy() for x in xs[:p]]
            for r in range(n - p):
                v[r] = _op(op, xs[r + p], v[r])  # op(received, its own)
            d = 1
            while d < p:
                v = [_op(op, v[min(r, r ^ d)], v[max(r, r ^ d)]) for r in range(p)]
                d <<= 1
            return v[0]

        @staticmethod
        def exact(xs: list[np.ndarray], op: str) -> np.ndarray:
            """float64 (int64) result, no rounding on the way."""
            wide = np.array(xs, dtype=np.float64 if xs[0].dtype.kind == "f" else np.int64)
            return wide.sum(axis=0) if op == "sum" else wide.max(axis=0)

        @staticmethod
        def ring_link_bytes(n: int, count: int, itemsize: int, slice_elems: int) -> list[int]:
            """Bytes rank r sends to rank r+1 in one ring all-reduce, headers included."""
            bounds = _bounds(count, n)
            size = [(b - a) * itemsize + 8 * _frames(b - a, slice_elems) for a, b in bounds]
            return [
                sum(size[(r - s) % n] for s in range(n - 1))
                + sum(size[(r + 1 - s) % n] for s in range(n - 1))
                for r in range(n)
            ]

        @staticmethod
        def rd_link_bytes(n: int, nbytes: int) -> dict[tuple[int, int], int]:
            """Bytes each ordered pair (src, dst) carries in recursive doubling."""
            p = 1 << (n.bit_length() - 1)
            out: dict[tuple[int, int], int] = {}
            frame = nbytes + 8
            for r in range(p, n):
                out[(r, r - p)] = frame
                out[(r - p, r)] = frame
            d = 1
            while d < p:
                for r in range(p):
                    out[(r, r ^ d)] = out.get((r, r ^ d), 0) + frame
                d <<= 1
            return out

    return Oracle()


@pytest.fixture(scope="module")
def make_inputs() -> Any:
    """make_inputs(rng, n, count, dtype) -> one array per rank, values that keep sums finite."""

    def make(rng: np.random.Generator, n: int, count: int, dtype: str) -> list[np.ndarray]:
        if dtype == "int32":
            return [rng.integers(-(2**31), 2**31, count, dtype=np.int64).astype(np.int32)
                    for _ in range(n)]  # fmt: skip
        scale = 8.0 if dtype == "float16" else 1e3
        return [(rng.uniform(0.5, 1.5, count) * rng.choice([-scale, scale], count)
                 * rng.uniform(0.01, 1, count)).astype(dtype) for _ in range(n)]  # fmt: skip

    return make


# --------------------------------------------------------------------------- the tests' own ranks
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

    head = exact(8)
    if head is None:
        return None
    kind, length = struct.unpack("<II", head)
    body = exact(length)
    return None if body is None else (kind, body)


def _frame(kind: int, payload: bytes) -> bytes:
    return struct.pack("<II", kind, len(payload)) + payload


@pytest.fixture(scope="module")
def peers() -> Any:
    """Ranks the tests run in place of yours (cluster.run's `roles`): each factory returns a
    role, fn(comm, x, kwargs). A `done` pipe (done()) lets a recording rank tell the waiting
    ones that the test has seen what it wanted, so they leave at once."""

    class Peers:
        @staticmethod
        def done() -> tuple[int, int]:
            return os.pipe()

        @staticmethod
        def first_slices_then_leave(
            slice_elems: int, pipe: tuple[int, int], limit: float, k: int = 1
        ) -> Any:
            """Send your right neighbour only the first k slices of your reduce-scatter chunk,
            wait until the recorder is done (at most `limit` s), then close every socket."""

            def role(comm: Any, x: np.ndarray, kwargs: dict[str, Any]) -> None:
                a, b = _bounds(x.size, comm.size)[comm.rank]
                for j in range(k):
                    part = x[a + j * slice_elems : min(b, a + (j + 1) * slice_elems)]
                    comm.peer(comm.right).sendall(_frame(0, part.tobytes()))
                select.select([pipe[0]], [], [], limit)
                for s in comm.peers.values():
                    s.close()

            return role

        @staticmethod
        def ring_steps_then(fail: str, steps: int) -> Any:
            """The ring, faithfully (README, "The ring, exactly"), for `steps` of its 2(n-1)
            receiving steps (reduce-scatter first, then all-gather), then die or stall."""

            def role(comm: Any, x: np.ndarray, kwargs: dict[str, Any]) -> None:
                n, r = comm.size, comm.rank
                se, op = kwargs.get("slice_elems", 1 << 16), kwargs.get("op", "sum")
                out, bounds = x.copy(), _bounds(x.size, comm.size)
                right, left = comm.peer(comm.right), comm.peer(comm.left)

                def frames(c: int) -> list[tuple[int, int]]:
                    a, b = bounds[c]
                    return [(a, b)] if a == b else [(i, min(i + se, b)) for i in range(a, b, se)]

                for a, b in frames(r):
                    right.sendall(_frame(0, out[a:b].tobytes()))
                for step in range(steps):
                    gather = step >= n - 1
                    c = (r - step - 1) % n if not gather else (r - (step - (n - 1))) % n
                    for a, b in frames(c):
                        f = _read_frame(left)
                        if f is None:
                            os._exit(18)
                        got = np.frombuffer(f[1], dtype=out.dtype)
                        out[a:b] = got if gather else _op(op, got, out[a:b])
                        if step < 2 * (n - 1) - 1:
                            right.sendall(_frame(0, out[a:b].tobytes()))
                time.sleep(0.05)
                if fail == "die":
                    os._exit(17)
                time.sleep(3600)

            return role

        @staticmethod
        def record_from_left(frames: int, pipe: tuple[int, int]) -> Any:
            """Read up to `frames` frames from the left neighbour (until EOF or nothing for
            comm.timeout s) and return them as [kind, hex payload]; then say done."""

            def role(comm: Any, x: np.ndarray, kwargs: dict[str, Any]) -> list[list[Any]]:
                got: list[list[Any]] = []
                while len(got) < frames:
                    f = _read_frame(comm.peer(comm.left))
                    if f is None:
                        break
                    got.append([f[0], f[1].hex()])
                os.write(pipe[1], b"x")
                return got

            return role

        @staticmethod
        def wait_then_leave(pipe: tuple[int, int], limit: float) -> Any:
            def role(comm: Any, x: np.ndarray, kwargs: dict[str, Any]) -> None:
                select.select([pipe[0]], [], [], limit)
                for s in comm.peers.values():
                    s.close()

            return role

        @staticmethod
        def abort(to: list[int], names: int, reason: str = "test") -> Any:
            """Send ABORT naming `names` to the ranks `to`, then stay (alive, silent)."""

            def role(comm: Any, x: np.ndarray, kwargs: dict[str, Any]) -> None:
                body = struct.pack("<I", names) + reason.encode()
                for k in to:
                    comm.peer(k).sendall(_frame(1, body))
                time.sleep(3600)

            return role

        @staticmethod
        def rd_first_message_then(fail: str) -> Any:
            """Recursive doubling up to this rank's first message sent (the fold to r - p, or
            the first exchange with r ^ 1 after folding r + p in), then die or stall."""

            def role(comm: Any, x: np.ndarray, kwargs: dict[str, Any]) -> None:
                n, r = comm.size, comm.rank
                p = 1 << (n.bit_length() - 1)
                v = x.copy()
                if r >= p:
                    comm.peer(r - p).sendall(_frame(0, v.tobytes()))
                else:
                    if r + p < n:
                        f = _read_frame(comm.peer(r + p))
                        if f is None:
                            os._exit(18)
                        v = _op(kwargs.get("op", "sum"), v, np.frombuffer(f[1], dtype=v.dtype))
                    comm.peer(r ^ 1).sendall(_frame(0, v.tobytes()))
                time.sleep(0.05)
                if fail == "die":
                    os._exit(17)
                time.sleep(3600)

            return role

    return Peers()


# Errors that say "the job failed around this rank", as opposed to a bug of its own.
FAULT_ERRORS = {
    "RankFailure", "TimeoutError", "EOFError", "ConnectionResetError", "BrokenPipeError",
    "ConnectionAbortedError", "ConnectionError", "OSError",
}  # fmt: skip


@pytest.fixture(scope="module")
def honest_errors() -> Any:
    """honest_errors(job, allowed=FAULT_ERRORS): raise what a rank of yours raised when it is
    not one of `allowed` (a bug of its own, a todo(): the test fails with your exception, not
    with a property the test checks)."""

    def check(job: Any, allowed: set[str] = FAULT_ERRORS) -> None:
        for r in job.results:
            if r.rank not in job.roles and r.error_type and r.error_type not in allowed:
                job.check()

    return check
