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
    outs = cluster.run(ring.ring_allreduce, xs).outputs()
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
    outs = cluster.run(ring.ring_allreduce, xs, slice_elems=100).outputs()
    exact = oracle.exact(xs, "sum")
    bound = 3 * 2.0**-11 * np.abs(np.array(xs, dtype=np.float64)).sum(axis=0) + 2.0**-24
    for out in outs:
        assert np.all(np.abs(out.astype(np.float64) - exact) <= bound)
        np.testing.assert_array_equal(out, outs[0])


def test_ring_bytes_on_each_link(ring: Any, cluster: Any, oracle: Any) -> None:
    n, count, slice_elems = 4, 1003, 100
    xs = [np.ones(count, np.float32) for _ in range(n)]
    job = cluster.run(ring.ring_allreduce, xs, slice_elems=slice_elems)
    job.outputs()
    want = oracle.ring_link_bytes(n, count, 4, slice_elems)
    for src in range(n):
        for dst in range(n):
            if src != dst:
                expected = want[src] if dst == (src + 1) % n else 0
                assert job.link_bytes(src, dst) == expected, (src, dst)


# --------------------------------------------------------------------------- pipeline
def test_pipeline_no_deadlock_with_small_buffers(ring: Any, cluster: Any, oracle: Any) -> None:
    """Socket buffers of 4 KiB, chunks of 40 KB: a rank that sends a whole chunk before it reads
    waits for its neighbour, who waits for its own: the classic ring deadlock."""
    n, count, slice_elems = 3, 30_000, 1024
    xs = [np.arange(count, dtype=np.float32) * (r + 1) for r in range(n)]
    job = cluster.run(ring.ring_allreduce, xs, slice_elems=slice_elems, bufsize=4096, timeout=5.0)
    want = oracle.ring(xs, "sum")
    for r, out in enumerate(job.outputs()):
        np.testing.assert_array_equal(out, want, err_msg=f"rank {r}")


def test_pipeline_forwards_a_slice_before_its_chunk_is_complete(
    ring: Any, cluster: Any, peers: Any, honest_errors: Any
) -> None:
    """Rank 0 (the tests') sends rank 1 only the first slice of its chunk and waits; rank 2
    (the tests') records what rank 1 sends: its own chunk, then that slice, reduced."""
    n, slice_elems, count = 3, 8, 60  # chunks of 20 elements: 3 slices each
    xs = [np.arange(count, dtype=np.float32) + 100 * r for r in range(n)]
    own = len(cluster.slices(20, 40, slice_elems))
    job = cluster.run(
        ring.ring_allreduce, xs, slice_elems=slice_elems, timeout=3.0, deadline=15.0,
        roles={0: peers.first_slices_then_leave(slice_elems, 10.0),
               2: peers.record_from_left(own + 1)},
    )  # fmt: skip
    honest_errors(job)
    frames = job.results[2].role_value or []
    aborts = [i + 1 for i, f in enumerate(frames) if f[0] != 0]
    assert not aborts, (
        f"rank 1 sent rank 2 an ABORT as frame(s) {aborts}: it gave up waiting for the rest of "
        "the chunk instead of forwarding the reduced slice that had arrived"
    )
    assert len(frames) == own + 1, (
        f"rank 1 sent {len(frames)} frames: its chunk ({own} frames), then nothing, although "
        "the first slice of the chunk it reduces had arrived"
    )
    want = (xs[0][0:8] + xs[1][0:8]).tobytes().hex()
    assert frames[own] == [0, want], "the forwarded slice is not x0[0:8] + x1[0:8]"


def test_pipeline_busbw_by_message_size(
    ring: Any, cluster: Any, oracle: Any, kata_metrics: dict[str, Any]
) -> None:
    """Your report's picture: busbw (nccl-tests' measure) of your ring and your recursive doubling
    on 3 ranks from 16 KiB to 4 MiB, under the same run's link bandwidth; each result checked."""
    from harness.reports.busbw import busbw_svg

    n, rows = 3, []
    for nbytes in (16 << 10, 256 << 10, 4 << 20):
        xs = [np.full(nbytes // 4, r + 1, np.float32) for r in range(n)]
        row: dict[str, float] = {"bytes": nbytes, "link": cluster.link_bandwidth(n, nbytes, 2)}
        for name in ("ring_allreduce", "recursive_doubling_allreduce"):
            job = cluster.run(getattr(ring, name), xs, repeat=3, deadline=60.0)
            for r, out in enumerate(job.outputs()):
                np.testing.assert_array_equal(out, xs[0] * 6, err_msg=f"{name}: rank {r}")
            best = min(
                max(x.times[i][1] for x in job.results) - max(x.times[i][0] for x in job.results)
                for i in range(3)
            )
            row[name] = cluster.busbw(nbytes, best, n)
        rows.append(row)
    kata_metrics["svg"] = busbw_svg({n: rows}, "your all-reduce: busbw vs message size (3 ranks)")
    kata_metrics["label"] = "busbw of your ring and recursive doubling against the link bandwidth"
    kata_metrics["ring_fraction_of_link_at_4MiB"] = round(
        rows[-1]["ring_allreduce"] / rows[-1]["link"], 3
    )


# --------------------------------------------------------------------------- small
def test_small_recursive_doubling(ring: Any, cluster: Any, oracle: Any, make_inputs: Any) -> None:
    rng = np.random.default_rng(5)
    for n in (2, 3, 4, 6):
        xs = make_inputs(rng, n, 37, "float32")
        job = cluster.run(ring.recursive_doubling_allreduce, xs, op="sum")
        want = oracle.recursive_doubling(xs, "sum")
        for r, out in enumerate(job.outputs()):
            np.testing.assert_array_equal(out, want, err_msg=f"n={n}: rank {r}")
        links = oracle.rd_link_bytes(n, 37 * 4)
        for src in range(n):
            for dst in range(n):
                if src != dst:
                    assert job.link_bytes(src, dst) == links.get((src, dst), 0), (n, src, dst)


def test_small_all_reduce_threshold(ring: Any, cluster: Any, oracle: Any) -> None:
    """threshold_bytes=400: 99 float32 (396 bytes) go by recursive doubling, 100 (400 bytes)
    around the ring."""
    n = 3
    for count, algorithm in ((99, "recursive doubling"), (100, "ring")):
        xs = [np.full(count, r + 1, np.float32) for r in range(n)]
        job = cluster.run(ring.all_reduce, xs, op="sum", threshold_bytes=400)
        for out in job.outputs():
            np.testing.assert_array_equal(out, np.full(count, 6, np.float32))
        if algorithm == "ring":
            want = oracle.ring_link_bytes(n, count, 4, 1 << 30)
            links = {(r, (r + 1) % n): want[r] for r in range(n)}
        else:
            links = oracle.rd_link_bytes(n, count * 4)
        got = {(s, d): job.link_bytes(s, d) for s in range(n) for d in range(n) if s != d}
        assert got == {k: links.get(k, 0) for k in got}, f"{count} float32: not the {algorithm}"


# --------------------------------------------------------------------------- faults
def _failed_as(job: Any, failed: int) -> None:
    for r in job.results:
        if r.rank in job.roles:
            continue
        assert not r.hung, f"rank {r.rank} hung (killed at the job's deadline)"
        assert r.error_type == "RankFailure", f"rank {r.rank}: {r.error or 'returned'}"
        assert r.failed_rank == failed, f"rank {r.rank} named rank {r.failed_rank}, not {failed}"


def test_faults_dead_rank(ring: Any, cluster: Any, honest_errors: Any) -> None:
    xs = [np.ones(1000, np.float32) for _ in range(3)]
    job = cluster.run(
        ring.ring_allreduce, xs, slice_elems=64, timeout=2.0, deadline=10.0,
        roles={1: cluster.die},
    )  # fmt: skip
    honest_errors(job)
    _failed_as(job, 1)


def test_faults_stalled_rank(ring: Any, cluster: Any, honest_errors: Any) -> None:
    """Rank 2 never sends: rank 3 waits on it in the first round, rank 0 in the second, and
    rank 1 waits on rank 3, which is alive: every one of them must name rank 2."""
    xs = [np.ones(50, np.int32) for _ in range(4)]
    job = cluster.run(
        ring.recursive_doubling_allreduce, xs, op="sum", timeout=1.0, deadline=10.0,
        roles={2: cluster.stall},
    )  # fmt: skip
    honest_errors(job)
    _failed_as(job, 2)


def test_faults_abort_names_the_rank_in_it(
    ring: Any, cluster: Any, peers: Any, honest_errors: Any
) -> None:
    """Rank 0 (the tests') tells everyone it gave up waiting on rank 3 (silent): ranks 1 and 2
    raise RankFailure(3) before their own timeout could say anything."""
    xs = [np.ones(100, np.float32) for _ in range(4)]
    job = cluster.run(
        ring.ring_allreduce, xs, slice_elems=64, timeout=4.0, deadline=15.0,
        roles={0: peers.abort([1, 2], 3), 3: cluster.stall},
    )  # fmt: skip
    honest_errors(job)
    _failed_as(job, 3)
    for r in (1, 2):
        took = job.results[r].end - job.start
        assert took < 4.0, f"rank {r} took {took:.1f} s: the ABORT said it all at once"
