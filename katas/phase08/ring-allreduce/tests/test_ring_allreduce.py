"""Public tests of ring-allreduce, tasks "framing" (wire.py) and "ring" (ring.py)."""

from __future__ import annotations

import struct
import time
from typing import Any

import numpy as np
import pytest


# --------------------------------------------------------------------------- framing
def test_framing_round_trip(wire: Any, tcp_pair: Any, background: Any) -> None:
    a, b = tcp_pair()
    for payload in (b"", b"x", bytes(range(256)) * 3):
        wire.send_frame(a, payload)
        assert wire.recv_frame(b) == (0, payload)
    wire.send_frame(a, b"\x07\x00\x00\x00why", kind=1)
    assert wire.recv_frame(b) == (1, b"\x07\x00\x00\x00why")
    big = np.arange(1 << 20, dtype=np.int32).tobytes()  # 4 MiB: more than the socket buffers
    join = background(wire.send_frame, a, big)
    assert wire.recv_frame(b) == (0, big)
    join()


def test_framing_header_is_the_wire_format(wire: Any, tcp_pair: Any) -> None:
    a, b = tcp_pair()
    wire.send_frame(a, b"hello", kind=0)
    raw = b""
    while len(raw) < 13:
        raw += b.recv(13 - len(raw))
    assert raw == struct.pack("<II", 0, 5) + b"hello"


def test_framing_bytes_arrive_in_pieces(wire: Any, tcp_pair: Any, background: Any) -> None:
    a, b = tcp_pair()
    frame = struct.pack("<II", 0, 10) + b"0123456789" + struct.pack("<II", 0, 3) + b"abc"

    def dribble() -> None:
        for i in range(len(frame)):
            a.sendall(frame[i : i + 1])
            time.sleep(0.002)

    join = background(dribble)
    assert wire.recv_frame(b) == (0, b"0123456789")
    assert wire.recv_frame(b) == (0, b"abc")
    join()
    assert wire.recv_exact(b, 0) == b""


def test_framing_eof_mid_frame(wire: Any, tcp_pair: Any) -> None:
    a, b = tcp_pair()
    a.sendall(struct.pack("<II", 0, 100) + b"only 20 bytes here..")
    a.close()
    with pytest.raises(EOFError):
        wire.recv_frame(b)


# --------------------------------------------------------------------------- ring
def test_ring_three_ranks(ring: Any, cluster: Any, oracle: Any) -> None:
    xs = [np.arange(10, dtype=np.float32) * (r + 1) for r in range(3)]
    outs = cluster.run(ring.ring_allreduce, xs, op="sum").outputs()
    for r, out in enumerate(outs):
        assert out.dtype == np.float32 and out.shape == (10,)
        np.testing.assert_array_equal(out, np.arange(10, dtype=np.float32) * 6, err_msg=f"rank {r}")


def test_ring_sizes_dtypes_ops(ring: Any, cluster: Any, oracle: Any, make_inputs: Any) -> None:
    rng = np.random.default_rng(8)
    for n, count, dtype, op in [
        (2, 1, "float32", "sum"),
        (4, 3, "int32", "sum"),  # fewer elements than ranks: an empty chunk
        (5, 1001, "float32", "max"),
        (3, 700, "float16", "max"),
    ]:
        xs = make_inputs(rng, n, count, dtype)
        outs = cluster.run(ring.ring_allreduce, xs, op=op, slice_elems=64).outputs()
        want = oracle.ring(xs, op)
        for r, out in enumerate(outs):
            assert out.dtype == want.dtype, f"n={n} {dtype}: rank {r} returned {out.dtype}"
            np.testing.assert_array_equal(out, want, err_msg=f"n={n} count={count} {dtype} {op}")


def test_ring_float16_sum_within_tolerance(
    ring: Any, cluster: Any, oracle: Any, make_inputs: Any
) -> None:
    xs = make_inputs(np.random.default_rng(3), 4, 999, "float16")
    outs = cluster.run(ring.ring_allreduce, xs, op="sum", slice_elems=100).outputs()
    exact = oracle.exact(xs, "sum")
    bound = 3 * 2.0**-11 * np.abs(np.array(xs, dtype=np.float64)).sum(axis=0) + 2.0**-24
    for out in outs:
        assert np.all(np.abs(out.astype(np.float64) - exact) <= bound)
        np.testing.assert_array_equal(out, outs[0])


def test_ring_bytes_on_each_link(ring: Any, cluster: Any, oracle: Any) -> None:
    n, count, slice_elems = 4, 1003, 100
    xs = [np.ones(count, np.float32) for _ in range(n)]
    job = cluster.run(ring.ring_allreduce, xs, op="sum", slice_elems=slice_elems)
    job.outputs()
    want = oracle.ring_link_bytes(n, count, 4, slice_elems)
    for src in range(n):
        for dst in range(n):
            if src != dst:
                expected = want[src] if dst == (src + 1) % n else 0
                assert job.link_bytes(src, dst) == expected, (src, dst)
