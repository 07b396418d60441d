"""A Prometheus exporter for GPU metrics: NVML (simulated, or pynvml) in, the text exposition
format 0.0.4 out, over HTTP. The metric table is in the README ("What the exporter exposes").

    exporter = Exporter(nvml)          # nvml: nvml_sim.SimNVML(...) or the pynvml module
    snapshot = exporter.collect()      # task collect (and counters): one scrape's readings
    text = render(snapshot)            # task render (and names): the exposition text
    server = serve(exporter, port=0)   # task serve: GET /metrics on 127.0.0.1
    server.shutdown(); server.server_close(); exporter.close()
"""

from __future__ import annotations

import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

from .snapshot import Gpu, Process, Snapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# name, type, help: in the order render() writes them.
FAMILIES = [
    ("gpu_info", "gauge", "GPU identity: the NVML index, UUID and product name (always 1)."),
    ("gpu_up", "gauge", "1 when every NVML read of this GPU succeeded in this scrape, else 0."),
    ("gpu_utilization_ratio", "gauge", "Fraction of the last sample period a kernel ran."),
    (
        "gpu_memory_utilization_ratio",
        "gauge",
        "Fraction of the last sample period memory was busy.",
    ),
    ("gpu_memory_used_bytes", "gauge", "Device memory allocated."),
    ("gpu_memory_total_bytes", "gauge", "Device memory installed."),
    ("gpu_temperature_celsius", "gauge", "GPU die temperature."),
    ("gpu_power_watts", "gauge", "Board power draw."),
    ("gpu_sm_clock_hertz", "gauge", "Streaming multiprocessor clock."),
    ("gpu_ecc_errors_total", "counter", "ECC memory errors over the board's life, by type."),
    ("gpu_xid_errors_total", "counter", "XID error events seen since the exporter started."),
    ("gpu_process_memory_used_bytes", "gauge", "Device memory held by a compute process."),
    ("gpu_exporter_scrape_errors_total", "counter", "GPU reads that failed during scrapes."),
]
GAUGES = [  # family -> Gpu attribute
    ("gpu_utilization_ratio", "utilization_ratio"),
    ("gpu_memory_utilization_ratio", "memory_utilization_ratio"),
    ("gpu_memory_used_bytes", "memory_used_bytes"),
    ("gpu_memory_total_bytes", "memory_total_bytes"),
    ("gpu_temperature_celsius", "temperature_celsius"),
    ("gpu_power_watts", "power_watts"),
    ("gpu_sm_clock_hertz", "sm_clock_hertz"),
]


def escape_label(value: str) -> str:
    """A label value inside double quotes: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: backslash and newline escaped (a quote is fine there)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(v: float | int | bool) -> str:
    """Go's ParseFloat reads it back exactly: ints as ints, floats by repr, NaN and infinities."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def as_str(s: str | bytes) -> str:
    """NVML's strings: str from nvidia-ml-py >= 11.515, bytes from older bindings."""
    return s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)


def sample(name: str, labels: dict[str, str], value: float | int | bool) -> str:
    inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {format_value(value)}" if inner else f"{name} {format_value(value)}"


def render(snapshot: Snapshot) -> str:
    """The text exposition format 0.0.4 of one scrape: every family once, HELP and TYPE first,
    then its samples; a family with no samples still says HELP and TYPE."""
    rows: dict[str, list[str]] = {name: [] for name, _, _ in FAMILIES}
    for g in snapshot.gpus:
        ids = {"gpu": str(g.index), "uuid": g.uuid}
        rows["gpu_info"].append(sample("gpu_info", {**ids, "name": g.name}, 1))
        rows["gpu_up"].append(sample("gpu_up", ids, g.up))
        for family, attr in GAUGES:
            value = getattr(g, attr)
            if value is not None:
                rows[family].append(sample(family, ids, value))
        for kind, count in sorted(g.ecc_errors.items()):
            rows["gpu_ecc_errors_total"].append(
                sample("gpu_ecc_errors_total", {**ids, "type": kind}, count)
            )
        for xid, count in sorted(g.xid_errors.items()):
            rows["gpu_xid_errors_total"].append(
                sample("gpu_xid_errors_total", {**ids, "xid": str(xid)}, count)
            )
        for p in g.processes:
            labels = {**ids, "pid": str(p.pid), "process_name": p.name}
            rows["gpu_process_memory_used_bytes"].append(
                sample("gpu_process_memory_used_bytes", labels, p.memory_bytes)
            )
    rows["gpu_exporter_scrape_errors_total"].append(
        sample("gpu_exporter_scrape_errors_total", {}, snapshot.scrape_errors)
    )
    out: list[str] = []
    for name, kind, text in FAMILIES:
        out += [f"# HELP {name} {escape_help(text)}", f"# TYPE {name} {kind}", *rows[name]]
    return "\n".join(out) + "\n"


class Exporter:
    """Reads every GPU once per collect(). Identity (handle, UUID, name) and the XID event sets
    are set up once, here: NVML enumerates the devices at init, and an event set only sees the
    events after its registration. A GPU that cannot be read at start (off the bus already) is
    set up at the first scrape that reaches it."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self._lock = threading.Lock()
        n = nvml.nvmlDeviceGetCount()
        self.gpus: list[tuple[Any, str, str] | None] = [None] * n  # handle, uuid, name
        self.event_sets: list[Any] = [None] * n  # one per GPU that supports XID events
        self.xids: list[dict[int, int]] = [{} for _ in range(n)]
        self.scrape_errors = 0
        for i in range(n):
            self._identify(i)

    def _identify(self, i: int) -> tuple[Any, str, str] | None:
        """GPU i's handle, UUID and name, read (and its XID events registered) the first time
        NVML answers for it; None while it does not."""
        if self.gpus[i] is None:
            nvml = self.nvml
            try:
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                uuid, name = nvml.nvmlDeviceGetUUID(h), nvml.nvmlDeviceGetName(h)
            except nvml.NVMLError:
                return None
            self.gpus[i] = (h, as_str(uuid), as_str(name))
            self.event_sets[i] = self._xid_events(h)
        return self.gpus[i]

    def _xid_events(self, h: Any) -> Any:
        """An event set registered for this GPU's XIDs, or None where NVML has none for it (a
        GPU or a container without event support: its XIDs are then not counted)."""
        nvml, es = self.nvml, None
        try:
            es = nvml.nvmlEventSetCreate()
            nvml.nvmlDeviceRegisterEvents(h, nvml.nvmlEventTypeXidCriticalError, es)
            return es
        except nvml.NVMLError:
            if es is not None:
                nvml.nvmlEventSetFree(es)  # a set that watches nothing would leak until exit
        return None

    def _drain(self, i: int) -> None:
        """Count the XID events pending for GPU i (the exporter's own counter: NVML keeps none)."""
        es = self.event_sets[i]
        if es is None:
            return
        while True:
            try:
                ev = self.nvml.nvmlEventSetWait_v2(es, 0)
            except self.nvml.NVMLError:  # NVMLError_Timeout: none pending
                return
            xid = int(ev.eventData)
            self.xids[i][xid] = self.xids[i].get(xid, 0) + 1

    def _optional(self, call: Any, *args: Any) -> Any:
        """NVML's answer, or None where the device does not support the query."""
        try:
            return call(*args)
        except self.nvml.NVMLError_NotSupported:
            return None

    def _read(self, g: Gpu, h: Any) -> None:
        nv = self.nvml
        util = self._optional(nv.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            g.utilization_ratio = util.gpu / 100
            g.memory_utilization_ratio = util.memory / 100
        mem = self._optional(nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            g.memory_used_bytes, g.memory_total_bytes = int(mem.used), int(mem.total)
        temp = self._optional(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        g.temperature_celsius = None if temp is None else float(temp)
        mw = self._optional(nv.nvmlDeviceGetPowerUsage, h)
        g.power_watts = None if mw is None else mw / 1000
        mhz = self._optional(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        g.sm_clock_hertz = None if mhz is None else mhz * 1e6
        ecc = {}
        for kind, t in (
            ("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
        ):
            # AGGREGATE: the board's lifetime count, which a GPU reset does not zero.
            n = self._optional(nv.nvmlDeviceGetTotalEccErrors, h, t, nv.NVML_AGGREGATE_ECC)
            if n is None:
                ecc = {}
                break
            ecc[kind] = int(n)
        g.ecc_errors = ecc
        for p in self._optional(nv.nvmlDeviceGetComputeRunningProcesses, h) or []:
            if p.usedGpuMemory is None:
                continue
            try:
                name = nv.nvmlSystemGetProcessName(p.pid)
            except nv.NVMLError:  # the process exited between the two calls
                continue
            g.processes.append(Process(int(p.pid), as_str(name), int(p.usedGpuMemory)))

    def collect(self) -> Snapshot:
        """One scrape: every GPU read once; a GPU whose read fails is down in this scrape (its
        partial readings are dropped), the others are complete."""
        with self._lock:  # concurrent scrapes: the counters are shared state
            gpus = []
            for i in range(len(self.gpus)):
                self._drain(i)
                ident = self._identify(i)
                if ident is None:  # lost since the exporter started: no identity to show yet
                    self.scrape_errors += 1
                    gpus.append(Gpu(index=i, uuid="", name="", up=False))
                    continue
                h, uuid, name = ident
                g = Gpu(index=i, uuid=uuid, name=name)
                try:
                    self._read(g, h)
                except self.nvml.NVMLError:
                    self.scrape_errors += 1
                    g = Gpu(index=i, uuid=uuid, name=name, up=False)
                g.xid_errors = dict(self.xids[i])
                gpus.append(g)
            return Snapshot(gpus=gpus, scrape_errors=self.scrape_errors)

    def scrape(self) -> str:
        return render(self.collect())

    def close(self) -> None:
        for es in self.event_sets:
            if es is not None:
                self.nvml.nvmlEventSetFree(es)
        self.event_sets = [None] * len(self.gpus)
        self.nvml.nvmlShutdown()


def serve(exporter: Exporter, port: int = 0, host: str = "127.0.0.1") -> BaseServer:
    """An HTTP server on (host, port) in a daemon thread, already serving: GET /metrics answers
    a fresh scrape; every other path is 404. The caller stops it: shutdown(), server_close()."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics\n")
                return
            self._send(200, CONTENT_TYPE, exporter.scrape().encode("utf-8"))

        def _send(self, code: int, ctype: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # no line per scrape on stderr
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="gpu-exporter",
        daemon=True,
    ).start()
    return server
