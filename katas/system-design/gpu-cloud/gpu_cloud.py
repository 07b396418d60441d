"""A GPU cloud's capacity and cost: the numbers a platform's design review asks for.

Write each function to the model its docstring states (the README explains where each term comes
from). The tests compare your numbers with an independent calculation (placements, simulations,
searches) on fleets, jobs, price lists and demand curves drawn fresh at every run.
"""

from __future__ import annotations

import math  # noqa: F401  (ceil, expm1)

from harness import todo

from .cloud import AWS_EGRESS, GB, GPUS_PER_NODE, SHAPES, SpotJob, Tier  # noqa: F401


# --------------------------------------------------------------------------- pack
def free_blocks(busy: int, size: int) -> int:
    """Instances of `size` GPUs (one of cloud.SHAPES) that still fit on a node whose busy GPUs are
    the set bits of `busy` (bit i: GPU i is taken, 0 <= busy < 2**8). An instance sits on an
    aligned block: GPUs o .. o + size - 1 with o a multiple of size (the NVLink and PCIe-switch
    topology an instance's GPUs share), all free."""
    todo("free_blocks")


def stranded_gpus(busy: list[int], size: int) -> int:
    """Free GPUs of the nodes in `busy` (one mask per node, as in free_blocks) that no instance of
    `size` GPUs can use: every node's free GPUs minus size x its free_blocks."""
    todo("stranded_gpus")


def nodes_for(counts: dict[int, int]) -> int:
    """The fewest empty nodes that hold counts[size] instances of each size (sizes from
    cloud.SHAPES), every instance on an aligned block of one node."""
    todo("nodes_for")


# --------------------------------------------------------------------------- spot
def segment_s(length_s: float, restart_s: float, rate_per_s: float) -> float:
    """Expected wall-clock seconds to get through `length_s` seconds that must run without a
    preemption (preemptions arrive as a Poisson process of rate_per_s while it runs; each one
    costs restart_s, during which nothing is preempted, and the stretch starts over):
    (exp(rate x length) - 1) x (1 / rate + restart_s), and length_s when rate_per_s is 0. (Use
    math.expm1: exp(x) - 1 loses digits when x is small.)"""
    todo("segment_s")


def expected_job_s(job: SpotJob) -> float:
    """Expected wall-clock seconds of the whole job: n = ceil(work_s / interval_s) stretches; each
    of the first n - 1 is interval_s of work and a checkpoint (interval_s + ckpt_s, lost whole if
    preempted before the checkpoint is written), the last is the work that remains, work_s - (n -
    1) x interval_s, with no checkpoint after it. Preemptions: job.preempt_per_hour / 3600 per
    second."""
    todo("expected_job_s")


def spot_cost_usd(job: SpotJob, usd_per_gpu_hour: float) -> float:
    """Expected dollars of the job on spot: expected_job_s in hours x gpus x the hourly price (a
    restart's time is billed too)."""
    todo("spot_cost_usd")


# --------------------------------------------------------------------------- transfer
def transfer_s(nbytes: int, gbps: float, efficiency: float = 1.0) -> float:
    """Seconds to move nbytes over a link of `gbps` gigabits per second (10**9 bits) of which a
    share `efficiency` is achieved: nbytes x 8 / (gbps x 10**9 x efficiency)."""
    todo("transfer_s")


def egress_micro_usd(nbytes: int, tiers: tuple[Tier, ...] = AWS_EGRESS) -> int:
    """The month's egress bill in micro-dollars for nbytes moved out in that month: billed GB =
    ceil(nbytes / cloud.GB), in integers (a float quotient drops the last bytes of a bill past
    10**17 bytes); the tiers price the running total in order (a tier's up_to_gb is a cumulative
    bound; the last tier's is None)."""
    todo("egress_micro_usd")


def monthly_checkpoint_egress_micro_usd(
    ckpt_bytes: int, per_day: int, days: int = 30, tiers: tuple[Tier, ...] = AWS_EGRESS
) -> int:
    """The egress bill of copying a ckpt_bytes checkpoint out per_day times a day for `days`
    days: the month's transfers add up to one total, billed once (egress_micro_usd)."""
    todo("monthly_checkpoint_egress_micro_usd")


# --------------------------------------------------------------------------- reserve
def fleet_cost(demand: list[int], reserved: int, reserved_micro: int, on_demand_micro: int) -> int:
    """Micro-dollars of serving an hourly GPU demand (demand[h]: GPUs needed in hour h) with
    `reserved` GPUs paid every hour at reserved_micro per GPU-hour and on-demand GPUs for what
    exceeds them at on_demand_micro: reserved x hours x reserved_micro + on_demand_micro x
    sum(max(0, d - reserved))."""
    todo("fleet_cost")


def best_reserved(demand: list[int], reserved_micro: int, on_demand_micro: int) -> int:
    """The number of reserved GPUs (0 .. max(demand)) with the lowest fleet_cost; on a tie, the
    fewest."""
    todo("best_reserved")
