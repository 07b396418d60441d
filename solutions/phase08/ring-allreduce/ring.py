"""Tasks "ring", "pipeline", "small" and "faults": all-reduce between real processes.

Every function here runs in each rank's process at once, with that rank's `comm` (comm.py) and
its input `x` (a 1-D numpy array, float32, float16 or int32), and returns the reduced array:
every rank returns the same bits. The README gives the exact schedule and wire format.
"""

from __future__ import annotations

import queue
import struct
import threading

import numpy as np

from .comm import ABORT, DATA, HEADER, Comm, RankFailure
from .wire import recv_frame, send_frame

SLICE_ELEMS = 1 << 16  # elements per frame of the ring (64 KiB of float32)
THRESHOLD_BYTES = 1 << 15  # all_reduce: below this many bytes, recursive doubling


def reduce_op(op: str, received: np.ndarray, local: np.ndarray) -> np.ndarray:
    """op(received, local) elementwise, in the arrays' dtype: "sum" or "max"."""
    if op == "sum":
        return np.add(received, local)
    if op == "max":
        return np.maximum(received, local)
    raise ValueError(f"unknown op {op!r}: use 'sum' or 'max'")


def chunk_bounds(count: int, n: int) -> list[tuple[int, int]]:
    """[start, end) of each of the n chunks of `count` elements: the first count % n chunks
    have one element more than the others."""
    q, rem = divmod(count, n)
    out, start = [], 0
    for c in range(n):
        end = start + q + (1 if c < rem else 0)
        out.append((start, end))
        start = end
    return out


def _slices(start: int, end: int, slice_elems: int) -> list[tuple[int, int]]:
    if end == start:
        return [(start, end)]  # an empty chunk still goes as one (empty) frame
    return [(a, min(a + slice_elems, end)) for a in range(start, end, slice_elems)]


# --------------------------------------------------------------------------- failures
def _recv(comm: Comm, k: int) -> bytes:
    """The next DATA payload from rank k; RankFailure when k is gone, silent or aborted."""
    try:
        kind, payload = recv_frame(comm.peer(k))
    except TimeoutError:
        raise RankFailure(k, f"no data from rank {k} for {comm.timeout} s") from None
    except (EOFError, OSError) as e:
        raise RankFailure(k, f"connection to rank {k} lost: {e}") from None
    if kind == ABORT:
        (failed,) = struct.unpack_from("<I", payload)
        raise RankFailure(failed, f"rank {k} aborted: {payload[4:].decode(errors='replace')}")
    if kind != DATA:
        raise ValueError(f"rank {k} sent a frame of unknown kind {kind}")
    return payload


def _send(comm: Comm, k: int, payload: bytes) -> None:
    try:
        send_frame(comm.peer(k), payload)
    except (TimeoutError, OSError) as e:
        raise RankFailure(k, f"sending to rank {k} failed: {e}") from None


def _abort(comm: Comm, failure: RankFailure) -> None:
    """Tell every other rank (best effort, without waiting long) that `failure.rank` failed."""
    body = struct.pack("<I", failure.rank) + failure.reason.encode()[:200]
    frame = HEADER.pack(ABORT, len(body)) + body
    for k in range(comm.size):
        if k == comm.rank or k == failure.rank:
            continue
        sock = comm.peer(k)
        try:
            sock.settimeout(0.2)
            sock.sendall(frame)
        except OSError:
            pass
        finally:
            try:
                sock.settimeout(comm.timeout)
            except OSError:
                pass


def _guarded(comm: Comm, body: callable) -> np.ndarray:  # type: ignore[valid-type]
    try:
        return body()
    except RankFailure as failure:
        _abort(comm, failure)
        raise


# --------------------------------------------------------------------------- the ring
class _Sender:
    """A thread that sends frames to one peer in the order they were queued, so that this rank
    keeps receiving (and reducing) while its previous slices are still on their way."""

    def __init__(self, comm: Comm, k: int) -> None:
        self.comm, self.k = comm, k
        self.q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.error: RankFailure | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.q.get()) is not None:
            if self.error is None:
                try:
                    _send(self.comm, self.k, item)
                except RankFailure as e:
                    self.error = e

    def put(self, payload: bytes) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(payload)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(self.comm.timeout * 2 + 1)
        if self.error is not None:
            raise self.error
        if self.thread.is_alive():
            raise RankFailure(self.k, f"sending to rank {self.k} did not finish")


def ring_allreduce(
    comm: Comm, x: np.ndarray, op: str = "sum", slice_elems: int = SLICE_ELEMS
) -> np.ndarray:
    """Reduce-scatter then all-gather around the ring, pipelined slice by slice.

    Chunk c (chunk_bounds) is reduced in the order rank c, c+1, ..., c+n-1: at reduce-scatter
    step s (0..n-2) rank r sends chunk (r - s) % n to its right and receives chunk
    (r - s - 1) % n from its left, storing op(received, its own); at all-gather step s it sends
    chunk (r + 1 - s) % n and receives chunk (r - s) % n, storing it. Every chunk travels as
    frames of at most slice_elems elements. A rank forwards each slice as soon as it has it."""
    if op not in ("sum", "max"):
        raise ValueError(f"unknown op {op!r}: use 'sum' or 'max'")
    n, r = comm.size, comm.rank
    out = np.array(x, copy=True)
    if n == 1:
        return out
    bounds = chunk_bounds(out.size, n)
    dtype = out.dtype

    def body() -> np.ndarray:
        sender = _Sender(comm, comm.right)
        try:
            a, b = bounds[r]
            for s0, e0 in _slices(a, b, slice_elems):
                sender.put(out[s0:e0].tobytes())
            for step in range(2 * (n - 1)):
                gather = step >= n - 1
                c = (r - step - 1) % n if not gather else (r - (step - (n - 1))) % n
                forward = step < 2 * (n - 1) - 1
                for s0, e0 in _slices(*bounds[c], slice_elems):
                    got = np.frombuffer(_recv(comm, comm.left), dtype=dtype)
                    if got.size != e0 - s0:
                        raise ValueError(
                            f"rank {comm.left} sent {got.size} elements, expected {e0 - s0}"
                        )
                    if gather:
                        out[s0:e0] = got
                    else:
                        out[s0:e0] = reduce_op(op, got, out[s0:e0])
                    if forward:
                        sender.put(out[s0:e0].tobytes())
        except BaseException:
            sender.q.put(None)
            raise
        sender.close()
        return out

    return _guarded(comm, body)


# --------------------------------------------------------------------------- small messages
def _exchange(comm: Comm, k: int, payload: bytes) -> bytes:
    """Send `payload` to rank k while receiving rank k's (a thread for big payloads, so two
    ranks that both send first never wait on each other's full buffers)."""
    if len(payload) <= 1 << 15:
        _send(comm, k, payload)
        return _recv(comm, k)
    error: list[RankFailure] = []

    def send() -> None:
        try:
            _send(comm, k, payload)
        except RankFailure as e:
            error.append(e)

    th = threading.Thread(target=send, daemon=True)
    th.start()
    got = _recv(comm, k)
    th.join(comm.timeout * 2 + 1)
    if error:
        raise error[0]
    return got


def recursive_doubling_allreduce(comm: Comm, x: np.ndarray, op: str = "sum") -> np.ndarray:
    """All-reduce in ceil(log2 n) exchange rounds (+2 when n is not a power of two).

    p = the largest power of two <= n. Ranks r >= p first send x to rank r - p, which keeps
    op(its own, received). Then for d = 1, 2, 4, ... < p: ranks r and r ^ d exchange their
    values and both keep op(value of the lower rank, value of the higher rank). Last, rank
    r - p sends the result to rank r for every r >= p. Each message is one DATA frame."""
    if op not in ("sum", "max"):
        raise ValueError(f"unknown op {op!r}: use 'sum' or 'max'")
    n, r = comm.size, comm.rank
    v = np.array(x, copy=True)
    if n == 1:
        return v
    p = 1 << (n.bit_length() - 1)
    dtype = v.dtype

    def body() -> np.ndarray:
        nonlocal v
        if r >= p:
            _send(comm, r - p, v.tobytes())
            return np.frombuffer(_recv(comm, r - p), dtype=dtype).copy()
        if r + p < n:
            got = np.frombuffer(_recv(comm, r + p), dtype=dtype)
            v = reduce_op(op, got, v)
        d = 1
        while d < p:
            k = r ^ d
            got = np.frombuffer(_exchange(comm, k, v.tobytes()), dtype=dtype)
            v = reduce_op(op, got, v) if k < r else reduce_op(op, v, got)
            d <<= 1
        if r + p < n:
            _send(comm, r + p, v.tobytes())
        return v

    return _guarded(comm, body)


def all_reduce(
    comm: Comm, x: np.ndarray, op: str = "sum", threshold_bytes: int = THRESHOLD_BYTES
) -> np.ndarray:
    """Recursive doubling for messages under threshold_bytes (latency-bound), the ring from
    there on (bandwidth-bound)."""
    if x.nbytes < threshold_bytes:
        return recursive_doubling_allreduce(comm, x, op)
    return ring_allreduce(comm, x, op)


__all__ = [
    "SLICE_ELEMS",
    "THRESHOLD_BYTES",
    "all_reduce",
    "chunk_bounds",
    "recursive_doubling_allreduce",
    "reduce_op",
    "ring_allreduce",
]
