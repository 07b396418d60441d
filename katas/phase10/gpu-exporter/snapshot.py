"""Given: what one scrape found, in Prometheus' base units: `Exporter.collect()` builds it,
`render()` turns it into the text format. Read it; do not edit it.

A reading NVML could not give for this GPU (NVMLError_NotSupported: a GeForce card's ECC, a
board without a power sensor) is None and its series is left out of the exposition; a GPU whose
read failed otherwise (NVMLError_GpuIsLost, ...) has `up=False` and no readings at all in that
scrape, but keeps its identity and its XID counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Process:
    pid: int
    name: str  # as nvmlSystemGetProcessName says: any text (quotes, backslashes, newlines, é)
    memory_bytes: int  # device memory the process holds


@dataclass
class Gpu:
    index: int  # NVML's index: the `gpu` label
    uuid: str  # "GPU-5f0c9a2e-...": the `uuid` label
    name: str  # "NVIDIA H100 80GB HBM3": the `name` label of gpu_info only
    up: bool = True  # every reading of this scrape succeeded (NotSupported is not a failure)
    utilization_ratio: float | None = None  # 0..1
    memory_utilization_ratio: float | None = None  # 0..1
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    sm_clock_hertz: float | None = None
    ecc_errors: dict[str, int] = field(default_factory=dict)  # "corrected"/"uncorrected" -> count
    processes: list[Process] = field(default_factory=list)
    xid_errors: dict[int, int] = field(default_factory=dict)  # XID -> events since start


@dataclass
class Snapshot:
    gpus: list[Gpu]
    scrape_errors: int = 0  # device reads that failed (not NotSupported) since the exporter started
