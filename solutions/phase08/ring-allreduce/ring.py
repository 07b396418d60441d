"""Tasks "ring", "pipeline", "small" and "faults": all-reduce between real processes.

Every function here runs in each rank's process at once, with that rank's `comm` (comm.py) and
its input `x` (a 1-D numpy array, float32, float16 or int32), and returns the reduced array:
every rank returns the same bits. The README gives the exact schedule and wire format.
"""

from __future__ import annotations

import queue
import select
import struct
import threading
import time

import numpy as np

from .comm import ABORT, DATA, HEADER, Comm, RankFailure
from .wire import recv_frame, send_frame

SLICE_ELEMS = 1 << 16  # elements per frame of the ring (256 KiB of float32)
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
class _Sign(Exception):
    """The first sign of a failure this rank saw, while it waited on rank `rank`: no progress
    for comm.timeout s, the connection gone (`dead`), or an ABORT from `rank` saying that rank
    `named` is what *it* waits on."""

    def __init__(self, rank: int, reason: str, dead: bool = False, named: int | None = None):
        super().__init__(reason)
        self.rank, self.reason, self.dead, self.named = rank, reason, dead, named


def _recv(comm: Comm, k: int) -> bytes:
    """The next DATA payload from rank k; _Sign when k is gone, silent or aborted."""
    try:
        kind, payload = recv_frame(comm.peer(k))
    except TimeoutError:
        raise _Sign(k, f"no data from rank {k} for {comm.timeout} s") from None
    except (EOFError, OSError) as e:
        raise _Sign(k, f"connection to rank {k} lost: {e}", dead=True) from None
    if kind == ABORT and len(payload) >= 4:
        (named,) = struct.unpack_from("<I", payload)
        why = payload[4:].decode(errors="replace")
        raise _Sign(k, f"rank {k} aborted ({why})", named=named)
    if kind != DATA:
        raise ValueError(f"rank {k} sent a frame of unknown kind {kind}")
    return payload


def _send(comm: Comm, k: int, payload: bytes) -> None:
    try:
        send_frame(comm.peer(k), payload)
    except TimeoutError:
        raise _Sign(k, f"sending to rank {k} made no progress for {comm.timeout} s") from None
    except OSError as e:
        raise _Sign(k, f"sending to rank {k} failed: {e}", dead=True) from None


def _publish(comm: Comm, waits_on: int, reason: str, skip: set[int]) -> None:
    """ABORT to every other rank (best effort, 0.2 s each): "I give up; I was waiting on
    `waits_on`"."""
    body = struct.pack("<I", waits_on) + reason.encode()[:200]
    frame = HEADER.pack(ABORT, len(body)) + body
    for k in range(comm.size):
        if k == comm.rank or k in skip:
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


def _collect(comm: Comm, waits: dict[int, int], dead: set[int], until: float) -> None:
    """Read every other rank's ABORT (who it waits on) until `until`, or until the only rank
    still silent is one somebody waits on (the end of the chain): DATA on the way is dropped."""
    others = [k for k in range(comm.size) if k != comm.rank]
    socks = {comm.peer(k): k for k in others if k not in waits}
    while socks:
        silent = [k for k in others if k not in waits and k not in dead]
        if dead or not silent or (len(silent) == 1 and silent[0] in waits.values()):
            return
        left = until - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select(list(socks), [], [], left)
        for sock in ready:
            k = socks[sock]
            try:
                sock.settimeout(max(until - time.monotonic(), 0.01))
                kind, payload = recv_frame(sock)
            except TimeoutError:  # a frame that stops half-way: stop watching that rank
                del socks[sock]
                continue
            except (EOFError, OSError):
                dead.add(k)
                del socks[sock]
                continue
            finally:
                try:
                    sock.settimeout(comm.timeout)
                except OSError:
                    pass
            if kind == ABORT and len(payload) >= 4:
                waits[k] = struct.unpack_from("<I", payload)[0]
                del socks[sock]


def _resolve(comm: Comm, sign: _Sign) -> RankFailure:
    """Which rank failed: not always the one this rank waited on, which may be waiting itself.
    Every rank that gives up says whom it waited on (ABORT); the failed rank is at the end of
    the chain of waits, the one rank that says nothing (or whose connection is gone)."""
    me = comm.rank
    dead = {sign.rank} if sign.dead else set()
    waits = {me: sign.rank}
    if sign.named is not None:
        waits[sign.rank] = sign.named
    _publish(comm, sign.rank, sign.reason, skip=dead)
    _collect(comm, waits, dead, time.monotonic() + comm.timeout / 2)
    if dead:
        failed = sign.rank if sign.rank in dead else min(dead)
        return RankFailure(failed, f"rank {failed} is gone ({sign.reason})")
    chain, x = [me], me
    while x in waits and waits[x] not in chain:
        x = waits[x]
        chain.append(x)
    failed = x if x != me else sign.rank
    path = " -> ".join(map(str, chain))
    return RankFailure(failed, f"ranks waiting on each other: {path} ({sign.reason})")


def _guarded(comm: Comm, body: callable) -> np.ndarray:  # type: ignore[valid-type]
    try:
        return body()
    except _Sign as sign:
        raise _resolve(comm, sign) from None


# --------------------------------------------------------------------------- the ring
class _Sender:
    """A thread that sends frames to one peer in the order they were queued, so that this rank
    keeps receiving (and reducing) while its previous slices are still on their way."""

    def __init__(self, comm: Comm, k: int) -> None:
        self.comm, self.k = comm, k
        self.q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.error: _Sign | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.q.get()) is not None:
            if self.error is None:
                try:
                    _send(self.comm, self.k, item)
                except _Sign as e:
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
            raise _Sign(self.k, f"sending to rank {self.k} did not finish")


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
    error: list[_Sign] = []

    def send() -> None:
        try:
            _send(comm, k, payload)
        except _Sign as e:
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
    op(received, its own). Then for d = 1, 2, 4, ... < p: ranks r and r ^ d exchange their
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
