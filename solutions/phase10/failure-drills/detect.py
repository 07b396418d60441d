"""Task "detect": incidents from the fleet's telemetry stream, one tick at a time.

The detector sees what a node agent ships (fleet.NodeSample: GPUs, ports, mounts, kernel log)
and nothing else: no ground truth, no future. Each observe() returns the incidents whose rule
first holds at that tick (README.md, "Detection rules"); each (kind, node, device) once.
"""

from __future__ import annotations

import re

from .fleet import Incident, NodeInfo, NodeSample, Policy

# XID -> the incident kind it is evidence of. Every other XID (13, 31, 43, 45: the
# application's own errors) is not a fault of the node.
XID_KINDS = {79: "gpu-lost", 48: "ecc", 94: "ecc", 95: "ecc", 64: "row-remap-failure"}

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ..." -> the PCI address and the XID
XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\): (\d+),")


def pci_key(domain: str, bus: str, device: str) -> tuple[int, int, int]:
    """A PCI address as numbers: the kernel writes "0000:3b:00", nvidia-smi "00000000:3B:00.0"."""
    return int(domain, 16), int(bus, 16), int(device, 16)


def parse_xid(line: str) -> tuple[tuple[int, int, int], int] | None:
    """(the GPU's PCI address, the XID) of an `NVRM: Xid` line, None for any other line."""
    m = XID_RE.search(line)
    if m is None:
        return None
    return pci_key(m.group(1), m.group(2), m.group(3)), int(m.group(4))


class Detector:
    """Feed it every tick's samples in order; it returns the new incidents of that tick."""

    def __init__(self, nodes: list[NodeInfo], policy: Policy) -> None:
        self.policy = policy
        self.gpu_of: dict[str, dict[tuple[int, int, int], int]] = {}
        for n in nodes:
            table = {}
            for g in n.gpus:
                dom, bus, rest = g.pci_bus_id.split(":")
                table[pci_key(dom, bus, rest.split(".")[0])] = g.index
            self.gpu_of[n.name] = table
        self.reported: set[tuple[str, str, str]] = set()
        self.dbe: dict[tuple[str, int], int] = {}  # the previous sample's DBE counter
        self.hot: dict[tuple[str, int], int] = {}  # first tick of the running hw slowdown
        self.last_seen: dict[tuple[str, int], int] = {}  # the GPU's previous sample's tick
        self.downs: dict[tuple[str, str], int] = {}  # the previous link_downed
        self.flaps: dict[tuple[str, str], list[int]] = {}  # one entry per link-down event

    def observe(self, tick: int, samples: dict[str, NodeSample | None]) -> list[Incident]:
        out: list[Incident] = []
        for node in sorted(samples):
            s = samples[node]
            if s is not None:
                out += self._node(tick, node, s)
        out.sort(key=lambda i: (i.node, i.kind, i.device))
        return out

    def _report(self, out: list[Incident], kind: str, node: str, device: str, first: int,
                evidence: list[str]) -> None:  # fmt: skip
        key = (kind, node, device)
        if key not in self.reported:
            self.reported.add(key)
            out.append(Incident(kind, node, device, first, tuple(evidence)))

    def _node(self, tick: int, node: str, s: NodeSample) -> list[Incident]:
        out: list[Incident] = []
        p = self.policy
        xids: dict[int, list[tuple[int, str]]] = {}
        for line in s.kernel_log:
            parsed = parse_xid(line)
            if parsed is None:
                continue
            gpu = self.gpu_of.get(node, {}).get(parsed[0])
            if gpu is not None:
                xids.setdefault(gpu, []).append((parsed[1], line))
        for g in s.gpus:
            dev = f"gpu{g.index}"
            lines = xids.get(g.index, [])
            kinds = {XID_KINDS[x] for x, _ in lines if x in XID_KINDS}
            ev = [line for x, line in lines if x in XID_KINDS]
            if not g.present or "gpu-lost" in kinds:
                self._report(out, "gpu-lost", node, dev, tick,
                             ev or [f"{node} {dev}: not present (GPU fell off the bus?)"])  # fmt: skip
            key = (node, g.index)
            if g.present:
                rose = g.dbe > self.dbe.get(key, g.dbe)
                self.dbe[key] = g.dbe
                if g.remap_failure or "row-remap-failure" in kinds:
                    self._report(out, "row-remap-failure", node, dev, tick,
                                 ev + [f"{node} {dev}: remap_failure={g.remap_failure}"])  # fmt: skip
                elif ("row-remap-failure", node, dev) not in self.reported and (
                    rose or g.remap_pending or "ecc" in kinds
                ):
                    self._report(out, "ecc", node, dev, tick,
                                 ev + [f"{node} {dev}: dbe={g.dbe} remap_pending={g.remap_pending}"])  # fmt: skip
            if g.present and "hw_thermal_slowdown" in g.throttle:
                if self.last_seen.get(key) != tick - 1 or key not in self.hot:
                    self.hot[key] = tick  # a new run (a missing sample breaks the old one)
                if tick - self.hot[key] + 1 >= p.thermal_ticks:
                    self._report(out, "thermal", node, dev, self.hot[key],
                                 [f"{node} {dev}: hw_thermal_slowdown since tick {self.hot[key]}, "
                                  f"{g.temp_c} C, SM {g.sm_clock_mhz} MHz"])  # fmt: skip
            else:
                self.hot.pop(key, None)
            self.last_seen[key] = tick
        for nic in s.nics:
            key2 = (node, nic.name)
            prev = self.downs.get(key2, nic.link_downed)  # the first sample: the baseline
            # a counter that went down was reset (a reboot): all of its value is new
            new = nic.link_downed - prev if nic.link_downed >= prev else nic.link_downed
            self.downs[key2] = nic.link_downed
            events = self.flaps.setdefault(key2, [])
            events += [tick] * new
            window = [t for t in events if t > tick - p.flap_window]
            self.flaps[key2] = window
            if len(window) >= p.flap_count:
                self._report(out, "nic-flap", node, nic.name, window[0],
                             [f"{node} {nic.name}: {len(window)} link-down events in ticks "
                              f"{window[0]}..{tick} (link_downed={nic.link_downed})"])  # fmt: skip
        for d in s.disks:
            if d.used_bytes >= p.disk_full * d.size_bytes:
                self._report(out, "disk-full", node, d.mount, tick,
                             [f"{node} {d.mount}: {d.used_bytes / d.size_bytes:.1%} used"])  # fmt: skip
        return out
