"""The simulated GPU fleet of failure-drills (given: read it, use it, do not edit it).

A fleet is a list of nodes (`NodeInfo`: GPUs with their PCI bus ids, InfiniBand ports, mounts).
Time is a tick counter. Every tick the fleet produces one `NodeSample` per node, what a node
agent (DCGM, node-exporter, a kernel-log tailer) would ship: per GPU what `nvidia-smi -q` shows
(present or lost, temperature, SM clock, clock-throttle reasons, volatile ECC counters, row-remap
state), per port the link state and the `link_downed` counter, per mount the bytes used, and the
kernel log lines since the last sample (the `NVRM: Xid` lines among them). A node that is
rebooting ships nothing (None).

A `Scenario` says what happens: the nodes, the jobs running on them, the faults injected (the
ground truth, which the tests keep to themselves) and the noise on healthy nodes. `Fleet` plays
it; its `Control` is the API the remediation drives (cordon, drain, reset a GPU, reboot,
escalate, uncordon) and records every call.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

# The incident kinds, and what a node agent reports for each (README.md, "The faults").
KINDS = ("gpu-lost", "ecc", "row-remap-failure", "thermal", "nic-flap", "disk-full")

# The clock-throttle reasons as NVML names them (nvmlClocksThrottleReason*, nvidia-smi -q's
# "Clocks Event Reasons"). Only the HW thermal slowdown is a fault, and only when it lasts.
THROTTLE_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)

MAX_SM_CLOCK_MHZ = 1980  # H100 SXM's maximum boost clock


# --------------------------------------------------------------------------- inventory
@dataclass(frozen=True)
class GpuInfo:
    index: int  # nvidia-smi's index on its node (0..7)
    pci_bus_id: str  # as nvidia-smi prints it: "00000000:3B:00.0"
    uuid: str


@dataclass(frozen=True)
class NodeInfo:
    name: str  # e.g. "h100-r07-n12": never a fixed list, every fleet has its own names
    rack: str
    gpus: tuple[GpuInfo, ...]
    nics: tuple[str, ...]  # InfiniBand ports: "mlx5_0", "mlx5_1", ...
    mounts: tuple[str, ...]  # "/", "/local", ...


# --------------------------------------------------------------------------- telemetry
@dataclass(frozen=True)
class GpuSample:
    index: int
    present: bool  # False: the driver cannot reach the GPU (the fields below are then 0 / empty)
    temp_c: int
    sm_clock_mhz: int
    throttle: tuple[str, ...]  # active clock-throttle reasons (THROTTLE_REASONS)
    sbe: int  # volatile single-bit (corrected) ECC errors since the driver loaded
    dbe: int  # volatile double-bit (uncorrectable) ECC errors since the driver loaded
    remap_pending: bool  # a row remap waits for the next GPU reset
    remap_failure: bool  # a row could not be remapped (no spare rows left)


@dataclass(frozen=True)
class NicSample:
    name: str
    up: bool  # the port's state at the moment of the sample
    link_downed: int  # times the link went down since the driver loaded (a counter)


@dataclass(frozen=True)
class DiskSample:
    mount: str
    used_bytes: int
    size_bytes: int


@dataclass(frozen=True)
class NodeSample:
    node: str
    tick: int
    gpus: tuple[GpuSample, ...]
    nics: tuple[NicSample, ...]
    disks: tuple[DiskSample, ...]
    kernel_log: tuple[str, ...]  # kernel log lines since the node's previous sample


# --------------------------------------------------------------------------- incidents, policy
@dataclass(frozen=True)
class Incident:
    """What detection reports: `kind` (KINDS) on `device` of `node` ("gpu3" for a GPU kind, the
    port name for "nic-flap", the mount point for "disk-full"), `first_seen`: the tick of the
    first sample that is part of the evidence, `evidence`: the lines a human reads (the XID
    line, the counter values, ...), never empty."""

    kind: str
    node: str
    device: str
    first_seen: int
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    """The thresholds detection and remediation follow (every fleet draws its own)."""

    flap_count: int = 3  # a port that went down this many times ...
    flap_window: int = 10  # ... within this many consecutive ticks is flapping
    thermal_ticks: int = 4  # consecutive samples with hw_thermal_slowdown make a thermal fault
    disk_full: float = 0.95  # a mount at or above this fraction used is full
    max_out_fraction: float = 0.10  # most of the fleet that may be cordoned at once

    def max_out(self, nodes: int) -> int:
        """The most nodes that may be cordoned at the same time in a fleet of `nodes`."""
        return max(1, math.floor(self.max_out_fraction * nodes + 1e-9))


# --------------------------------------------------------------------------- scenario
@dataclass(frozen=True)
class Job:
    id: str
    node: str
    gpus: tuple[int, ...]
    checkpoint_ticks: int  # a drain lets it checkpoint: it leaves this many ticks after drain()
    start: int = 0  # the tick it lands on its node


@dataclass(frozen=True)
class Fault:
    """Ground truth: a fault of `kind` on `device` of `node`, starting at tick `onset`.

    gpu-lost / ecc / row-remap-failure: `xid` is the XID the kernel logs at onset (None: the
    line was lost, only the GPU's state tells). ecc: `dbe` uncorrectable errors over the first
    ticks (a storm when > 1). nic-flap: `flaps`, the ticks of its link-down events. thermal:
    `duration` ticks of hw_thermal_slowdown (0: until the end). disk-full: `ramp` ticks of
    growth before it crosses the threshold at onset. `fixed_by_fix`: whether a GPU reset (ecc)
    or a reboot (gpu-lost) clears it."""

    kind: str
    node: str
    device: str
    onset: int
    xid: int | None = None
    dbe: int = 1
    flaps: tuple[int, ...] = ()
    duration: int = 0
    ramp: int = 5
    fixed_by_fix: bool = True


@dataclass(frozen=True)
class Noise:
    """Something a healthy node does that is not a fault: "temp-spike" (hot, under the slowdown
    temperature), "sbe" (corrected errors), "flap" (link-down events at `ticks`, fewer than a
    fault needs in any window), "throttle" (`reason` at `ticks`: power capping, SW thermal
    slowdown, or a HW thermal slowdown shorter than the policy's), "app-xid" (an application
    XID at `ticks`), "disk" (usage that climbs and stays under the threshold)."""

    kind: str
    node: str
    device: str
    ticks: tuple[int, ...]
    value: int = 0
    reason: str = ""


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[NodeInfo, ...]
    policy: Policy
    horizon: int  # ticks 0 .. horizon-1
    jobs: tuple[Job, ...]
    faults: tuple[Fault, ...]
    noise: tuple[Noise, ...] = ()
    maintenance: tuple[str, ...] = ()  # nodes cordoned by people before the drill starts
    reboot_ticks: int = 3  # a rebooting node ships nothing for this many ticks
    seed: int = 0

    def detect_tick(self, fault: Fault) -> int:
        """The tick at which the detection rule for `fault` first holds (README.md)."""
        p = self.policy
        if fault.kind == "thermal":
            return fault.onset + p.thermal_ticks - 1
        if fault.kind == "nic-flap":
            for i in range(p.flap_count - 1, len(fault.flaps)):
                if fault.flaps[i] - fault.flaps[i - p.flap_count + 1] < p.flap_window:
                    return fault.flaps[i]
            raise ValueError(f"{fault} never reaches {p.flap_count} flaps in {p.flap_window}")
        return fault.onset


# --------------------------------------------------------------------------- kernel log
def xid_line(node: NodeInfo, gpu: int, xid: int, tick: int, pid: int) -> str:
    """The kernel log line of `xid` on GPU `gpu`, as the NVIDIA driver writes it."""
    bus = node.gpus[gpu].pci_bus_id  # "00000000:3B:00.0" -> "0000:3b:00"
    dom, b, rest = bus.split(":")
    pci = f"{dom[-4:]}:{b}:{rest.split('.')[0]}".lower()
    who = f"pid={pid}, name=python3" if pid else "pid='<unknown>', name=<unknown>"
    text = {
        13: "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address",
        31: "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
        "0x7f1a_2c400000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
        43: "Ch 00000010",
        45: "Ch 00000010",
        48: "An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at partition 2, subpartition 0.",
        64: "Row Remapper Error: failed to remap a row, no spare rows left in bank 3",
        79: "GPU has fallen off the bus.",
        94: "Contained: SM (0x1). RST: No, D-RST: No",
        95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    }[xid]
    return f"[{100 + tick * 15.25:12.6f}] NVRM: Xid (PCI:{pci}): {xid}, {who}, {text}"


BENIGN_LOG = (
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro",
    "nvidia-peermem: module verification failed",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ibp12s0: link becomes ready",
    "NVRM: GPU at PCI:0000:00:00: GPU-00000000 persistence mode enabled",
    "systemd-journald[612]: Data hash table of /var/log/journal is full",
)


# --------------------------------------------------------------------------- the fleet
@dataclass
class Action:
    tick: int
    verb: str  # cordon, uncordon, drain, reset_gpu, reboot, escalate
    node: str
    arg: int | str | None = None  # reset_gpu: the GPU index; escalate: the kind
    evidence: tuple[str, ...] = ()


@dataclass
class _JobState:
    job: Job
    leave_at: int | None = None  # set by a drain


class Fleet:
    """Plays a Scenario: `sample()` gives the telemetry of the current tick, `control` takes
    actions at the current tick, `advance()` moves to the next tick (jobs that finished their
    checkpoint leave, new jobs land on nodes that are not cordoned, reboots complete)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.tick = 0
        self.info = {n.name: n for n in scenario.nodes}
        self.cordoned: set[str] = set(scenario.maintenance)
        self.jobs: dict[str, _JobState] = {}
        self.pending = sorted(scenario.jobs, key=lambda j: (j.start, j.id))
        self.actions: list[Action] = []
        self.killed: list[tuple[int, str, str]] = []  # (tick, job, what killed it)
        self.job_events: list[tuple[int, str, str, str]] = []  # (tick, job, node, landed/left)
        self.cleared: dict[Fault, int] = {}  # fault -> the tick from which a fix cleared it
        self.broken_after_fix: set[Fault] = set()  # faults a fix did not clear
        self.down_until: dict[str, int] = {}  # node -> first tick it ships samples again
        self.counter_base: dict[tuple[str, str], int] = {}  # link_downed at the last reboot
        self.ecc_base: dict[tuple[str, int], tuple[int, int]] = {}  # (sbe, dbe) at the last reset
        self.control = Control(self)
        # the scenario by node and device, and a table of dice: sampling stays cheap
        self._faults: dict[str, list[Fault]] = {}
        self._noise: dict[tuple[str, str], list[Noise]] = {}
        for f in scenario.faults:
            self._faults.setdefault(f.node, []).append(f)
        for z in scenario.noise:
            self._noise.setdefault((z.node, z.device), []).append(z)
        dice = random.Random(scenario.seed)
        self._dice = [dice.random() for _ in range(4099)]
        self._index = {n.name: k for k, n in enumerate(scenario.nodes)}
        self._busy: dict[str, set[int]] = {}
        self._cache: dict[tuple[int, bool, int], GpuSample] = {}
        self._land()

    # ------------------------------------------------------------------ time
    def advance(self) -> None:
        self.tick += 1
        for jid, st in list(self.jobs.items()):
            if st.leave_at is not None and st.leave_at <= self.tick:
                del self.jobs[jid]
                self.job_events.append((self.tick, jid, st.job.node, "left"))
        self._land()

    def _land(self) -> None:
        while self.pending and self.pending[0].start <= self.tick:
            job = self.pending.pop(0)
            busy = {g for st in self.jobs.values() if st.job.node == job.node for g in st.job.gpus}
            if job.node in self.cordoned or self.rebooting(job.node) or busy & set(job.gpus):
                continue  # the scheduler puts it elsewhere: not on this node
            self.jobs[job.id] = _JobState(job)
            self.job_events.append((self.tick, job.id, job.node, "landed"))

    def rebooting(self, node: str) -> bool:
        return self.down_until.get(node, -1) > self.tick

    def jobs_on(self, node: str, gpu: int | None = None) -> list[str]:
        return sorted(
            jid
            for jid, st in self.jobs.items()
            if st.job.node == node and (gpu is None or gpu in st.job.gpus)
        )

    # ------------------------------------------------------------------ faults
    def _active(self, fault: Fault, t: int) -> bool:
        """Whether `fault` shows at tick t (started, and no fix cleared it since)."""
        if t < fault.onset - (fault.ramp if fault.kind == "disk-full" else 0):
            return False
        if fault.kind == "thermal" and fault.duration and t >= fault.onset + fault.duration:
            return False
        c = self.cleared.get(fault)
        return c is None or t < c or fault in self.broken_after_fix

    def sample(self) -> dict[str, NodeSample | None]:
        """The telemetry of every node at the current tick (None: the node is rebooting)."""
        self._busy = {}
        for st in self.jobs.values():
            self._busy.setdefault(st.job.node, set()).update(st.job.gpus)
        return {n.name: self._sample(n) for n in self.scenario.nodes}

    def _sample(self, node: NodeInfo) -> NodeSample | None:
        t = self.tick
        if self.rebooting(node.name):
            return None
        faults = [f for f in self._faults.get(node.name, ()) if self._active(f, t)]
        r = _Dice(self._dice, self._index[node.name] * 7919 + t * 104729)
        log: list[str] = []
        if r.random() < 0.05:
            log.append(f"[{100 + t * 15.25:12.6f}] {r.choice(BENIGN_LOG)}")
        busy = self._busy.get(node.name, set())
        gpus = []
        for g in node.gpus:
            dev = f"gpu{g.index}"
            mine = [f for f in faults if f.device == dev]
            noise = self._noise.get((node.name, dev), ())
            temp = (62 if g.index in busy else 34) + r.randint(0, 6)
            if not mine and not noise and (node.name, g.index) not in self.ecc_base:
                key = (g.index, g.index in busy, temp)  # a healthy GPU: shared, immutable
                if key not in self._cache:
                    self._cache[key] = GpuSample(
                        g.index, True, temp, MAX_SM_CLOCK_MHZ if key[1] else 345,
                        () if key[1] else ("gpu_idle",), 0, 0, False, False)  # fmt: skip
                gpus.append(self._cache[key])
                continue
            throttle: list[str] = [] if g.index in busy else ["gpu_idle"]
            clock = MAX_SM_CLOCK_MHZ if g.index in busy else 345
            sbe, dbe, pending, failure, present = 0, 0, False, False, True
            for z in noise:
                if z.kind == "temp-spike" and t in z.ticks:
                    temp = z.value
                elif z.kind == "sbe":
                    sbe += sum(1 for x in z.ticks if x <= t) * max(1, z.value)
                elif z.kind == "throttle" and t in z.ticks:
                    throttle.append(z.reason)
                    if z.reason == "hw_thermal_slowdown":
                        throttle.append("hw_slowdown")
                        temp, clock = z.value or 89, clock // 2
                    elif z.reason == "sw_thermal_slowdown":
                        temp, clock = z.value or 84, clock - 300
                    else:
                        clock = clock - 180
                elif z.kind == "app-xid" and t in z.ticks:
                    log.append(xid_line(node, g.index, z.value, t, 4000 + r.randint(1, 9000)))
            for f in mine:
                if f.kind == "gpu-lost":
                    present = False
                    if t == f.onset and f.xid is not None:
                        log.append(xid_line(node, g.index, f.xid, t, 0))
                elif f.kind in ("ecc", "row-remap-failure"):
                    dbe += min(f.dbe, t - f.onset + 1)  # a storm: one more DBE per tick
                    if f.kind == "ecc":
                        pending = True
                    else:
                        failure = True
                    if t == f.onset and f.xid is not None:
                        if f.kind == "row-remap-failure":
                            log.append(xid_line(node, g.index, 95, t, 5000 + r.randint(1, 9000)))
                        log.append(xid_line(node, g.index, f.xid, t, 5000 + r.randint(1, 9000)))
                    elif f.kind == "ecc" and f.xid is not None and t - f.onset < f.dbe:
                        log.append(xid_line(node, g.index, f.xid, t, 5000 + r.randint(1, 9000)))
                elif f.kind == "thermal":
                    temp, clock = 88 + r.randint(0, 4), clock // 2
                    throttle += ["hw_slowdown", "hw_thermal_slowdown"]
            if any(f.kind == "ecc" and f in self.broken_after_fix for f in mine):
                # the reset found no spare row: the remap failed
                pending, failure = False, True
            base = self.ecc_base.get((node.name, g.index), (0, 0))
            sbe, dbe = max(0, sbe - base[0]), max(0, dbe - base[1])
            if not present:
                gpus.append(GpuSample(g.index, False, 0, 0, (), 0, 0, False, False))
                continue
            reasons = tuple(x for x in THROTTLE_REASONS if x in throttle)
            gpus.append(GpuSample(g.index, True, temp, clock, reasons, sbe, dbe, pending, failure))
        nics = []
        for name in node.nics:
            if not faults and (node.name, name) not in self._noise:
                nics.append(NicSample(name, True, 0))
                continue
            flaps = [x for f in faults if f.device == name for x in f.flaps if x <= t]
            flaps += [x for z in self._noise.get((node.name, name), ()) if z.kind == "flap"
                      for x in z.ticks]  # fmt: skip
            downs = [x for x in flaps if x <= t]
            base = self.counter_base.get((node.name, name), 0)
            count = sum(1 for x in downs if x >= base)
            up = t not in downs or r.random() < 0.5  # a flap may be over by the sample
            nics.append(NicSample(name, up, count))
        disks = []
        for i, mount in enumerate(node.mounts):
            size = (2 if i == 0 else 8) * 2**40 - 2**30 * (i + 1)
            frac = 0.31 + 0.2 * i + 0.01 * (t % 3)
            for z in self._noise.get((node.name, mount), ()):
                if z.kind == "disk" and t >= z.ticks[0]:
                    frac = min(z.value / 1000, frac + 0.02 * (t - z.ticks[0]))
            for f in faults:
                if f.kind == "disk-full" and f.device == mount:
                    # under the threshold until onset, at it or above from onset on
                    thr = self.scenario.policy.disk_full
                    frac = min(1.0, thr - 0.004 * (f.onset - t) if t < f.onset
                               else thr + 0.0005 + 0.001 * (t - f.onset))  # fmt: skip
            disks.append(DiskSample(mount, math.ceil(frac * size), size))
        return NodeSample(node.name, t, tuple(gpus), tuple(nics), tuple(disks), tuple(log))

    # ------------------------------------------------------------------ actions
    def _act(self, verb: str, node: str, arg: int | str | None = None,
             evidence: tuple[str, ...] = ()) -> None:  # fmt: skip
        if node not in self.info:
            raise ValueError(f"{verb}: no node named {node!r} in this fleet")
        self.actions.append(Action(self.tick, verb, node, arg, evidence))

    def _fix(self, node: str, devices: list[str]) -> None:
        for dev in devices:
            for f in self.scenario.faults:
                if f.node == node and f.device == dev and self._active(f, self.tick):
                    self.cleared.setdefault(f, self.tick + 1)
                    if not f.fixed_by_fix or f.kind not in ("ecc", "gpu-lost"):
                        self.broken_after_fix.add(f)


class _Dice:
    """random.Random's few methods used here, read from a fixed table from a start."""

    def __init__(self, table: list[float], start: int) -> None:
        self.table, self.i = table, start

    def random(self) -> float:
        self.i += 1
        return self.table[self.i % len(self.table)]

    def randint(self, a: int, b: int) -> int:
        return a + int(self.random() * (b - a + 1))

    def choice(self, seq: tuple[str, ...]) -> str:
        return seq[int(self.random() * len(seq))]


class Control:
    """The control API of the fleet (what `kubectl cordon/drain`, `nvidia-smi -r`, IPMI and the
    ticketing system do), acting at the fleet's current tick. Every call is recorded."""

    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet

    # ------------------------------------------------------------------ queries
    def nodes(self) -> list[str]:
        """Every node's name."""
        return [n.name for n in self._fleet.scenario.nodes]

    def cordoned(self) -> list[str]:
        """The nodes cordoned now, by anyone (people cordon nodes for maintenance too)."""
        return sorted(self._fleet.cordoned)

    def jobs_on(self, node: str, gpu: int | None = None) -> list[str]:
        """The jobs running on `node` now (on GPU `gpu` only, if given)."""
        return self._fleet.jobs_on(node, gpu)

    def rebooting(self, node: str) -> bool:
        """Whether `node` is rebooting now (it ships no samples)."""
        return self._fleet.rebooting(node)

    # ------------------------------------------------------------------ actions
    def cordon(self, node: str) -> None:
        """No new job lands on `node` (running jobs keep running)."""
        self._fleet._act("cordon", node)
        self._fleet.cordoned.add(node)

    def uncordon(self, node: str) -> None:
        """`node` takes jobs again."""
        self._fleet._act("uncordon", node)
        self._fleet.cordoned.discard(node)

    def drain(self, node: str) -> None:
        """Ask every job on `node` to checkpoint and leave: each leaves its checkpoint_ticks
        later (watch jobs_on(node)). It does not cordon: new jobs can still land."""
        fl = self._fleet
        fl._act("drain", node)
        for st in fl.jobs.values():
            if st.job.node == node and st.leave_at is None:
                st.leave_at = fl.tick + st.job.checkpoint_ticks

    def reset_gpu(self, node: str, gpu: int) -> None:
        """`nvidia-smi -r`: reset GPU `gpu` of `node` (the next sample shows the result). It
        performs a pending row remap and clears the volatile ECC counters; it cannot reach a
        GPU that fell off the bus. Jobs still on that GPU die."""
        fl = self._fleet
        info = fl.info.get(node)
        if info is not None and (type(gpu) is not int or not 0 <= gpu < len(info.gpus)):
            raise ValueError(f"reset_gpu: node {node!r} has no GPU {gpu!r}")
        fl._act("reset_gpu", node, gpu)
        for jid in fl.jobs_on(node, gpu):
            fl.killed.append((fl.tick, jid, f"reset_gpu({node}, {gpu})"))
            fl.job_events.append((fl.tick, jid, node, "killed"))
            del fl.jobs[jid]
        lost = any(
            f.kind == "gpu-lost" and f.node == node and f.device == f"gpu{gpu}"
            and fl._active(f, fl.tick) for f in fl.scenario.faults
        )  # fmt: skip
        if not lost:
            fl._fix(node, [f"gpu{gpu}"])
            s = fl._sample(fl.info[node])
            if s is not None:
                g = s.gpus[gpu]
                old = fl.ecc_base.get((node, gpu), (0, 0))
                fl.ecc_base[(node, gpu)] = (old[0] + g.sbe, old[1] + g.dbe)

    def reboot(self, node: str) -> None:
        """Reboot `node`: it ships nothing for the scenario's reboot_ticks, then comes back
        with every GPU reset (a GPU that fell off the bus is found again, if it can be) and its
        counters at 0. Jobs still on it die."""
        fl = self._fleet
        fl._act("reboot", node)
        for jid in fl.jobs_on(node):
            fl.killed.append((fl.tick, jid, f"reboot({node})"))
            fl.job_events.append((fl.tick, jid, node, "killed"))
            del fl.jobs[jid]
        back = fl.tick + 1 + fl.scenario.reboot_ticks
        fl.down_until[node] = back
        info = fl.info[node]
        for name in info.nics:
            fl.counter_base[(node, name)] = back
        fl._fix(node, [f"gpu{g.index}" for g in info.gpus])
        for g in info.gpus:
            fl.ecc_base[(node, g.index)] = (0, 0)

    def escalate(self, node: str, kind: str, evidence: list[str]) -> None:
        """Open a ticket for people (the hardware team, facilities, the network team) about a
        fault of `kind` on `node`, with the evidence lines."""
        self._fleet._act("escalate", node, kind, tuple(str(e) for e in evidence))


# --------------------------------------------------------------------------- scenarios
def make_inventory(rng: random.Random, nodes: int) -> tuple[NodeInfo, ...]:
    """`nodes` nodes with names, racks, PCI bus ids and ports of their own."""
    prefix = rng.choice(["h100", "a100", "gpu", "dgx", "hgx", "sxm"])
    racks = [f"r{rng.randint(1, 40):02d}" for _ in range(max(1, nodes // 4))]
    out, names = [], set()
    for i in range(nodes):
        rack = racks[i % len(racks)]
        name = f"{prefix}-{rack}-n{rng.randint(1, 64):02d}"
        while name in names:
            name = f"{prefix}-{rack}-n{rng.randint(1, 99):02d}"
        names.add(name)
        ngpu = rng.choice([8, 8, 8, 4])
        buses = sorted(rng.sample(range(0x10, 0xF0), ngpu))
        dom = rng.choice([0, 0, 0, 1])
        gpus = tuple(
            GpuInfo(k, f"{dom:08X}:{b:02X}:00.0", f"GPU-{rng.getrandbits(128):032x}")
            for k, b in enumerate(buses)
        )
        nics = tuple(f"mlx5_{k}" for k in range(rng.choice([2, 4, 8])))
        mounts = ("/",) if rng.random() < 0.5 else ("/", "/local")
        out.append(NodeInfo(name, rack, gpus, nics, mounts))
    return tuple(out)


def random_policy(rng: random.Random) -> Policy:
    return Policy(
        flap_count=rng.randint(2, 5),
        flap_window=rng.randint(6, 14),
        thermal_ticks=rng.randint(2, 6),
        disk_full=rng.choice([0.9, 0.92, 0.95, 0.97]),
        max_out_fraction=rng.choice([0.1, 0.125, 0.2, 0.25]),
    )


def make_jobs(rng: random.Random, nodes: tuple[NodeInfo, ...], horizon: int) -> tuple[Job, ...]:
    """Jobs on most GPUs at tick 0, and more landing later (on nodes that are not cordoned)."""
    jobs, k = [], 0
    for n in nodes:
        idx = list(range(len(n.gpus)))
        rng.shuffle(idx)
        while idx and rng.random() < 0.85:
            take = min(len(idx), rng.choice([1, 2, 4, 8]))
            gpus, idx = tuple(sorted(idx[:take])), idx[take:]
            k += 1
            jobs.append(Job(f"job-{rng.randint(1000, 9999)}-{k}", n.name, gpus,
                            rng.randint(1, 5)))  # fmt: skip
        for _ in range(rng.randint(0, 2)):
            k += 1
            jobs.append(Job(f"job-{rng.randint(1000, 9999)}-{k}", n.name,
                            (rng.randrange(len(n.gpus)),), rng.randint(1, 5),
                            start=rng.randint(1, horizon - 1)))  # fmt: skip
    return tuple(jobs)


def make_fault(rng: random.Random, kind: str, node: NodeInfo, onset: int, policy: Policy,
               horizon: int) -> Fault:  # fmt: skip
    """One fault of `kind` on `node` whose detection rule first holds at or after `onset`."""
    gpu = f"gpu{rng.randrange(len(node.gpus))}"
    if kind == "gpu-lost":
        return Fault(kind, node.name, gpu, onset, xid=79 if rng.random() < 0.85 else None,
                     fixed_by_fix=rng.random() < 0.7)  # fmt: skip
    if kind == "ecc":
        return Fault(kind, node.name, gpu, onset,
                     xid=rng.choice([48, 94, 95, 95]) if rng.random() < 0.85 else None,
                     dbe=rng.choice([1, 1, 2, 5]))  # fmt: skip
    if kind == "row-remap-failure":
        return Fault(kind, node.name, gpu, onset, xid=64 if rng.random() < 0.85 else None)
    if kind == "thermal":
        dur = 0 if rng.random() < 0.6 else policy.thermal_ticks + rng.randint(0, 8)
        return Fault(kind, node.name, gpu, onset, duration=dur)
    if kind == "nic-flap":
        nic = rng.choice(node.nics)
        # flap_count link-downs within the window (two may fall in one tick), then more
        span = rng.randint(policy.flap_count - 1, policy.flap_window - 1)
        inner = sorted(rng.randint(onset + 1, onset + span) for _ in range(policy.flap_count - 2))
        flaps = [onset, *inner, onset + span]
        t = flaps[-1]
        while t < horizon and rng.random() < 0.8:
            t += rng.randint(1, 6)
            flaps.append(t)
        return Fault(kind, node.name, nic, onset, flaps=tuple(sorted(flaps)))
    if kind == "disk-full":
        return Fault(kind, node.name, rng.choice(node.mounts), onset, ramp=rng.randint(2, 8))
    raise ValueError(f"unknown fault kind {kind!r}")


def make_noise(rng: random.Random, node: NodeInfo, policy: Policy, horizon: int,
               kinds: tuple[str, ...] = ("temp-spike", "sbe", "flap", "throttle", "app-xid",
                                         "disk")) -> list[Noise]:  # fmt: skip
    """Noise on a healthy node: none of it may become an incident."""
    out = []
    for kind in kinds:
        if rng.random() < 0.5:
            continue
        gpu = f"gpu{rng.randrange(len(node.gpus))}"
        t = rng.randrange(1, horizon - 1)
        if kind == "temp-spike":
            out.append(Noise(kind, node.name, gpu, (t, t + 1), value=rng.randint(80, 86)))
        elif kind == "sbe":
            out.append(Noise(kind, node.name, gpu, (t,), value=rng.choice([1, 1, 3])))
        elif kind == "flap":
            n = rng.randint(1, max(1, policy.flap_count - 1))
            # n < flap_count downs: no window can hold flap_count of them
            ticks = tuple(sorted(rng.sample(range(1, horizon), n)))
            out.append(Noise(kind, node.name, rng.choice(node.nics), ticks))
        elif kind == "throttle":
            reason = rng.choice(["sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown"])
            n = rng.randint(1, policy.thermal_ticks - 1) if reason == "hw_thermal_slowdown" else (
                rng.randint(1, 12))  # fmt: skip
            t = min(t, horizon - n)
            out.append(Noise(kind, node.name, gpu, tuple(range(t, t + n)), reason=reason))
        elif kind == "app-xid":
            ticks = tuple(sorted(rng.sample(range(1, horizon), rng.randint(1, 3))))
            out.append(Noise(kind, node.name, gpu, ticks, value=rng.choice([13, 31, 43, 45])))
        elif kind == "disk":
            top = int(policy.disk_full * 1000) - rng.randint(5, 60)
            out.append(Noise(kind, node.name, rng.choice(node.mounts), (t,), value=top))
    return out


def random_scenario(seed: int, nodes: int | None = None, faults: int | None = None,
                    kinds: tuple[str, ...] = KINDS, horizon: int = 70,
                    policy: Policy | None = None, plan: tuple[str, ...] = ()) -> Scenario:  # fmt: skip
    """A fleet of its own (names, bus ids, ports, jobs, policy) with `faults` faults of `kinds`
    (or one fault of each kind in `plan`) on distinct nodes, noise on most healthy nodes, and
    maybe a node in maintenance."""
    rng = random.Random(seed)
    nodes = nodes or rng.randint(max(8, len(plan) + 2), max(20, len(plan) + 4))
    policy = policy or random_policy(rng)
    inv = make_inventory(rng, nodes)
    order = list(inv)
    rng.shuffle(order)
    nf = len(plan) if plan else faults if faults is not None else rng.randint(1, min(4, nodes - 2))
    fs = []
    for k, node in enumerate(order[:nf]):
        kind = plan[k] if plan else rng.choice(kinds)
        fs.append(make_fault(rng, kind, node, rng.randint(4, horizon - 35), policy, horizon))
    noise = [z for node in order[nf:] for z in make_noise(rng, node, policy, horizon)]
    maint = (order[-1].name,) if rng.random() < 0.3 and len(order) > nf + 1 else ()
    return Scenario(inv, policy, horizon, make_jobs(rng, inv, horizon), tuple(fs), tuple(noise),
                    maint, reboot_ticks=rng.randint(2, 5), seed=seed)  # fmt: skip


def truth_incidents(scenario: Scenario) -> dict[int, list[Incident]]:
    """The incidents a correct detector reports, by the tick it reports them (the injection's
    ground truth: what the remediation tests feed your Remediator)."""
    out: dict[int, list[Incident]] = {}
    for f in scenario.faults:
        t = scenario.detect_tick(f)
        ev = (f"{f.kind} on {f.node} {f.device} since tick {f.onset}",)
        if f.xid is not None:
            node = next(n for n in scenario.nodes if n.name == f.node)
            ev = (xid_line(node, int(f.device[3:]), f.xid, f.onset, 0), *ev)
        out.setdefault(t, []).append(Incident(f.kind, f.node, f.device, f.onset, ev))
    for t in out:
        out[t].sort(key=lambda i: (i.first_seen, i.node, i.kind, i.device))
    return out


def run(scenario: Scenario, detector: object | None = None, remediator: object | None = None,
        feed: dict[int, list[Incident]] | None = None) -> tuple[Fleet, list[tuple[int, Incident]]]:  # fmt: skip
    """Play `scenario` to its horizon: each tick, the samples go to `detector.observe(tick,
    samples)` (if given), and the incidents (the detector's, or `feed`'s for that tick) go to
    `remediator.step(tick, incidents, samples)` (if given). Returns the fleet (its `actions`,
    `killed`, `cordoned`) and every incident reported with the tick it was reported."""
    fleet = Fleet(scenario)
    seen: list[tuple[int, Incident]] = []
    for t in range(scenario.horizon):
        samples = fleet.sample()
        if detector is not None:
            incs = list(detector.observe(t, samples))  # type: ignore[attr-defined]
        else:
            incs = list((feed or {}).get(t, []))
        seen += [(t, i) for i in incs]
        if remediator is not None:
            remediator.step(t, incs, samples)  # type: ignore[attr-defined]
        fleet.advance()
    return fleet, seen


def timeline_svg(scenario: Scenario, actions: list[Action],
                 reported: list[tuple[int, Incident]]) -> str:  # fmt: skip
    """A drill as a picture: one row per node that had a fault or an action, ticks across;
    a fault's onset (grey bar to the end), the incident's report (red triangle) and each action
    (a letter: C cordon, D drain, R reset_gpu, B reboot, E escalate, U uncordon)."""
    rows = sorted({f.node for f in scenario.faults} | {a.node for a in actions})
    w, h, left, top = 1000, 50 + 46 * max(1, len(rows)), 150, 30
    dx = (w - left - 20) / max(1, scenario.horizon)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16">ticks 0..{scenario.horizon - 1}; cap '
           f'{scenario.policy.max_out(len(scenario.nodes))} nodes. grey: a fault; red: its '
           f'report; C cordon, D drain, R reset_gpu, B reboot, E escalate, U uncordon</text>']  # fmt: skip
    letter = {"cordon": "C", "drain": "D", "reset_gpu": "R", "reboot": "B", "escalate": "E",
              "uncordon": "U"}  # fmt: skip
    for k, node in enumerate(rows):
        y = top + 46 * k
        out.append(f'<text x="4" y="{y + 14}">{node}</text>')
        out.append(f'<line x1="{left}" y1="{y + 10}" x2="{w - 20}" y2="{y + 10}" stroke="#ddd"/>')
        for f in scenario.faults:
            if f.node == node:
                x = left + f.onset * dx
                out.append(f'<rect x="{x:.1f}" y="{y + 6}" width="{w - 20 - x:.1f}" height="8" '
                           f'fill="#bbb"><title>{f.kind} {f.device}</title></rect>')  # fmt: skip
        for t, inc in reported:
            if inc.node == node:
                x = left + t * dx
                out.append(f'<path d="M{x:.1f},{y + 2} l4,7 l-8,0 z" fill="#c00">'
                           f'<title>{inc.kind} {inc.device} at {t}</title></path>')  # fmt: skip
        seen: dict[int, int] = {}
        for a in actions:
            if a.node == node:
                n = seen.get(a.tick, 0)
                seen[a.tick] = n + 1
                x = left + a.tick * dx - 3
                out.append(f'<text x="{x:.1f}" y="{y + 25 + 10 * n}" fill="#036" font-size="10">'
                           f'{letter[a.verb]}'
                           f'<title>{a.verb} at {a.tick}</title></text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


__all__ = [
    "KINDS",
    "THROTTLE_REASONS",
    "Action",
    "Control",
    "DiskSample",
    "Fault",
    "Fleet",
    "GpuInfo",
    "GpuSample",
    "Incident",
    "Job",
    "NicSample",
    "NodeInfo",
    "NodeSample",
    "Noise",
    "Policy",
    "Scenario",
    "random_scenario",
    "run",
    "timeline_svg",
    "truth_incidents",
    "xid_line",
]
