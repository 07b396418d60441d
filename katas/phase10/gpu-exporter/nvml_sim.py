"""Given: a simulated NVML with the API of `pynvml` (the `nvidia-ml-py` package), so the same
exporter code runs on this machine over simulated GPUs and on a GPU machine over the real
driver. Read it; do not edit it.

    nvml = SimNVML([SimGpu(name="NVIDIA H100 80GB HBM3", ...), ...])   # the tests build these
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.nvmlDeviceGetPowerUsage(h)            # 312512: MILLIWATTS, as NVML says
    nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)   # 1980: MEGAHERTZ

Your exporter receives either this simulator's NVML or the `pynvml` module itself and calls
the same names on it (`nvml.nvmlDeviceGetCount()`, `nvml.NVMLError_NotSupported`, ...).
Everything here that pynvml also has behaves as pynvml documents; the rest (`SimGpu`, `gpus`,
`calls`, `lose`, a handle's insides, ...) is the tests' remote control and is not in pynvml: the
tests hand your exporter a view of a SimNVML with pynvml's names only (tests/conftest.py,
`pynvml_view`), where handles are opaque, as pynvml's ctypes pointers are.

NVML's units are not Prometheus' base units (that is one lesson of the kata):

    call                                    returns                          unit
    nvmlDeviceGetUtilizationRates(h)        .gpu, .memory                    percent, 0..100
    nvmlDeviceGetMemoryInfo(h)              .total, .used, .free             bytes
    nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)                        degrees Celsius
    nvmlDeviceGetPowerUsage(h)                                               milliwatts
    nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)                                 megahertz
    nvmlDeviceGetTotalEccErrors(h, NVML_MEMORY_ERROR_TYPE_CORRECTED | _UNCORRECTED,
                                NVML_VOLATILE_ECC | NVML_AGGREGATE_ECC)      a count
    nvmlDeviceGetComputeRunningProcesses(h) [.pid, .usedGpuMemory]           bytes (None: unknown)
    nvmlSystemGetProcessName(pid)                                            str

VOLATILE ECC counts start again at 0 when the driver reloads or the GPU is reset; AGGREGATE
counts are kept in the board's InfoROM for its whole life. XID errors are not counters in NVML:
they are events, read from an event set (`nvmlEventSetCreate`, `nvmlDeviceRegisterEvents(h,
nvmlEventTypeXidCriticalError, set)`, `nvmlEventSetWait_v2(set, timeout_ms)`, which raises
NVMLError_Timeout when no event is pending; `.eventData` of an event is the XID number).
A call on a device that does not support it raises NVMLError_NotSupported (a GeForce card has no
ECC); every call on a GPU that fell off the bus (XID 79) raises NVMLError_GpuIsLost, and a
GPU can fail with other errors too (NVMLError_Unknown, _Timeout, _ResetRequired, ...: SimGpu's
`lost_error`), which mean the same for an exporter: that GPU cannot be read now.
nvmlEventSetWait_v2 waits as the driver does: with no event pending it blocks for `timeout_ms`
before it raises NVMLError_Timeout (here on a clock of its own, `waited_ms`, not the wall's).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
nvmlEventTypeXidCriticalError = 8


class NVMLError(Exception):
    """Every NVML failure; `.value` is NVML's return code, as in pynvml."""

    value = 999

    def __init__(self, value: int | None = None) -> None:
        if value is not None:
            self.value = value
        super().__init__(self.value)

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, "Unknown Error")


class NVMLError_Uninitialized(NVMLError):  # noqa: N801 (pynvml's names)
    value = 1


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    value = 2


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    value = 3


class NVMLError_NotFound(NVMLError):  # noqa: N801
    value = 6


class NVMLError_Timeout(NVMLError):  # noqa: N801
    value = 10


class NVMLError_IrqIssue(NVMLError):  # noqa: N801
    value = 11


class NVMLError_CorruptedInforom(NVMLError):  # noqa: N801
    value = 14


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    value = 15


class NVMLError_ResetRequired(NVMLError):  # noqa: N801
    value = 16


class NVMLError_Unknown(NVMLError):  # noqa: N801
    value = 999


_MESSAGES = {
    1: "Uninitialized",
    2: "Invalid Argument",
    3: "Not Supported",
    6: "Not Found",
    10: "Timeout",
    11: "Interrupt request issue",
    14: "Corrupted infoROM",
    15: "GPU is lost",
    16: "GPU requires reset",
    999: "Unknown Error",
}


@dataclass
class Utilization:
    gpu: int  # percent of the last sample period in which a kernel ran
    memory: int  # percent of it in which device memory was read or written


@dataclass
class Memory:
    total: int  # bytes
    used: int
    free: int


@dataclass
class ProcessInfo:
    pid: int
    usedGpuMemory: int | None  # noqa: N815 (pynvml's name) bytes; None: NVML does not know


@dataclass
class EventData:
    device: Any  # the handle
    eventType: int  # noqa: N815
    eventData: int  # noqa: N815 (the XID)


@dataclass
class SimProcess:
    pid: int
    name: str
    used_bytes: int | None


@dataclass
class SimGpu:
    """One simulated GPU: what it is and what it reads now (NVML's units)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    util_gpu: int = 0  # percent
    util_memory: int = 0  # percent
    memory_total: int = 85_899_345_920  # bytes (80 GiB)
    memory_used: int = 0  # bytes
    temperature: int = 30  # Celsius
    power_mw: int = 70_000  # milliwatts
    sm_clock_mhz: int = 1980  # MHz
    ecc_volatile: list[int] = field(default_factory=lambda: [0, 0])  # corrected, uncorrected
    ecc_aggregate: list[int] = field(default_factory=lambda: [0, 0])
    processes: list[SimProcess] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)  # e.g. {"ecc", "power", "processes"}
    lost: bool = False  # every call on it fails (with `lost_error`), handles included
    lost_error: type[NVMLError] = NVMLError_GpuIsLost


class _Handle:
    """An opaque device handle (pynvml's is a ctypes pointer: compare handles by the index they
    came from, never by value)."""

    __slots__ = ("_index",)

    def __init__(self, index: int) -> None:
        self._index = index

    def __repr__(self) -> str:
        return "<nvmlDevice_t>"


class _EventSet:
    __slots__ = ("devices", "freed", "pending")

    def __init__(self) -> None:
        self.devices: set[int] = set()
        self.freed = False
        self.pending: list[tuple[int, int]] = []  # (device, xid), oldest first


class SimNVML:
    """The NVML of a machine with `gpus`. Every NVML call is counted in `calls` (a Counter of
    (function name, device index or None)); the tests use it to see what a scrape read."""

    # pynvml's constants and errors, as attributes: `nvml.NVML_CLOCK_SM` works on both.
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_MEMORY_ERROR_TYPE_CORRECTED = NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC
    nvmlEventTypeXidCriticalError = nvmlEventTypeXidCriticalError
    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_IrqIssue = NVMLError_IrqIssue
    NVMLError_CorruptedInforom = NVMLError_CorruptedInforom
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_ResetRequired = NVMLError_ResetRequired
    NVMLError_Unknown = NVMLError_Unknown

    def __init__(self, gpus: list[SimGpu], driver_version: str = "550.90.07") -> None:
        self.gpus = gpus
        self.driver_version = driver_version
        self.calls: Counter[tuple[str, int | None]] = Counter()
        self.waited_ms = 0  # how long nvmlEventSetWait_v2 blocked, in all (the driver's clock)
        self._lock = threading.RLock()
        self._inits = 0
        self._sets: list[_EventSet] = []
        self._lose_after: dict[int, int] = {}  # device -> calls on it before it is lost

    # ---------------------------------------------------------------- the tests' remote control
    def xid(self, index: int, xid: int) -> None:
        """Device `index` reports XID `xid`: an event in every set registered for its XIDs (a set
        registered later never sees it, as with the real driver)."""
        with self._lock:
            for s in self._sets:
                if index in s.devices and not s.freed:
                    s.pending.append((index, xid))
            if xid == 79:  # fallen off the bus: every later call fails
                self.gpus[index].lost = True
                self.gpus[index].lost_error = NVMLError_GpuIsLost

    def lose(
        self, index: int, after_calls: int = 0, error: type[NVMLError] = NVMLError_GpuIsLost
    ) -> None:
        """Device `index` fails after `after_calls` more calls on it: every call on it then
        raises `error` (GpuIsLost: off the bus; Unknown, Timeout, ...: other failures)."""
        with self._lock:
            self.gpus[index].lost_error = error
            if after_calls <= 0:
                self.gpus[index].lost = True
            else:
                self._lose_after[index] = after_calls

    def reset(self, index: int) -> None:
        """A GPU reset (nvidia-smi -r) or driver reload: the device is back, its volatile ECC
        counts start again at 0, its aggregate ones are kept."""
        with self._lock:
            g = self.gpus[index]
            g.lost = False
            g.ecc_volatile = [0, 0]
            self._lose_after.pop(index, None)

    def device_calls(self) -> Counter[tuple[str, int | None]]:
        """A copy of `calls`, and `calls` cleared."""
        with self._lock:
            out = Counter(self.calls)
            self.calls.clear()
            return out

    # ---------------------------------------------------------------- NVML
    def _count(self, name: str, index: int | None) -> None:
        self.calls[(name, index)] += 1
        if not self._inits:
            raise NVMLError_Uninitialized()

    def _gpu(self, name: str, handle: Any, what: str | None = None) -> SimGpu:
        if not isinstance(handle, _Handle):
            raise NVMLError_InvalidArgument()
        i = handle._index
        self._count(name, i)
        if i in self._lose_after:
            self._lose_after[i] -= 1
            if self._lose_after[i] < 0:
                del self._lose_after[i]
                self.gpus[i].lost = True
        g = self.gpus[i]
        if g.lost:
            raise g.lost_error()
        if what is not None and what in g.unsupported:
            raise NVMLError_NotSupported()
        return g

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        with self._lock:
            self.calls[("nvmlInit", None)] += 1
            self._inits += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        with self._lock:
            self._count("nvmlShutdown", None)
            self._inits -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        with self._lock:
            self._count("nvmlSystemGetDriverVersion", None)
            return self.driver_version

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        with self._lock:
            self._count("nvmlDeviceGetCount", None)
            return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:  # noqa: N802
        with self._lock:
            self._count("nvmlDeviceGetHandleByIndex", None)
            if not isinstance(index, int) or not 0 <= index < len(self.gpus):
                raise NVMLError_InvalidArgument()
            if self.gpus[index].lost:  # NVML documents GPU_IS_LOST here too
                raise self.gpus[index].lost_error()
            return _Handle(index)

    def nvmlDeviceGetIndex(self, handle: Any) -> int:  # noqa: N802
        with self._lock:
            self._gpu("nvmlDeviceGetIndex", handle)
            return int(handle._index)

    def nvmlDeviceGetName(self, handle: Any) -> str:  # noqa: N802
        with self._lock:
            return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:  # noqa: N802
        with self._lock:
            return self._gpu("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Utilization:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceGetUtilizationRates", handle, "utilization")
            return Utilization(g.util_gpu, g.util_memory)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Memory:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceGetMemoryInfo", handle)
            return Memory(g.memory_total, g.memory_used, g.memory_total - g.memory_used)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceGetTemperature", handle, "temperature")
            if sensor != NVML_TEMPERATURE_GPU:
                raise NVMLError_InvalidArgument()
            return g.temperature

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:  # noqa: N802
        with self._lock:
            return self._gpu("nvmlDeviceGetPowerUsage", handle, "power").power_mw

    def nvmlDeviceGetClockInfo(self, handle: Any, clock: int) -> int:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceGetClockInfo", handle, "clock")
            if clock == NVML_CLOCK_SM:
                return g.sm_clock_mhz
            if clock in (NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM):
                return g.sm_clock_mhz if clock == NVML_CLOCK_GRAPHICS else 2619
            raise NVMLError_InvalidArgument()

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceGetTotalEccErrors", handle, "ecc")
            if error_type not in (0, 1) or counter_type not in (0, 1):
                raise NVMLError_InvalidArgument()
            counts = g.ecc_aggregate if counter_type == NVML_AGGREGATE_ECC else g.ecc_volatile
            return counts[error_type]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[ProcessInfo]:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceGetComputeRunningProcesses", handle, "processes")
            return [ProcessInfo(p.pid, p.used_bytes) for p in g.processes]

    def nvmlSystemGetProcessName(self, pid: int) -> str:  # noqa: N802
        with self._lock:
            self._count("nvmlSystemGetProcessName", None)
            for g in self.gpus:
                for p in g.processes:
                    if p.pid == pid:
                        return p.name
            raise NVMLError_NotFound()  # the process exited

    def nvmlEventSetCreate(self) -> _EventSet:  # noqa: N802
        with self._lock:
            self._count("nvmlEventSetCreate", None)
            s = _EventSet()
            self._sets.append(s)
            return s

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:  # noqa: N802
        with self._lock:
            g = self._gpu("nvmlDeviceRegisterEvents", handle)
            if "events" in g.unsupported:
                raise NVMLError_NotSupported()
            if not isinstance(event_set, _EventSet) or event_set.freed:
                raise NVMLError_InvalidArgument()
            if event_types & nvmlEventTypeXidCriticalError:
                event_set.devices.add(handle._index)

    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> EventData:  # noqa: N802
        # The oldest pending event at once; with none pending the driver blocks for timeout_ms
        # (no event arrives meanwhile here) and raises NVMLError_Timeout. The wait is counted in
        # `waited_ms` rather than slept: the tests see a blocking drain without waiting for it.
        with self._lock:
            self._count("nvmlEventSetWait_v2", None)
            if not isinstance(event_set, _EventSet) or event_set.freed:
                raise NVMLError_InvalidArgument()
            if event_set.pending:
                i, xid = event_set.pending.pop(0)
                return EventData(_Handle(i), nvmlEventTypeXidCriticalError, xid)
            self.waited_ms += max(0, int(timeout_ms))
            raise NVMLError_Timeout()

    def nvmlEventSetFree(self, event_set: Any) -> None:  # noqa: N802
        with self._lock:
            self._count("nvmlEventSetFree", None)
            if isinstance(event_set, _EventSet):
                event_set.freed = True
