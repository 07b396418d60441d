"""GIVEN. A simulated GPU node: what NVML would tell a device plugin about its GPUs.

A real plugin (NVIDIA's k8s-device-plugin) asks NVML for each GPU's UUID, minor number
(/dev/nvidia<minor>), NUMA node and the links between GPUs (`nvidia-smi topo -m`), and waits on
an NVML event set for XID errors that make a GPU unhealthy. Here a `Node` holds the same facts,
and the tests play NVML's part: `node.set_health(uuid, False, xid=79)` is XID 79, "GPU has
fallen off the bus".

Links between two GPUs, strongest first, as `nvidia-smi topo -m` prints them:
  "NV<k>"  k NVLink links (an NVLink bridge, or NVSwitch)
  "PIX"    the same PCIe switch
  "NODE"   the same NUMA node (CPU socket), different PCIe host bridges
  "SYS"    different sockets: traffic crosses the CPUs' interconnect (UPI / Infinity Fabric)
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Gpu:
    uuid: str  # "GPU-8f6d6c2e-...": the device ID a plugin advertises for a whole GPU
    minor: int  # its device node is /dev/nvidia<minor>
    numa: int  # the NUMA node (CPU socket) its PCIe root port hangs off
    pcie_switch: int  # GPUs on the same PCIe switch talk peer-to-peer without the CPU


@dataclass(frozen=True)
class HealthEvent:
    uuid: str
    healthy: bool
    xid: int = 0  # the XID error that made it unhealthy (0 when it recovered)


@dataclass
class _Watch:
    q: queue.Queue[HealthEvent] = field(default_factory=queue.Queue)
    closed: bool = False

    def get(self, timeout: float | None = None) -> HealthEvent | None:
        """The next event, or None after `timeout` seconds without one."""
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.closed = True


# Paths a container needs besides /dev/nvidia<minor>, as nvidia-container-toolkit mounts them.
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
DRIVER_LIBRARIES = (
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
)


class Node:
    """The GPUs of one node, the links between them, and their health (thread-safe)."""

    def __init__(self, gpus: Iterable[Gpu], nvlinks: dict[tuple[int, int], int] | None = None):
        self.gpus: list[Gpu] = sorted(gpus, key=lambda g: g.minor)
        self._by_uuid = {g.uuid: g for g in self.gpus}
        self._by_minor = {g.minor: g for g in self.gpus}
        self._nvlinks = {frozenset(k): v for k, v in (nvlinks or {}).items()}
        self._healthy = {g.uuid: True for g in self.gpus}
        self._watches: list[_Watch] = []
        self._lock = threading.Lock()
        self.control_devices: tuple[str, ...] = CONTROL_DEVICES
        self.driver_libraries: tuple[str, ...] = DRIVER_LIBRARIES

    def gpu(self, uuid: str) -> Gpu:
        """The GPU with this UUID (KeyError for an unknown one)."""
        return self._by_uuid[uuid]

    def link(self, a: str, b: str) -> str:
        """How GPUs `a` and `b` (UUIDs) are connected: "NV<k>", "PIX", "NODE" or "SYS"."""
        ga, gb = self._by_uuid[a], self._by_uuid[b]
        k = self._nvlinks.get(frozenset((ga.minor, gb.minor)), 0)
        if k:
            return f"NV{k}"
        if ga.numa != gb.numa:
            return "SYS"
        return "PIX" if ga.pcie_switch == gb.pcie_switch else "NODE"

    def healthy(self, uuid: str) -> bool:
        with self._lock:
            return self._healthy[uuid]

    def watch_health(self) -> _Watch:
        """A subscription to health changes (like nvmlEventSetCreate + nvmlDeviceRegisterEvents):
        every later `set_health` that changes a GPU's health is delivered to it, in order.
        Subscribe BEFORE you read the current health, or a change in between is lost."""
        w = _Watch()
        with self._lock:
            self._watches = [x for x in self._watches if not x.closed] + [w]
        return w

    def set_health(self, uuid: str, healthy: bool, xid: int = 79) -> None:
        """The tests' NVML: a GPU becomes unhealthy (an XID error) or healthy again."""
        with self._lock:
            if self._healthy[uuid] == healthy:
                return
            self._healthy[uuid] = healthy
            event = HealthEvent(uuid, healthy, 0 if healthy else xid)
            for w in self._watches:
                if not w.closed:
                    w.q.put(event)


def _uuid(i: int) -> str:
    return f"GPU-{0x5EED0000 + i * 7919:08x}-{i:04x}-4b1d-a100-{0xC0FFEE000000 + i:012x}"


def pcie_node(n: int = 8) -> Node:
    """A 2-socket server with n PCIe GPUs (n even): GPUs 0..n/2-1 on socket 0, the rest on
    socket 1; two GPUs per PCIe switch; NVLink bridges join pairs (0,1), (2,3), ... with 4
    links each — the shape of a server with A100 PCIe cards and NVLink bridges."""
    gpus = [Gpu(_uuid(i), i, numa=0 if i < n // 2 else 1, pcie_switch=i // 2) for i in range(n)]
    return Node(gpus, {(i, i + 1): 4 for i in range(0, n - 1, 2)})


def custom_node(numa: list[int], switches: list[int], nvlinks: dict[tuple[int, int], int]) -> Node:
    """A node with GPU i on NUMA node numa[i] and PCIe switch switches[i]."""
    gpus = [Gpu(_uuid(i), i, numa[i], switches[i]) for i in range(len(numa))]
    return Node(gpus, nvlinks)
