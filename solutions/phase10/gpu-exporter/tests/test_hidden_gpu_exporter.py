"""Hidden tests of gpu-exporter: random fleets of 1-8 GPUs drawn from the run seed (readings at
their edges, names and process names with quotes, backslashes, newlines and non-ASCII text,
readings a board does not support), GPUs lost in the middle of a scrape, GPU resets and bursts
of XID events, each checked against the simulated devices' own state through an oracle written
here (NVML's units to Prometheus' base units), and the exposition read back by the strict line
check, prometheus_client's parser and promtool."""

from __future__ import annotations

import concurrent.futures
import math
import os
import random
import re
import socket
import sys
import threading
import time
import types
import uuid as uuidlib
from typing import Any

import pytest

from harness.testing import fresh_module, random_for, watch_calls

NAMES = [
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-80GB",
    "Tesla V100-SXM2-16GB",
    "NVIDIA GeForce RTX 4090",
    'NVIDIA "Quoted" Board',
    "Lab board \\ rev B",
    "two\nlines",
    "Übergröße GPU 名前",
]
NASTY = [
    "",
    '"',
    "\\",
    "a\\",
    "\\n",
    '\\"',
    "tab\there",
    "new\nline",
    'py "train.py" --lr=3e-4',
    "C:\\Program Files\\nv.exe",
    "ñandú-训练-🚀",
    "end\n",
    '\\\\\n"',
]
TOTALS = [4 * 2**30, 16 * 2**30, 24 * 2**30, 40 * 2**30, 80 * 2**30, 85_899_345_920, 141 * 2**30]
READINGS = ("utilization", "temperature", "power", "clock", "ecc", "processes")
# How a GPU fails besides NotSupported: off the bus, and what a driver hiccup returns instead.
FAILURES = (
    "NVMLError_GpuIsLost",
    "NVMLError_Unknown",
    "NVMLError_Timeout",
    "NVMLError_ResetRequired",
    "NVMLError_CorruptedInforom",
    "NVMLError_IrqIssue",
)


def failure(r: random.Random, sim: Any) -> Any:
    """An NVMLError class a failing GPU raises on every call."""
    return getattr(sim, r.choice(FAILURES))


def edge(r: random.Random, lo: int, hi: int) -> int:
    """An int in [lo, hi], at an end a third of the time."""
    return r.choice([lo, hi, r.randint(lo, hi), r.randint(lo, hi)])


def random_gpu(r: random.Random, sim: Any, pids: dict[int, str]) -> Any:
    total = r.choice(TOTALS)
    aggregate = [edge(r, 0, 2**40), edge(r, 0, 5000)]
    procs = []
    for _ in range(r.choice([0, 0, 1, 2, 4])):
        # a pid on two GPUs is one process using both (the same name)
        pid = r.choice(list(pids)) if pids and r.random() < 0.2 else r.randint(1, 4_194_304)
        if pid in (p.pid for p in procs):
            continue
        name = pids.setdefault(pid, r.choice(NASTY + ["python3", "vllm serve"]))
        used = None if r.random() < 0.15 else edge(r, 0, total)
        procs.append(sim.SimProcess(pid, name, used))
    unsupported = {x for x in READINGS if r.random() < 0.12}
    if r.random() < 0.3:
        unsupported.add("events")
    return sim.SimGpu(
        name=r.choice(NAMES),
        uuid=f"GPU-{uuidlib.UUID(int=r.getrandbits(128))}",
        util_gpu=edge(r, 0, 100),
        util_memory=edge(r, 0, 100),
        memory_total=total,
        memory_used=edge(r, 0, total),
        temperature=edge(r, 0, 110),
        power_mw=edge(r, 0, 1_000_000),
        sm_clock_mhz=edge(r, 0, 3105),
        ecc_volatile=[r.randint(0, a) for a in aggregate],
        ecc_aggregate=aggregate,
        processes=procs,
        unsupported=unsupported,
    )


def random_fleet(r: random.Random, sim: Any, n: int | None = None) -> Any:
    pids: dict[int, str] = {}
    return sim.SimNVML([random_gpu(r, sim, pids) for _ in range(n or r.randint(1, 8))])


def describe(nvml: Any) -> str:
    return "; ".join(
        f"GPU {i}: {g.name!r}, util {g.util_gpu}%, {g.power_mw} mW, {g.sm_clock_mhz} MHz, "
        f"unsupported {sorted(g.unsupported)}, lost {g.lost}"
        + (f" ({g.lost_error.__name__})" if g.lost else "")
        for i, g in enumerate(nvml.gpus)
    )


# ------------------------------------------------------------------------------ the oracle
def truth(g: Any, i: int, xids: dict[int, int], up: bool) -> dict[str, Any]:
    """What collect must say of simulated GPU `g` (index i), in base units."""
    want: dict[str, Any] = {"index": i, "uuid": g.uuid, "name": g.name, "up": up}
    want["xid_errors"] = dict(xids)
    none = dict.fromkeys(
        [
            "utilization_ratio",
            "memory_utilization_ratio",
            "memory_used_bytes",
            "memory_total_bytes",
            "temperature_celsius",
            "power_watts",
            "sm_clock_hertz",
        ]
    )
    want.update(none, ecc_errors={}, processes=[])
    if not up:
        return want
    u = g.unsupported
    if "utilization" not in u:
        want["utilization_ratio"] = g.util_gpu / 100
        want["memory_utilization_ratio"] = g.util_memory / 100
    want["memory_used_bytes"], want["memory_total_bytes"] = g.memory_used, g.memory_total
    if "temperature" not in u:
        want["temperature_celsius"] = g.temperature
    if "power" not in u:
        want["power_watts"] = g.power_mw / 1000
    if "clock" not in u:
        want["sm_clock_hertz"] = g.sm_clock_mhz * 1e6
    if "ecc" not in u:
        want["ecc_errors"] = {"corrected": g.ecc_aggregate[0], "uncorrected": g.ecc_aggregate[1]}
    if "processes" not in u:
        want["processes"] = [
            (p.pid, p.name, p.used_bytes) for p in g.processes if p.used_bytes is not None
        ]
    return want


def same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a is not None:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def check_snapshot(s: Any, want: list[dict[str, Any]], errors: int, where: str) -> None:
    assert type(s).__name__ == "Snapshot", f"collect() should return a Snapshot, got {s!r}"
    assert len(s.gpus) == len(want), (
        f"collect() on {where}: {len(want)} GPUs expected, got {len(s.gpus)}"
    )
    for g, w in zip(s.gpus, want, strict=True):
        for k, v in w.items():
            got = getattr(g, k)
            if k == "processes":
                got = [(p.pid, p.name, p.memory_bytes) for p in got]
                ok = sorted(got, key=repr) == sorted(v, key=repr)
            else:
                ok = (got is None) == (v is None) and (v is None or same(got, v))
            assert ok, f"collect() on {where}: GPU {w['index']}.{k} should be {v!r}, got {got!r}"
    assert s.scrape_errors == errors, (
        f"collect() on {where}: scrape_errors should be {errors}, got {s.scrape_errors}"
    )


def expected_series(want: list[dict[str, Any]], errors: int, table: Any) -> dict[Any, float]:
    """Every series the exposition of these GPUs must have, and nothing else."""
    out: dict[Any, float] = {}

    def put(family: str, value: float, /, **labels: str) -> None:
        out[(family, frozenset(labels.items()))] = float(value)

    for w in want:
        ids = {"gpu": str(w["index"]), "uuid": w["uuid"]}
        put("gpu_info", 1, **ids, name=w["name"])
        put("gpu_up", 1 if w["up"] else 0, **ids)
        for family, attr in table.gauges.items():
            if w[attr] is not None:
                put(family, w[attr], **ids)
        for kind, n in w["ecc_errors"].items():
            put("gpu_ecc_errors_total", n, **ids, type=kind)
        for xid, n in w["xid_errors"].items():
            put("gpu_xid_errors_total", n, **ids, xid=str(xid))
        for pid, name, used in w["processes"]:
            put("gpu_process_memory_used_bytes", used, **ids, pid=str(pid), process_name=name)
    put("gpu_exporter_scrape_errors_total", errors)
    return out


def check_series(e: Any, want: dict[Any, float], who: str, exact: bool = False) -> None:
    def show(k: Any) -> str:
        return f"{k[0]}{dict(sorted(k[1]))}"

    missing = [show(k) for k in want if k not in e.samples]
    assert not missing, f"{who}: series missing: {missing[:4]} (of {len(missing)})"
    extra = [show(k) for k in e.samples if k not in want]
    assert not extra, f"{who}: series that should not be there: {extra[:4]}"
    for k, v in want.items():
        got = e.samples[k]
        ok = got == v if exact else math.isclose(got, v, rel_tol=1e-9, abs_tol=1e-12)
        ok = ok or (math.isnan(got) and math.isnan(v))
        assert ok, f"{who}: {show(k)} should be {v!r}, got {got!r}"


def scrape_truth(nvml: Any, xids: list[dict[int, int]]) -> list[dict[str, Any]]:
    return [truth(g, i, xids[i], not g.lost) for i, g in enumerate(nvml.gpus)]


# ------------------------------------------------------------------------------ render
def random_snapshot(r: random.Random, snap: Any) -> Any:
    def value() -> Any:
        return r.choice(
            [
                None,
                0,
                0.0,
                1,
                r.random(),
                0.1 + 0.2,
                1e-300,
                1.7976931348623157e308,
                r.randint(0, 2**53),
                r.randint(0, 10**6) / 1000,
                r.randint(0, 3105) * 1e6,
                2**40 + 1,
                math.nan,
                math.inf,
                -math.inf,
            ]
        )

    gpus = []
    for i in r.sample(range(16), r.randint(1, 8)):
        gpus.append(
            snap.Gpu(
                index=i,
                uuid=f"GPU-{uuidlib.UUID(int=r.getrandbits(128))}",
                name=r.choice(NAMES + NASTY),
                up=r.random() < 0.8,
                utilization_ratio=value(),
                memory_utilization_ratio=value(),
                memory_used_bytes=value(),
                memory_total_bytes=value(),
                temperature_celsius=value(),
                power_watts=value(),
                sm_clock_hertz=value(),
                ecc_errors=r.choice(
                    [{}, {"corrected": r.randint(0, 2**40), "uncorrected": r.randint(0, 9)}]
                ),
                processes=[
                    snap.Process(r.randint(1, 2**22), r.choice(NASTY), r.randint(0, 2**37))
                    for _ in range(r.choice([0, 1, 3]))
                ],
                xid_errors={
                    x: r.randint(1, 10**6) for x in r.sample([13, 31, 43, 48, 63, 79, 94], 2)
                }
                if r.random() < 0.5
                else {},
            )
        )
    # distinct pids per GPU (a series each)
    for g in gpus:
        seen: set[int] = set()
        g.processes = [p for p in g.processes if not (p.pid in seen or seen.add(p.pid))]
    return snap.Snapshot(gpus=gpus, scrape_errors=r.randint(0, 10**9))


def snapshot_series(s: Any, table: Any) -> dict[Any, float]:
    want = []
    for g in s.gpus:
        w = {
            "index": g.index,
            "uuid": g.uuid,
            "name": g.name,
            "up": g.up,
            "ecc_errors": g.ecc_errors,
            "xid_errors": g.xid_errors,
            "processes": [(p.pid, p.name, p.memory_bytes) for p in g.processes],
        }
        w.update({attr: getattr(g, attr) for attr in table.gauges.values()})
        want.append(w)
    return expected_series(want, s.scrape_errors, table)


def test_render_random_snapshots(exp: Any, snap: Any, parse: Any, table: Any) -> None:
    r = random_for()
    for _ in range(25):
        s = random_snapshot(r, snap)
        who = f"render() of a random snapshot of {len(s.gpus)} GPUs"
        check_series(parse(exp.render(s)), snapshot_series(s, table), who, exact=True)


@pytest.mark.kata_gate(
    "a label value with a backslash, a double quote or a newline does not read back as written"
)
def test_render_hidden_escaping(exp: Any, snap: Any, parse: Any) -> None:
    for i, name in enumerate(NASTY):
        g = snap.Gpu(index=i, uuid=f"GPU-{i}", name=name, processes=[snap.Process(9, name, 5)])
        e = parse(exp.render(snap.Snapshot(gpus=[g])))
        ids = {"gpu": str(i), "uuid": f"GPU-{i}"}
        assert e.get("gpu_info", **ids, name=name) == 1, (
            f"render(): gpu_info's name label should read back as {name!r}; got "
            f"{list(e.series('gpu_info'))}"
        )
        got = e.get("gpu_process_memory_used_bytes", **ids, pid="9", process_name=name)
        assert got == 5, (
            f"render(): process_name {name!r} should read back as written; got "
            f"{list(e.series('gpu_process_memory_used_bytes'))}"
        )


@pytest.mark.kata_gate("render calls prometheus_client to write the exposition")
def test_render_hidden_writes_the_text_itself(exp: Any, snap: Any) -> None:
    r = random_for()
    s = random_snapshot(r, snap)
    with watch_calls("prometheus_client", processes=False) as log:
        text = fresh_module(exp).render(s)
    assert not log, (
        f"render() called {log}: this task is writing the text format yourself (the README's "
        f"tasks section)"
    )
    assert isinstance(text, str), f"render() should return the text, got {type(text).__name__}"
    # The library's code run from copies (another file name, other globals) is the same
    # bytecode: look for it by its code, not by where it says it lives.
    theirs = _client_code()
    ran: list[str] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and (code.co_name, code.co_code) in theirs:
            ran.append(code.co_name)

    before = sys.getprofile()
    sys.setprofile(hook)
    try:
        fresh_module(exp).render(s)
    finally:
        sys.setprofile(before)
    assert not ran, (
        f"render() ran prometheus_client's own code ({sorted(set(ran))}) from copies of its "
        f"functions: this task is writing the text format yourself (the README's tasks section)"
    )


def _client_code() -> set[tuple[str, bytes]]:
    """(name, bytecode) of every function of prometheus_client's writer and parser modules
    (nested ones too), leaving out names in angle brackets and tiny bodies (an honest one-liner
    may compile to the same bytes)."""
    import importlib

    for m in ("exposition", "openmetrics.exposition", "parser", "utils"):
        importlib.import_module(f"prometheus_client.{m}")
    found: set[tuple[str, bytes]] = set()

    def walk(code: types.CodeType) -> None:
        if not code.co_name.startswith("<") and len(code.co_code) >= 40:
            found.add((code.co_name, code.co_code))
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)

    for name, module in list(sys.modules.items()):
        if not name.startswith("prometheus_client") or module is None:
            continue
        for obj in vars(module).values():
            for f in [obj, *vars(obj).values()] if isinstance(obj, type) else [obj]:
                f = getattr(f, "__func__", f)
                if isinstance(f, types.FunctionType) and f.__module__.startswith(
                    "prometheus_client"
                ):
                    walk(f.__code__)
    return found


def test_render_no_gpus(exp: Any, snap: Any, parse: Any) -> None:
    e = parse(exp.render(snap.Snapshot(gpus=[], scrape_errors=3)))
    assert e.samples == {("gpu_exporter_scrape_errors_total", frozenset()): 3.0}, (
        f"render() of a machine with no GPUs: only the scrape error counter; got {e.samples}"
    )


# ------------------------------------------------------------------------------ names
@pytest.mark.kata_gate("promtool check metrics finds a problem in the exposition of a random fleet")
def test_names_hidden_promtool_random(
    exp: Any, snap: Any, promtool: Any, parse: Any, table: Any
) -> None:
    r = random_for()
    for _ in range(4):
        s = random_snapshot(r, snap)
        text = exp.render(s)
        findings = promtool(text)
        assert findings == "", (
            f"render() of {len(s.gpus)} GPUs: promtool check metrics says:\n{findings[:600]}"
        )
        e = parse(text)
        for family, (kind, labels) in table.families.items():
            assert e.types.get(family) == kind, (
                f"render(): # TYPE {family} should be {kind}, got {e.types.get(family)}"
            )
            assert e.helps.get(family, "").strip(), f"render(): # HELP {family} is missing"
            for lab in e.series(family):
                assert sorted(k for k, _ in lab) == sorted(labels), (
                    f"render(): {family}'s labels should be {sorted(labels)}, got "
                    f"{sorted(k for k, _ in lab)}"
                )


def test_names_hidden_every_family_once(exp: Any, snap: Any, parse: Any, table: Any) -> None:
    r = random_for()
    s = random_snapshot(r, snap)
    e = parse(exp.render(s))
    unknown = set(e.types) - set(table.families)
    assert not unknown, f"render(): families not in the README's table: {sorted(unknown)}"
    names = {n for n, _ in e.samples}
    assert names <= set(table.families), (
        f"render(): samples of families not in the table: {sorted(names - set(table.families))}"
    )


@pytest.mark.kata_gate("a HELP line of a random fleet's exposition only repeats its family's name")
def test_names_hidden_help_says_what(exp: Any, snap: Any, parse: Any, table: Any) -> None:
    r = random_for()
    e = parse(exp.render(random_snapshot(r, snap)))
    for family in table.families:
        text = e.helps.get(family, "")
        words = re.findall(r"[a-z0-9]+", text.lower())
        assert words and words != family.split("_"), (
            f"render(): # HELP {family} should say what the series measures in words, not "
            f"repeat the family's name; got {text!r}"
        )


# ------------------------------------------------------------------------------ collect
def test_collect_random_fleets(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    for _ in range(12):
        nvml = random_fleet(r, sim)
        e = make_exporter(nvml)
        # some GPUs fail during the scrape, with any NVMLError but NotSupported
        failed = [i for i in range(len(nvml.gpus)) if r.random() < 0.2]
        for i in failed:
            nvml.lose(i, after_calls=r.randint(0, 6), error=failure(r, sim))
        want = scrape_truth(nvml, [{} for _ in nvml.gpus])
        for i in failed:
            want[i] = truth(nvml.gpus[i], i, {}, up=False)
        s = e.collect()
        check_snapshot(s, want, len(failed), f"a random fleet ({describe(nvml)})")


@pytest.mark.kata_gate(
    "a GPU lost during a scrape is not reported down with its identity and no readings, or "
    "another GPU of that scrape is incomplete"
)
def test_collect_hidden_lost_gpus(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    for _ in range(10):
        nvml = random_fleet(r, sim)
        e = make_exporter(nvml)
        lost = r.sample(range(len(nvml.gpus)), r.randint(1, len(nvml.gpus)))
        errors = {i: failure(r, sim) for i in lost}
        for i in lost:
            nvml.lose(i, after_calls=r.randint(0, 6), error=errors[i])
        want = scrape_truth(nvml, [{} for _ in nvml.gpus])
        for i in lost:
            want[i] = truth(nvml.gpus[i], i, {}, up=False)
        fails = ", ".join(f"{i}: {errors[i].__name__}" for i in sorted(lost))
        where = f"a fleet whose GPUs fail during the scrape ({fails})"
        check_snapshot(e.collect(), want, len(lost), where)
        check_snapshot(e.collect(), want, 2 * len(lost), where + ", scraped again")
        for i in lost:  # nvidia-smi -r: the GPUs are back, and read again
            nvml.reset(i)
        want = scrape_truth(nvml, [{} for _ in nvml.gpus])
        check_snapshot(e.collect(), want, 2 * len(lost), where + ", then reset and scraped")


@pytest.mark.kata_gate(
    "a scrape does not read each supported reading of each GPU exactly once through NVML"
)
def test_collect_hidden_one_read_each(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    for _ in range(6):
        nvml = random_fleet(r, sim)
        e = make_exporter(nvml)
        for scrape in range(3):
            for g in nvml.gpus:  # fresh readings each time
                g.power_mw, g.temperature = r.randint(0, 10**6), r.randint(0, 110)
                g.util_gpu, g.sm_clock_mhz = r.randint(0, 100), r.randint(0, 3105)
                g.memory_used = r.randint(0, g.memory_total)
                for p in g.processes:  # a pid the kernel gave to a new process
                    if scrape and r.random() < 0.5:
                        renamed = r.choice(NASTY) + f" #{scrape}"
                        for other in nvml.gpus:
                            for q in other.processes:
                                if q.pid == p.pid:
                                    q.name = renamed
            want = scrape_truth(nvml, [{} for _ in nvml.gpus])
            nvml.device_calls()
            check_snapshot(
                e.collect(),
                want,
                0,
                f"a fleet whose readings and process names (same pids) changed ({describe(nvml)})",
            )
            calls = nvml.device_calls()
            for i, g in enumerate(nvml.gpus):
                for fn, what in [
                    ("nvmlDeviceGetUtilizationRates", "utilization"),
                    ("nvmlDeviceGetMemoryInfo", "memory"),
                    ("nvmlDeviceGetTemperature", "temperature"),
                    ("nvmlDeviceGetPowerUsage", "power"),
                    ("nvmlDeviceGetClockInfo", "clock"),
                    ("nvmlDeviceGetComputeRunningProcesses", "processes"),
                ]:
                    # A reading the board does not support may be asked again or remembered
                    # as unsupported (its answer never changes): once or not at all.
                    n = calls[(fn, i)]
                    ok = n == 1 or (what in g.unsupported and n == 0)
                    assert ok, (
                        f"collect(): {fn} should be called once for GPU {i} per scrape "
                        f"({what}{' not supported' if what in g.unsupported else ''}), got {n}"
                    )
                n_ecc = calls[("nvmlDeviceGetTotalEccErrors", i)]
                ok = n_ecc == 2 or ("ecc" in g.unsupported and n_ecc <= 2)
                assert ok, (
                    f"collect(): nvmlDeviceGetTotalEccErrors for GPU {i}: 2 calls (corrected, "
                    f"uncorrected) per scrape, got {n_ecc}"
                )


def test_collect_gpu_failed_before_start(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    for _ in range(4):
        nvml = random_fleet(r, sim, n=r.randint(2, 8))
        dead = sorted(r.sample(range(len(nvml.gpus)), r.randint(1, len(nvml.gpus) - 1)))
        for i in dead:
            nvml.lose(i, error=failure(r, sim))
        where = (
            f"a fleet whose GPUs {dead} fail every call from before Exporter() ({describe(nvml)})"
        )
        e = make_exporter(nvml)
        for k in (1, 2):
            want = scrape_truth(nvml, [{} for _ in nvml.gpus])
            for i in dead:  # its identity may be unknown yet: any uuid and name
                del want[i]["uuid"], want[i]["name"]
            check_snapshot(e.collect(), want, k * len(dead), f"{where}, scrape {k}")
        for i in dead:  # nvidia-smi -r: the GPUs are back, and read in full
            nvml.reset(i)
        want = scrape_truth(nvml, [{} for _ in nvml.gpus])
        check_snapshot(e.collect(), want, 2 * len(dead), f"{where}, then reset and scraped")


def test_collect_processes_that_exit(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    nvml = random_fleet(r, sim, n=2)
    nvml.gpus[0].unsupported.discard("processes")
    nvml.gpus[0].lost = False
    e = make_exporter(nvml)
    ghost = sim.SimProcess(999_999_999, "gone", 4096)
    nvml.gpus[0].processes.append(ghost)
    real = nvml.nvmlSystemGetProcessName

    def exited(pid: int) -> str:
        if pid == ghost.pid:
            raise sim.NVMLError_NotFound()
        return real(pid)

    nvml.nvmlSystemGetProcessName = exited
    s = e.collect()
    pids = [p.pid for p in s.gpus[0].processes]
    assert ghost.pid not in pids and s.gpus[0].up, (
        f"collect(): a process whose name NVML no longer finds (it exited) is left out and the "
        f"GPU stays up; got pids {pids}, up={s.gpus[0].up}"
    )
    assert s.scrape_errors == 0, "collect(): a process that exited is not a scrape error"


def test_collect_close_releases_nvml(sim: Any, exp: Any, nvml_view: Any) -> None:
    r = random_for()
    for _ in range(3):
        nvml = random_fleet(r, sim)
        e = exp.Exporter(nvml_view(nvml))
        # close with a GPU down (failing otherwise than off the bus)
        nvml.lose(r.randrange(len(nvml.gpus)), error=getattr(sim, r.choice(FAILURES[1:])))
        e.collect()
        e.close()
        kept = [s for s in nvml._sets if not s.freed]
        assert not kept, (
            f"Exporter.close() should free every event set the exporter created (those of GPUs "
            f"that refused XID events too); {len(kept)} of {len(nvml._sets)} still allocated "
            f"({describe(nvml)})"
        )
        assert nvml._inits == 0, (
            f"Exporter.close() should balance nvmlInit with nvmlShutdown; NVML is still "
            f"initialised {nvml._inits} time(s)"
        )


# ------------------------------------------------------------------------------ counters
@pytest.mark.kata_gate(
    "over a random history of XID events, ECC errors, GPU resets and failing GPUs, an XID, ECC "
    "or scrape-error count of collect() is not the devices' count so far, or goes down, or "
    "disappears"
)
def test_counters_hidden_random_histories(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    for _ in range(5):
        nvml = random_fleet(r, sim)
        e = make_exporter(nvml)
        xids = [{} for _ in nvml.gpus]
        errors = 0
        seen: dict[Any, float] = {}
        for step in range(8):
            for _ in range(r.randint(0, 6)):
                i, x = r.randrange(len(nvml.gpus)), r.choice([13, 31, 43, 48, 63, 79, 94])
                nvml.xid(i, x)
                if "events" not in nvml.gpus[i].unsupported:
                    xids[i][x] = xids[i].get(x, 0) + 1
            for i, g in enumerate(nvml.gpus):
                if r.random() < 0.3:
                    inc = [r.randint(0, 50), r.randint(0, 2)]
                    g.ecc_aggregate = [a + b for a, b in zip(g.ecc_aggregate, inc, strict=True)]
                    g.ecc_volatile = [a + b for a, b in zip(g.ecc_volatile, inc, strict=True)]
                if r.random() < 0.2:
                    nvml.reset(i)
                elif r.random() < 0.1:
                    nvml.lose(i, error=failure(r, sim))
            want = scrape_truth(nvml, xids)
            errors += sum(1 for w in want if not w["up"])
            where = f"step {step} of a history of XIDs, ECC errors, resets and lost GPUs"
            s = e.collect()
            check_snapshot(s, want, errors, where)
            now: dict[Any, float] = {("scrape_errors",): s.scrape_errors}
            for g in s.gpus:
                for x, n in g.xid_errors.items():
                    now[("xid", g.index, x)] = n
                for k, n in g.ecc_errors.items():
                    now[("ecc", g.index, k)] = n
            for key, before in seen.items():
                if key[0] == "ecc" and key not in now:
                    continue  # a down GPU has no ECC readings
                assert key in now and now[key] >= before, (
                    f"collect() at {where}: counter {key} went from {before} to {now.get(key)}"
                )
            seen.update(now)


def test_counters_drain_never_waits(sim: Any, make_exporter: Any) -> None:
    r = random_for()
    for _ in range(4):
        nvml = random_fleet(r, sim)
        e = make_exporter(nvml)
        xids = [{} for _ in nvml.gpus]
        for scrape in range(4):
            if scrape % 2:  # every other scrape finds events pending
                for _ in range(r.randint(1, 6)):
                    i, x = r.randrange(len(nvml.gpus)), r.choice([13, 31, 48, 94])
                    nvml.xid(i, x)
                    if "events" not in nvml.gpus[i].unsupported:
                        xids[i][x] = xids[i].get(x, 0) + 1
            before = nvml.waited_ms
            s = e.collect()
            waited = nvml.waited_ms - before
            where = f"a fleet of {len(nvml.gpus)} GPUs, scrape {scrape + 1} ({describe(nvml)})"
            assert waited <= 100, (
                f"collect() on {where}: nvmlEventSetWait_v2 blocked {waited} ms in one scrape "
                f"(with no event pending the driver waits the whole timeout_ms): draining the "
                f"pending XID events must not wait for new ones (timeout 0)"
            )
            got = [g.xid_errors for g in s.gpus]
            assert got == xids, (
                f"collect() on {where}: the XID counts per GPU should be {xids}, got {got}"
            )


def _interleaving_tracer(exp: Any) -> Any:
    """A threading.settrace hook that yields the GIL before every bytecode of the learner's own
    code (the directory of exporter.py, the given modules excepted): a read-modify-write of
    shared state that no lock guards then loses updates every run, not one run in a hundred."""
    here = os.path.dirname(os.path.abspath(exp.__file__))
    given = ("nvml_sim.py", "snapshot.py")

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            time.sleep(0)
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        file = os.path.abspath(frame.f_code.co_filename)
        if os.path.dirname(file) != here or os.path.basename(file) in given:
            return None
        frame.f_trace_opcodes = True
        return local

    return tracer


@pytest.mark.kata_gate(
    "collect() called from several threads at once loses or doubles XID events or scrape errors"
)
def test_counters_concurrent_collects(sim: Any, make_exporter: Any, exp: Any) -> None:
    r = random_for()
    # Threads switched at every bytecode of exporter.py: each event and each failed read must
    # still be counted exactly once.
    nvml = random_fleet(r, sim, n=r.randint(2, 4))
    for g in nvml.gpus:
        g.unsupported.discard("events")
        g.lost = False
    e = make_exporter(nvml)
    pending = [0] * len(nvml.gpus)
    for _ in range(r.randint(40, 80)):
        i = r.randrange(len(nvml.gpus))
        nvml.xid(i, 13)
        pending[i] += 1
    down = r.randrange(len(nvml.gpus))
    nvml.lose(down)
    threads = 8
    threading.settrace(_interleaving_tracer(exp))
    try:
        workers = [threading.Thread(target=e.collect, daemon=True) for _ in range(threads)]
        for w in workers:
            w.start()
    finally:
        threading.settrace(None)  # type: ignore[arg-type]
    for w in workers:
        w.join(30)
    s = e.collect()
    got = [g.xid_errors.get(13, 0) for g in s.gpus]
    assert got == pending, (
        f"collect() from {threads} threads at once (switched at every bytecode), "
        f"{sum(pending)} XID 13 events pending: per-GPU counts {got}, pending {pending}"
    )
    assert s.scrape_errors == threads + 1, (
        f"collect() from {threads} threads at once (switched at every bytecode) with GPU {down} "
        f"lost, then once more: scrape_errors should be {threads + 1}, got {s.scrape_errors}"
    )
    # Then scrapes that run while events arrive.
    r = random_for()
    nvml = random_fleet(r, sim, n=r.randint(2, 8))
    for g in nvml.gpus:
        g.unsupported.discard("events")
    e = make_exporter(nvml)
    stop = threading.Event()
    injected = [0] * len(nvml.gpus)

    def inject() -> None:
        k = 0
        while not stop.is_set() and k < 400:
            i = k % len(nvml.gpus)
            nvml.xid(i, 13)
            injected[i] += 1
            k += 1

    t = threading.Thread(target=inject)
    t.start()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: e.collect(), range(40)))
    stop.set()
    t.join(10)
    s = e.collect()
    got = [g.xid_errors.get(13, 0) for g in s.gpus]
    assert got == injected, (
        f"collect() from 8 threads while XID 13 events arrive: per-GPU counts {got}, "
        f"injected {injected}"
    )


# ------------------------------------------------------------------------------ serve
def test_serve_random_fleets_over_http(
    sim: Any, make_exporter: Any, start_server: Any, get: Any, parse: Any, table: Any
) -> None:
    r = random_for()
    for _ in range(4):
        nvml = random_fleet(r, sim)
        url = start_server(make_exporter(nvml))
        xids = [{} for _ in nvml.gpus]
        for i, g in enumerate(nvml.gpus):
            if "events" not in g.unsupported and r.random() < 0.5:
                nvml.xid(i, 48)
                xids[i][48] = 1
        lost = [i for i in range(len(nvml.gpus)) if r.random() < 0.25]
        for i in lost:
            nvml.lose(i, after_calls=r.randint(0, 6), error=failure(r, sim))
        want = scrape_truth(nvml, xids)
        for i in lost:
            want[i] = truth(nvml.gpus[i], i, xids[i], up=False)
        nvml.device_calls()
        reply = get(url + "/metrics")
        who = f"GET /metrics of {len(nvml.gpus)} GPUs, {len(lost)} lost mid-scrape"
        assert reply.status == 200, f"{who}: HTTP {reply.status}"
        check_series(parse(reply.body), expected_series(want, len(lost), table), who)
        calls = nvml.device_calls()
        n = calls[("nvmlDeviceGetPowerUsage", len(nvml.gpus) - 1)]
        if len(nvml.gpus) - 1 not in lost:
            assert n == 1, f"{who}: one scrape should read each GPU's power once, read {n}"


@pytest.mark.kata_gate("two scrapes over HTTP give the same text after the readings changed")
def test_serve_hidden_fresh_each_request(
    sim: Any, make_exporter: Any, start_server: Any, get: Any, parse: Any
) -> None:
    r = random_for()
    nvml = random_fleet(r, sim, n=1)
    nvml.gpus[0].unsupported.discard("power")
    url = start_server(make_exporter(nvml))
    for k in range(3):
        mw = r.randint(1, 10**6)
        nvml.gpus[0].power_mw = mw
        e = parse(get(url + "/metrics").body)
        got = e.get("gpu_power_watts", gpu="0", uuid=nvml.gpus[0].uuid)
        assert got is not None and math.isclose(got, mw / 1000), (
            f"GET /metrics #{k + 1}: gpu_power_watts should be {mw / 1000} (the GPU draws "
            f"{mw} mW now), got {got}"
        )


@pytest.mark.kata_gate(
    "GET /metrics answers without the 0.0.4 Content-Type, or a path other than /metrics gets "
    "anything but one 404 answer"
)
def test_serve_hidden_paths(sim: Any, make_exporter: Any, start_server: Any, get: Any) -> None:
    r = random_for()
    url = start_server(make_exporter(random_fleet(r, sim, n=1)))
    for path in ["/", "/metric", "/metricsx", "/favicon.ico", "/metrics/x", "/healthz"]:
        status = get(url + path).status
        assert status == 404, f"GET {path}: 404 expected (only /metrics is served), got {status}"
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"GET /nothing HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        try:
            while chunk := raw.recv(65536):
                data += chunk
        except TimeoutError:
            pass
    statuses = re.findall(rb"HTTP/1\.[01] \d{3}", data)
    assert len(statuses) == 1 and statuses[0].endswith(b" 404"), (
        f"GET /nothing HTTP/1.0 should get one answer, a 404; the server wrote status lines "
        f"{statuses}"
    )
    reply = get(url + "/metrics?name[]=gpu_up")
    assert reply.status == 200 and "gpu_up" in reply.body, (
        f"GET /metrics?name[]=gpu_up (a query string): the metrics, got HTTP {reply.status}"
    )
    ctype = reply.content_type.replace(" ", "").lower()
    assert ctype == "text/plain;version=0.0.4;charset=utf-8", (
        f"GET /metrics: Content-Type should be text/plain; version=0.0.4; charset=utf-8, "
        f"got {reply.content_type!r}"
    )


@pytest.mark.kata_gate(
    "GET /metrics gets no answer while another client's connection sits idle or sends its "
    "request slowly"
)
def test_serve_hidden_idle_connection(
    sim: Any, make_exporter: Any, start_server: Any, get: Any
) -> None:
    r = random_for()
    url = start_server(make_exporter(random_fleet(r, sim, n=2)))
    port = int(url.rsplit(":", 1)[1])
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        idle.sendall(b"GET /metr")  # half a request line, and nothing more
        reply = get(url + "/metrics", timeout=3)
        assert reply.status == 200, (
            f"GET /metrics while another connection sits half-sent: HTTP {reply.status}"
        )
    except (TimeoutError, OSError) as err:
        raise AssertionError(
            "GET /metrics got no answer in 3 s while another client's connection was open and "
            f"idle: scrapes must be served concurrently ({err})"
        ) from None
    finally:
        idle.close()
    # A client that sends its request one byte every 50 ms for 3 s (a socket timeout shorter
    # than that never fires) must not hold up a scrape, and gets its own answer in the end.
    slow: dict[str, str] = {}

    def trickle() -> None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET /metrics HTTP/1.0\r\nX-Slow: ")
                for _ in range(60):
                    sock.sendall(b"a")
                    time.sleep(0.05)
                sock.sendall(b"\r\n\r\n")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                slow["status"] = data.split(b"\r\n", 1)[0].decode("latin-1")
        except OSError as err:
            slow["status"] = repr(err)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    time.sleep(0.3)
    try:
        fast: Any = get(url + "/metrics", timeout=2).status
    except OSError as err:
        fast = repr(err)
    t.join(10)
    assert fast == 200, (
        f"GET /metrics while another client sends its request one byte every 50 ms: got "
        f"{fast} within 2 s; scrapes must be served concurrently"
    )
    assert slow.get("status", "").split(" ")[1:2] == ["200"], (
        f"GET /metrics sent one byte every 50 ms (3 s in all): the slow client should get "
        f"HTTP 200 in the end, got {slow.get('status')!r}"
    )


def test_serve_concurrent_scrapes_count_once(
    sim: Any, make_exporter: Any, start_server: Any, get: Any, parse: Any
) -> None:
    r = random_for()
    nvml = random_fleet(r, sim, n=r.randint(1, 8))
    for g in nvml.gpus:
        g.unsupported.discard("events")
        g.lost = False
    url = start_server(make_exporter(nvml))
    for i in range(len(nvml.gpus)):
        for _ in range(i + 1):
            nvml.xid(i, 31)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: get(url + "/metrics"), range(16)))
    assert all(x.status == 200 for x in replies), (
        f"16 scrapes, 8 at once: statuses {[x.status for x in replies]}"
    )
    for x in replies:
        parse(x.body)
    e = parse(get(url + "/metrics").body)
    for i, g in enumerate(nvml.gpus):
        got = e.get("gpu_xid_errors_total", gpu=str(i), uuid=g.uuid, xid="31")
        assert got == i + 1, (
            f"after 16 concurrent scrapes: GPU {i} had {i + 1} XID 31 events, "
            f"gpu_xid_errors_total says {got}"
        )
