"""Fixtures of the ring-allreduce tests: your modules and the given ones, loaded once per module,
and what the tests compute themselves (never with your code): the ring's result in the ring's
order, recursive doubling's result in its order, and the bytes each algorithm puts on each link."""

from __future__ import annotations

import socket
import threading
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
@pytest.fixture(scope="module")
def peers(cluster: Any) -> Any:
    """Ranks the tests run in place of yours (cluster.run's `roles`): each factory returns a
    cluster.Role, run in a rank process of its own, started like yours (cluster.py has their
    code). The recording rank tells the waiting ones (through a pipe every rank of the job
    holds) that the test has seen what it wanted, so they leave at once."""

    class Peers:
        @staticmethod
        def first_slices_then_leave(slice_elems: int, limit: float, k: int = 1) -> Any:
            """Send your right neighbour only the first k slices of your reduce-scatter chunk,
            wait until the recorder is done (at most `limit` s), then close every socket."""
            return cluster.role(
                "first_slices_then_leave", slice_elems=slice_elems, limit=limit, k=k
            )

        @staticmethod
        def ring_steps_then(fail: str, steps: int) -> Any:
            """The ring, faithfully (README, "The ring, exactly"), for `steps` of its 2(n-1)
            receiving steps (reduce-scatter first, then all-gather), then die or stall."""
            return cluster.role("ring_steps_then", fail=fail, steps=steps)

        @staticmethod
        def record_from_left(frames: int) -> Any:
            """Read up to `frames` frames from the left neighbour (until EOF or nothing for
            comm.timeout s) and return them as [kind, hex payload]; then say done."""
            return cluster.role("record_from_left", frames=frames)

        @staticmethod
        def wait_then_leave(limit: float) -> Any:
            return cluster.role("wait_then_leave", limit=limit)

        @staticmethod
        def abort(to: list[int], names: int, reason: str = "test") -> Any:
            """Send ABORT naming `names` to the ranks `to`, then stay (alive, silent)."""
            return cluster.role("abort", to=list(to), names=names, reason=reason)

        @staticmethod
        def rd_first_message_then(fail: str) -> Any:
            """Recursive doubling up to this rank's first message sent (the fold to r - p, or
            the first exchange with r ^ 1 after folding r + p in), then die or stall."""
            return cluster.role("rd_first_message_then", fail=fail)

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
