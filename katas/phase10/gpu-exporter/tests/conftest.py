"""Fixtures of the gpu-exporter tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it.

What reads your exposition: `prometheus_client`'s text parser (the Python client's own, as the
issue's graders use it) after a strict line check of the 0.0.4 grammar written here (the parser
alone is lenient: it accepts `\\q` in a label value and a family split in two), and, in the
names task, Prometheus' `promtool check metrics`.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import threading
import types
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import pytest

# ------------------------------------------------------------------------------ the kata's code


@pytest.fixture(scope="module")
def exp(kata: Any) -> Any:
    """exporter.py (yours): render, Exporter, serve."""
    return kata.module("exporter")


@pytest.fixture(scope="module")
def sim(kata: Any) -> Any:
    """nvml_sim.py (given): SimNVML, SimGpu, SimProcess, NVML's constants and errors."""
    return kata.module("nvml_sim")


@pytest.fixture(scope="module")
def snap(kata: Any) -> Any:
    """snapshot.py (given): Snapshot, Gpu, Process."""
    return kata.module("snapshot")


class _Opaque:
    """A device handle or event set as pynvml gives them: nothing to read inside."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<nvml pointer>"


def pynvml_view(nvml: Any) -> Any:
    """What an exporter gets of a SimNVML: pynvml's names only (its nvml* functions, NVML_*
    constants and NVMLError* classes), with opaque handles and event sets, and an event's
    `.device` a new handle each time (pynvml's are ctypes pointers). The simulator's remote
    control (`gpus`, `calls`, `lose`, ...) is not there, as it is not on a real GPU."""
    inside: dict[_Opaque, Any] = {}  # opaque -> the simulator's own object

    def hide(x: Any) -> Any:
        if type(x).__name__ in ("_Handle", "_EventSet"):
            o = _Opaque()
            inside[o] = x
            return o
        if type(x).__name__ == "EventData":
            return type(x)(hide(x.device), x.eventType, x.eventData)
        return x

    def show(x: Any) -> Any:
        return inside.get(x, x) if isinstance(x, _Opaque) else x

    def wrap(name: str) -> Any:
        def call(*args: Any) -> Any:  # looked up at each call: a test may replace one
            return hide(getattr(nvml, name)(*(show(a) for a in args)))

        call.__name__ = call.__qualname__ = name
        return call

    view = types.SimpleNamespace()
    for name in dir(type(nvml)):
        if not name.lower().startswith("nvml"):
            continue
        value = getattr(nvml, name)
        setattr(view, name, wrap(name) if callable(value) and name[:4] == "nvml" else value)
    return view


@pytest.fixture(scope="module")
def nvml_view() -> Any:
    """pynvml_view(sim_nvml): the NVML an exporter gets of a SimNVML (make_exporter uses it)."""
    return pynvml_view


@pytest.fixture
def make_exporter(exp: Any) -> Any:
    """Exporter(pynvml_view(nvml)), closed after the test (a close() that fails is not this
    test's business)."""
    made: list[Any] = []

    def make(nvml: Any) -> Any:
        e = exp.Exporter(pynvml_view(nvml))
        made.append(e)
        return e

    yield make
    for e in made:
        try:
            e.close()
        except Exception:  # noqa: S110 (teardown: close is not graded)
            pass


@pytest.fixture
def start_server(exp: Any) -> Any:
    """serve(exporter, port=0) -> the base URL "http://127.0.0.1:PORT"; the server is shut down
    after the test (bounded: a server that never served cannot hang the teardown)."""
    servers: list[Any] = []

    def start(exporter: Any) -> str:
        server = exp.serve(exporter, port=0)
        servers.append(server)
        host, port = server.server_address[:2]
        assert host == "127.0.0.1" and port > 0, (
            f"serve(exporter, port=0) should listen on 127.0.0.1 and a port the OS picked; "
            f"server_address is {server.server_address!r}"
        )
        return f"http://127.0.0.1:{port}"

    yield start
    for s in servers:
        t = threading.Thread(target=s.shutdown, daemon=True)
        t.start()
        t.join(2)
        try:
            s.server_close()
        except Exception:  # noqa: S110
            pass


@dataclass
class Reply:
    status: int
    content_type: str
    body: str


def http_get(url: str, timeout: float = 5.0) -> Reply:
    """GET url: status, Content-Type and body (UTF-8), 4xx and 5xx included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (127.0.0.1 only)
            return Reply(r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers.get("Content-Type", ""), e.read().decode("utf-8", "replace"))


@pytest.fixture(scope="module")
def get() -> Any:
    """http_get(url, timeout=5.0) -> Reply(status, content_type, body)."""
    return http_get


# ------------------------------------------------------------------------------ the exposition
# Blanks (spaces, tabs) may separate tokens, as the format allows; none may end a line (Prometheus'
# parser refuses that).
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
B = r"[ \t]*"
LABEL = rf'[a-zA-Z_][a-zA-Z0-9_]*{B}={B}"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(
    rf"^(?P<name>{NAME}){B}(?:\{{{B}(?P<labels>{LABEL}(?:{B},{B}{LABEL})*{B},?)?{B}\}}{B}|[ \t]+)"
    r"(?P<value>\S+)(?:[ \t]+-?[0-9]+)?$"
)
LABEL_PAIR = re.compile(rf'([a-zA-Z_][a-zA-Z0-9_]*){B}={B}"((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def unescape(v: str) -> str:
    return re.sub(r"\\([\\\"n])", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


@dataclass
class Exposition:
    """What an exposition says: types[family], helps[family] (unescaped), and samples
    {(sample name, frozenset of (label, value))): float} (the values from prometheus_client's
    parser)."""

    types: dict[str, str] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = field(default_factory=dict)

    def get(self, family: str, /, **labels: str) -> float | None:
        return self.samples.get((family, frozenset(labels.items())))

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {lab: v for (n, lab), v in self.samples.items() if n == name}


def check_exposition(text: Any) -> Exposition:
    """The exposition `text`, checked line by line against the 0.0.4 grammar (raises
    AssertionError saying the line and what is wrong), then read by prometheus_client's parser.
    Rules: every line ends with "\\n"; `# HELP name text` and `# TYPE name type` at most once
    per family, before its samples; a family's lines are contiguous; a sample's name is its
    family's (a counter family's name already ends in _total here); label values escape \\, "
    and newline and nothing else; no two samples with the same name and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    assert isinstance(text, str), f"the exposition should be a str, got {type(text).__name__}"
    assert text.endswith("\n"), "the exposition's last line must end with a newline"
    exp = Exposition()
    closed: set[str] = set()
    current: str | None = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {n} ({line[:120]!r})"
        if line.startswith("#"):
            m = re.match(rf"^#[ \t]+(HELP|TYPE)[ \t]+({NAME})(?:[ \t]+(.*))?$", line)
            if m is None:
                continue  # another comment
            kind, fam, rest = m.group(1), m.group(2), m.group(3) or ""
            assert fam not in closed, f"{where}: family {fam} appears again after other families"
            if current != fam and current is not None:
                closed.add(current)
            current = fam
            if kind == "TYPE":
                assert fam not in exp.types, f"{where}: a second TYPE line for {fam}"
                assert rest in TYPES, f"{where}: {rest!r} is not a metric type {TYPES}"
                assert not any(s == fam for s, _ in exp.samples), (
                    f"{where}: TYPE of {fam} after its samples"
                )
                exp.types[fam] = rest
            else:
                assert fam not in exp.helps, f"{where}: a second HELP line for {fam}"
                assert not re.search(r"\\[^\\n]", rest.replace("\\\\", "")), (
                    f"{where}: HELP text escapes only \\\\ and \\n"
                )
                exp.helps[fam] = (
                    rest.replace("\\\\", "\x00").replace("\\n", "\n").replace("\x00", "\\")
                )
            continue
        assert line.strip(), f"{where}: a blank line inside the exposition"
        m = SAMPLE.match(line)
        assert m is not None, (
            f'{where}: not a sample line `name{{label="value",...}} value`; label values must '
            f'escape \\ as \\\\, " as \\" and a newline as \\n'
        )
        fam = m.group("name")
        assert fam not in closed, f"{where}: family {fam} appears again after other families"
        if current != fam and current is not None:
            closed.add(current)
        current = fam
        labels = frozenset((k, unescape(v)) for k, v in LABEL_PAIR.findall(m.group("labels") or ""))
        names = [k for k, _ in labels]
        assert len(names) == len(set(names)), f"{where}: a label appears twice"
        assert (fam, labels) not in exp.samples, f"{where}: the same series twice"
        try:
            value = float(m.group("value"))
        except ValueError:
            raise AssertionError(f"{where}: {m.group('value')!r} is not a number") from None
        exp.samples[(fam, labels)] = value
    # The values as the Python client's parser reads them (it must agree with the line check).
    parsed: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            parsed[(s.name, frozenset(s.labels.items()))] = float(s.value)
    for key, value in exp.samples.items():
        other = parsed.get(key)
        same = other is not None and (other == value or (math.isnan(other) and math.isnan(value)))
        assert same, f"prometheus_client reads {key[0]}{dict(key[1])} as {other}, not {value}"
    exp.samples = {k: parsed[k] for k in exp.samples}
    return exp


@pytest.fixture(scope="module")
def parse() -> Any:
    """check_exposition(text) -> Exposition (types, helps, samples): the strict reading."""
    return check_exposition


def promtool_findings(text: str) -> str:
    """What `promtool check metrics` says about the exposition (empty: nothing)."""
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is not on PATH (capability promtool)"
    r = subprocess.run(
        [tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    return (r.stdout + r.stderr).strip() if r.returncode else ""


@pytest.fixture(scope="module")
def promtool() -> Any:
    """promtool_findings(text) -> str: promtool check metrics' findings, "" when none."""
    return promtool_findings


# ------------------------------------------------------------------------------ the metric table
# The README's table: family -> (type, the labels of its series).
TABLE = {
    "gpu_info": ("gauge", ("gpu", "uuid", "name")),
    "gpu_up": ("gauge", ("gpu", "uuid")),
    "gpu_utilization_ratio": ("gauge", ("gpu", "uuid")),
    "gpu_memory_utilization_ratio": ("gauge", ("gpu", "uuid")),
    "gpu_memory_used_bytes": ("gauge", ("gpu", "uuid")),
    "gpu_memory_total_bytes": ("gauge", ("gpu", "uuid")),
    "gpu_temperature_celsius": ("gauge", ("gpu", "uuid")),
    "gpu_power_watts": ("gauge", ("gpu", "uuid")),
    "gpu_sm_clock_hertz": ("gauge", ("gpu", "uuid")),
    "gpu_ecc_errors_total": ("counter", ("gpu", "uuid", "type")),
    "gpu_xid_errors_total": ("counter", ("gpu", "uuid", "xid")),
    "gpu_process_memory_used_bytes": ("gauge", ("gpu", "uuid", "pid", "process_name")),
    "gpu_exporter_scrape_errors_total": ("counter", ()),
}
GAUGES = {  # family -> snapshot.Gpu attribute
    "gpu_utilization_ratio": "utilization_ratio",
    "gpu_memory_utilization_ratio": "memory_utilization_ratio",
    "gpu_memory_used_bytes": "memory_used_bytes",
    "gpu_memory_total_bytes": "memory_total_bytes",
    "gpu_temperature_celsius": "temperature_celsius",
    "gpu_power_watts": "power_watts",
    "gpu_sm_clock_hertz": "sm_clock_hertz",
}


@pytest.fixture(scope="module")
def table() -> Any:
    """TABLE (family -> (type, labels)) and GAUGES (family -> snapshot.Gpu attribute)."""
    return type("Table", (), {"families": TABLE, "gauges": GAUGES})
