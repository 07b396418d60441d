"""A Prometheus exporter for GPU metrics: NVML (simulated, or pynvml) in, the text exposition
format 0.0.4 out, over HTTP: the file you edit. The metric table it must expose is in the
README ("What the exporter exposes"); snapshot.py holds the readings between collect and render.

    exporter = Exporter(nvml)          # nvml: nvml_sim.SimNVML(...) or the pynvml module
    snapshot = exporter.collect()      # tasks collect and counters: one scrape's readings
    text = render(snapshot)            # tasks render and names: the exposition text
    server = serve(exporter, port=0)   # task serve: GET /metrics on 127.0.0.1
    server.shutdown(); server.server_close(); exporter.close()
"""

from __future__ import annotations

from socketserver import BaseServer
from typing import Any

from harness import todo

from .snapshot import Gpu, Process, Snapshot  # noqa: F401  (what collect builds)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what Prometheus expects back


def render(snapshot: Snapshot) -> str:
    """The text exposition format 0.0.4 of one scrape (tasks render and names): each family of
    the README's table once, `# HELP` then `# TYPE` then its samples; values in the snapshot's
    units (already Prometheus' base units), label values escaped (\\, ", newline)."""
    todo("render")


class Exporter:
    """Reads every GPU through `nvml` (an nvml_sim.SimNVML or the pynvml module: call only
    pynvml's names on it). Set up here what lasts: nvmlInit, the devices' handles, UUIDs and
    names, one XID event set per GPU (an event set only sees events after it is registered).
    A GPU whose calls fail already here (off the bus before the exporter started) must not stop
    it: that GPU is down in each scrape (uuid and name "" while unknown) until NVML answers."""

    def __init__(self, nvml: Any) -> None:
        todo("Exporter.__init__")

    def collect(self) -> Snapshot:
        """One scrape (tasks collect and counters): every reading of every GPU, once, converted
        to base units; NotSupported readings None; a GPU whose read fails otherwise is down in
        this scrape (up=False, no readings) and counts one scrape error; the XID events pending
        since the last scrape added to the exporter's counts. Safe to call from many threads."""
        todo("Exporter.collect")

    def scrape(self) -> str:
        """render(self.collect()): what GET /metrics answers."""
        return render(self.collect())

    def close(self) -> None:
        """Free the event sets, nvmlShutdown."""
        todo("Exporter.close")


def serve(exporter: Exporter, port: int = 0, host: str = "127.0.0.1") -> BaseServer:
    """An HTTP server on (host, port) in a daemon thread, already serving when it returns (task
    serve): GET /metrics answers a fresh scrape with CONTENT_TYPE; every other path is 404. The
    caller reads the port from server.server_address and stops it: server.shutdown();
    server.server_close() (http.server's servers are socketserver.BaseServers)."""
    todo("serve")
