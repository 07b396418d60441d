"""Public tests: worked examples (an 8-GPU node's masks, a 1024-GPU job on spot, a 70B model's
checkpoint, a week of demand), one group per task. The hidden tests ask the same questions about
fleets, jobs, price lists and demand curves drawn fresh at every run, and compare with an
independent calculation."""

from __future__ import annotations

from typing import Any

import pytest

APPROX = dict(rel=1e-9)
CKPT_70B = 987_751_890_944  # 70.55 B parameters x 14 bytes (weights, master copy, Adam moments)


# ------------------------------------------------------------------------------ pack
def test_pack_aligned_blocks(gc: Any) -> None:
    assert gc.free_blocks(0b0000_0000, 8) == 1, "an empty node holds one 8-GPU instance"
    assert gc.free_blocks(0b0000_0001, 2) == 3, "GPU 0 taken: blocks 2-3, 4-5, 6-7 are free"
    assert gc.free_blocks(0b0000_0001, 4) == 1, "GPU 0 taken: only 4-7"
    assert gc.free_blocks(0b0010_0010, 4) == 0, "GPUs 1 and 5 taken: 6 free GPUs, no 4-GPU block"
    assert gc.free_blocks(0b0001_0001, 2) == 2, "GPUs 0 and 4 taken: 2-3 and 6-7"


def test_pack_stranded(gc: Any) -> None:
    nodes = [0b0000_0001, 0b0010_0010, 0b0101_0101]
    assert gc.stranded_gpus(nodes, 4) == 13, "17 free GPUs, one 4-GPU block"
    assert gc.stranded_gpus(nodes, 2) == 7, "17 free GPUs, five 2-GPU blocks"
    assert gc.stranded_gpus(nodes, 1) == 0, "a 1-GPU instance uses any free GPU"


def test_pack_nodes_needed(gc: Any) -> None:
    assert gc.nodes_for({1: 5, 2: 3, 4: 2, 8: 1}) == 4, "27 GPUs of aligned shapes: 4 nodes"
    assert gc.nodes_for({1: 3, 2: 1, 4: 1}) == 2, "9 GPUs share 2 nodes; no node per shape"
    assert gc.nodes_for({8: 3}) == 3
    assert gc.nodes_for({1: 1}) == 1


# ------------------------------------------------------------------------------ spot
def test_spot_one_stretch(gc: Any) -> None:
    assert gc.segment_s(3600, 900, 0) == pytest.approx(3600, **APPROX), "no preemptions"
    assert gc.segment_s(3720, 900, 0.5 / 3600) == pytest.approx(5479.084823232002, **APPROX), (
        "an hour and a checkpoint at one preemption every 2 hours: 52 % longer on average"
    )


def test_spot_two_week_job(gc: Any, cl: Any) -> None:
    job = cl.SpotJob(
        work_s=14 * 86_400, interval_s=3600, ckpt_s=120, restart_s=900, preempt_per_hour=0.5,
        gpus=1024,
    )  # fmt: skip
    assert gc.expected_job_s(job) == pytest.approx(1840748.058075392, **APPROX), "21.3 days"
    assert gc.spot_cost_usd(job, 1.5) == pytest.approx(785385.8381121673, **APPROX), (
        "at $1.50 per GPU-hour: $785k, against $1.38M on demand at $4"
    )


def test_spot_last_stretch_has_no_checkpoint(gc: Any, cl: Any) -> None:
    job = cl.SpotJob(10_000, 3600, 120, 900, 0.5, 8)
    assert gc.expected_job_s(job) == pytest.approx(14808.428631938044, **APPROX), (
        "two stretches of 3600 + 120 s and a last one of 2800 s"
    )


# ------------------------------------------------------------------------------ transfer
def test_transfer_link_time(gc: Any) -> None:
    assert gc.transfer_s(CKPT_70B, 100, 0.8) == pytest.approx(98.7751890944, **APPROX), (
        "a 70B model's 988 GB checkpoint over 100 Gbit/s at 80 %"
    )
    assert gc.transfer_s(10**15, 10) == pytest.approx(800_000, **APPROX), "1 PB over 10 Gbit/s"


def test_transfer_egress_bill(gc: Any) -> None:
    assert gc.egress_micro_usd(CKPT_70B) == 88_920_000, "988 GB at $0.09"
    assert gc.egress_micro_usd(10**9 + 1) == 180_000, "billed in whole GB"
    assert gc.egress_micro_usd(200 * 10**12) == 13_800_000_000, (
        "200 TB: 10 TB at 0.09, 40 at 0.085, 100 at 0.07, 50 at 0.05"
    )
    assert gc.monthly_checkpoint_egress_micro_usd(CKPT_70B, 24) == 39_359_100_000, (
        "an hourly copy for 30 days is 711 TB in one month's bill: $39k, not 720 x $88.92"
    )


# ------------------------------------------------------------------------------ reserve
def _week() -> list[int]:
    """400 GPUs at night, 700 from 9:00 to 18:00, 800 at noon."""
    return [
        400 + (300 if 9 <= h % 24 < 18 else 0) + (100 if h % 24 == 12 else 0) for h in range(168)
    ]


def test_reserve_fleet_cost(gc: Any) -> None:
    week = _week()
    assert gc.fleet_cost(week, 0, 1_500_000, 4_000_000) == 347_200_000_000, "all on demand"
    assert gc.fleet_cost(week, 400, 1_500_000, 4_000_000) == 179_200_000_000
    assert gc.fleet_cost(week, 800, 1_500_000, 4_000_000) == 201_600_000_000, (
        "reserved for the peak"
    )


def test_reserve_best(gc: Any) -> None:
    week = _week()
    assert gc.best_reserved(week, 1_500_000, 4_000_000) == 400, "$1.50 reserved against $4"
    assert gc.best_reserved(week, 1_000_000, 4_000_000) == 700, "at $1 the business hours pay"
    assert gc.best_reserved(week, 100_000, 4_000_000) == 800, "nearly free: reserve the peak"
    assert gc.best_reserved(week, 4_000_000, 4_000_000) == 0, "as dear as on demand: no gain"
