"""YOUR FILE. Task "kubernetes": what the NVIDIA device plugin's sharing settings mean.

`config` is the plugin's config file as a dict: {"version": "v1", "sharing": {"timeSlicing":
{...}}} or {"sharing": {"mps": {...}}}, each with renameByDefault, failRequestsGreaterThanOne
and resources: [{"name": "nvidia.com/gpu", "replicas": N, "rename": optional}].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness import todo

GPU_RESOURCE = "nvidia.com/gpu"


def advertised(config: Mapping[str, Any], gpus: int) -> dict[str, int]:
    """The extended resources (name -> count) a node with `gpus` GPUs advertises."""
    todo("advertised")


def admit(config: Mapping[str, Any], count: int) -> bool:
    """Whether the plugin's Allocate accepts a container asking for `count` replicas."""
    todo("admit")


def replica_share(config: Mapping[str, Any], gpu_memory_gb: float) -> dict[str, Any]:
    """What one replica is guaranteed: compute percent, memory limit in GB (None: none), and
    whether a fault or an out-of-memory in another replica can reach it."""
    todo("replica_share")
