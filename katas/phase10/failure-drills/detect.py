"""Task "detect": incidents from the fleet's telemetry stream, one tick at a time.

The detector sees what a node agent ships (fleet.NodeSample: GPUs, ports, mounts, kernel log)
and nothing else: no ground truth, no future. Each observe() returns the incidents whose rule
first holds at that tick (README.md, "Detection rules"); each (kind, node, device) once.
"""

from __future__ import annotations

from harness import todo

from .fleet import Incident, NodeInfo, NodeSample, Policy


class Detector:
    """Feed it every tick's samples in order; it returns the new incidents of that tick.

    The rules (README.md, "Detection rules"), device "gpu<index>" for the GPU kinds:
    - gpu-lost: an XID 79 line naming the GPU, or the GPU's sample not present;
    - row-remap-failure: an XID 64 line naming the GPU, or remap_failure set;
    - ecc: an XID 48, 94 or 95 line naming the GPU, the DBE counter above the GPU's previous
      sample, or remap_pending set (never for a GPU reported as row-remap-failure, nor at a
      tick where its remap_failure is set);
    - thermal: hw_thermal_slowdown in the GPU's throttle reasons for policy.thermal_ticks
      consecutive samples (a tick without a sample breaks the run); first_seen: the run's first;
    - nic-flap: policy.flap_count link-down events (the rise of link_downed since the port's
      previous sample, the first sample being the baseline; a counter that dropped was reset:
      its whole value is new) within policy.flap_window consecutive ticks (this tick and the
      window - 1 before it); first_seen: the tick of the earliest event in the window at the
      tick the rule first holds (every event in it counts, also when there are more than
      flap_count, e.g. two flaps in the last tick);
    - disk-full: used_bytes >= policy.disk_full * size_bytes.
    Every other XID (13, 31, 43, 45, ...) is the application's error: no incident. An XID line
    names its GPU by PCI address ("PCI:0000:3b:00"), the inventory by nvidia-smi's bus id
    ("00000000:3B:00.0"). `samples[node]` is None while the node reboots."""

    def __init__(self, nodes: list[NodeInfo], policy: Policy) -> None:
        todo("Detector.__init__")

    def observe(self, tick: int, samples: dict[str, NodeSample | None]) -> list[Incident]:
        """The incidents whose rule first holds at `tick` (an empty list if none)."""
        todo("Detector.observe")
