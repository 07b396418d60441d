"""What a GPU cloud's capacity and cost are made of: 8-GPU nodes and the instance shapes carved
from them, a training job on preemptible (spot) capacity, an egress price list, and an hourly
demand curve. Given: read it, use it, do not edit it (gpu_cloud.py is yours).

Units: seconds, bytes, Gbit/s for links; money in integer micro-dollars (1 USD = 1,000,000) where
a field says so, so that bills add up exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

GPUS_PER_NODE = 8  # an HGX/DGX node: 8 GPUs on one NVLink domain
SHAPES = (1, 2, 4, 8)  # GPUs per instance (p5.48xlarge is 8; a2 and ND shapes come in 1, 2, 4, 8)
GB = 10**9  # clouds bill transfer per decimal gigabyte
MICRO = 10**6  # micro-dollars per dollar


@dataclass(frozen=True)
class SpotJob:
    """A training job run on spot instances: any preemption stops the whole job, which restarts
    from its last checkpoint."""

    work_s: int  # seconds of training progress the job needs
    interval_s: int  # seconds of progress between checkpoints
    ckpt_s: float  # seconds one checkpoint stops the job
    restart_s: float  # seconds from a preemption to training again (new instances, load, warm up)
    preempt_per_hour: float  # preemptions per hour of the job (Poisson, while it runs)
    gpus: int


@dataclass(frozen=True)
class Tier:
    """One step of a tiered price list: GB of the month's running total up to `up_to_gb` (None:
    no limit) cost micro_usd_per_gb each."""

    up_to_gb: int | None
    micro_usd_per_gb: int


# AWS data transfer out to the internet, per month (us-east-1, 2024): the first 10 TB at $0.09/GB,
# the next 40 TB at $0.085, the next 100 TB at $0.07, beyond 150 TB $0.05.
AWS_EGRESS = (Tier(10_000, 90_000), Tier(50_000, 85_000), Tier(150_000, 70_000), Tier(None, 50_000))
