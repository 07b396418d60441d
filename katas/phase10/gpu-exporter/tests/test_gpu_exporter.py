"""Public tests, cpu tier: worked examples of each task on a two-GPU machine (an H100 and a
GeForce card without ECC) and hand-made snapshots. The hidden tests check the same properties
on random fleets of 1-8 GPUs with random readings (edge values included), names and process
names with quotes, backslashes, newlines and non-ASCII text, GPUs lost in the middle of a scrape,
GPU resets and bursts of XID events, against the simulated devices' own state."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest

H100 = "GPU-5f0c9a2e-1b7d-4c1e-9a53-2d8e6f4b7a10"
RTX = "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"


def two_gpus(sim: Any) -> Any:
    """An H100 running a training job, and an RTX 4090 (no ECC: NotSupported) idling."""
    return sim.SimNVML(
        [
            sim.SimGpu(
                name="NVIDIA H100 80GB HBM3",
                uuid=H100,
                util_gpu=87,
                util_memory=41,
                memory_total=85_899_345_920,
                memory_used=71_940_702_208,
                temperature=64,
                power_mw=612_345,
                sm_clock_mhz=1980,
                ecc_aggregate=[12, 0],
                processes=[sim.SimProcess(4242, "python3 train.py", 71_000_000_000)],
            ),
            sim.SimGpu(
                name="NVIDIA GeForce RTX 4090",
                uuid=RTX,
                util_gpu=0,
                memory_total=25_757_220_864,
                memory_used=524_288_000,
                temperature=35,
                power_mw=21_050,
                sm_clock_mhz=210,
                unsupported={"ecc"},
            ),
        ]
    )


def one_gpu_snapshot(snap: Any, **over: Any) -> Any:
    g = dict(
        index=0,
        uuid=H100,
        name="NVIDIA H100 80GB HBM3",
        utilization_ratio=0.87,
        memory_used_bytes=71_940_702_208,
        memory_total_bytes=85_899_345_920,
        temperature_celsius=64.0,
        power_watts=612.345,
        sm_clock_hertz=1.98e9,
        ecc_errors={"corrected": 12, "uncorrected": 0},
    )
    g.update(over)
    return snap.Snapshot(gpus=[snap.Gpu(**g)], scrape_errors=0)


# ------------------------------------------------------------------------------ render


def test_render_one_gpu(exp: Any, snap: Any, parse: Any) -> None:
    e = parse(exp.render(one_gpu_snapshot(snap)))
    ids = {"gpu": "0", "uuid": H100}
    assert e.get("gpu_info", **ids, name="NVIDIA H100 80GB HBM3") == 1, "gpu_info{gpu,uuid,name} 1"
    assert e.get("gpu_up", **ids) == 1, "gpu_up 1 for a GPU that was read"
    assert e.get("gpu_utilization_ratio", **ids) == 0.87, "utilisation as a ratio"
    assert e.get("gpu_memory_total_bytes", **ids) == 85_899_345_920, "80 GiB, exactly"
    assert e.get("gpu_power_watts", **ids) == 612.345, "watts, exactly as the snapshot says"
    assert e.get("gpu_sm_clock_hertz", **ids) == 1.98e9, "hertz"
    assert e.get("gpu_ecc_errors_total", **ids, type="corrected") == 12, "ECC by type"
    assert e.get("gpu_exporter_scrape_errors_total") == 0, "the exporter's own error counter"
    assert e.get("gpu_memory_utilization_ratio", **ids) is None, "a None reading has no series"


def test_render_escapes_label_values(exp: Any, snap: Any, parse: Any) -> None:
    name = 'say "hi"\\ \n é'
    s = one_gpu_snapshot(snap, processes=[snap.Process(7, name, 1024)])
    text = exp.render(s)
    e = parse(text)
    got = e.get("gpu_process_memory_used_bytes", gpu="0", uuid=H100, pid="7", process_name=name)
    assert got == 1024, (
        f"the process_name label should read back as {name!r}; series: "
        f"{e.series('gpu_process_memory_used_bytes')}"
    )
    assert 'process_name="say \\"hi\\"\\\\ \\n é"' in text, '\\, " and newline escaped'


def test_render_down_gpu_keeps_identity_and_xids(exp: Any, snap: Any, parse: Any) -> None:
    g = snap.Gpu(index=3, uuid=RTX, name="NVIDIA GeForce RTX 4090", up=False, xid_errors={79: 1})
    e = parse(exp.render(snap.Snapshot(gpus=[g], scrape_errors=5)))
    ids = {"gpu": "3", "uuid": RTX}
    assert e.get("gpu_up", **ids) == 0, "gpu_up 0 for a GPU that is down"
    assert e.get("gpu_xid_errors_total", **ids, xid="79") == 1, "XID counts of a down GPU"
    assert e.get("gpu_exporter_scrape_errors_total") == 5, "scrape errors"
    assert not e.series("gpu_temperature_celsius"), "no readings of a down GPU"


# ------------------------------------------------------------------------------ names


def test_names_types_and_help(exp: Any, snap: Any, parse: Any, table: Any) -> None:
    e = parse(exp.render(one_gpu_snapshot(snap, processes=[snap.Process(1, "x", 1)])))
    for family, (kind, _) in table.families.items():
        assert e.types.get(family) == kind, f"# TYPE {family} {kind}; got {e.types.get(family)}"
        assert e.helps.get(family, "").strip(), f"# HELP {family} says what it measures"


def test_names_promtool_has_no_findings(exp: Any, snap: Any, promtool: Any) -> None:
    findings = promtool(exp.render(one_gpu_snapshot(snap)))
    assert findings == "", f"promtool check metrics says:\n{findings}"


# ------------------------------------------------------------------------------ collect


def test_collect_base_units(sim: Any, make_exporter: Any) -> None:
    s = make_exporter(two_gpus(sim)).collect()
    h100, rtx = s.gpus
    assert (h100.index, h100.uuid, h100.name) == (0, H100, "NVIDIA H100 80GB HBM3"), "identity"
    assert h100.up and rtx.up, "both GPUs answered"
    assert h100.utilization_ratio == 0.87 and h100.memory_utilization_ratio == 0.41, "percent/100"
    assert h100.power_watts == pytest.approx(612.345, rel=1e-12), (
        f"612345 mW is 612.345 W, got {h100.power_watts}"
    )
    assert h100.sm_clock_hertz == 1.98e9, f"1980 MHz is 1.98e9 Hz, got {h100.sm_clock_hertz}"
    assert h100.temperature_celsius == 64, "Celsius"
    assert h100.memory_used_bytes == 71_940_702_208, "bytes"
    assert h100.ecc_errors == {"corrected": 12, "uncorrected": 0}, "aggregate ECC counts"
    assert [(p.pid, p.name, p.memory_bytes) for p in h100.processes] == [
        (4242, "python3 train.py", 71_000_000_000)
    ], "the compute process"
    assert rtx.ecc_errors == {}, "an RTX 4090 has no ECC: NotSupported, no counts, still up"


def test_collect_lost_gpu(sim: Any, make_exporter: Any) -> None:
    nvml = two_gpus(sim)
    e = make_exporter(nvml)
    nvml.lose(0)
    s = e.collect()
    assert not s.gpus[0].up and s.gpus[0].power_watts is None, "GPU 0 is down: no readings"
    assert s.gpus[0].uuid == H100, "a down GPU keeps its identity"
    assert s.gpus[1].up and s.gpus[1].power_watts == pytest.approx(21.05), "GPU 1 is read as usual"
    assert s.scrape_errors == 1, "one failed read"
    nvml.reset(0)  # GPU 0 is back; GPU 1 fails otherwise (any NVMLError but NotSupported)
    nvml.lose(1, error=sim.NVMLError_Unknown)
    s = e.collect()
    assert s.gpus[0].up and s.gpus[0].power_watts == pytest.approx(612.345), "GPU 0 is back"
    assert not s.gpus[1].up and s.gpus[1].uuid == RTX, "NVMLError_Unknown: GPU 1 is down"
    assert s.scrape_errors == 2, "one more failed read"


def test_collect_gpu_failed_before_start(sim: Any, make_exporter: Any) -> None:
    nvml = two_gpus(sim)
    nvml.lose(0, error=sim.NVMLError_ResetRequired)  # since boot, before the exporter starts
    e = make_exporter(nvml)  # must not raise: the other GPU is still worth exporting
    s = e.collect()
    assert not s.gpus[0].up and s.gpus[0].power_watts is None, "GPU 0 is down: no readings"
    assert s.gpus[1].up and s.gpus[1].uuid == RTX, "GPU 1 is read as usual"
    assert s.scrape_errors == 1, "one failed read"
    nvml.reset(0)  # nvidia-smi -r: GPU 0 answers now
    s = e.collect()
    assert s.gpus[0].up and s.gpus[0].uuid == H100, "GPU 0 is back, with its identity"
    assert s.gpus[0].power_watts == pytest.approx(612.345), "and its readings"


def test_collect_reads_once(sim: Any, make_exporter: Any) -> None:
    nvml = two_gpus(sim)
    e = make_exporter(nvml)
    nvml.device_calls()  # forget the set-up's calls
    e.collect()
    calls = nvml.device_calls()
    for i in (0, 1):
        assert calls[("nvmlDeviceGetPowerUsage", i)] == 1, "one power read per GPU per scrape"
        assert calls[("nvmlDeviceGetMemoryInfo", i)] == 1, "one memory read per GPU per scrape"
    nvml.gpus[0].power_mw = 700_000
    assert e.collect().gpus[0].power_watts == pytest.approx(700.0), "every scrape reads afresh"


# ------------------------------------------------------------------------------ counters


def test_counters_xid_events_add_up(sim: Any, make_exporter: Any) -> None:
    nvml = two_gpus(sim)
    e = make_exporter(nvml)
    nvml.xid(0, 13)
    nvml.xid(0, 13)
    assert e.collect().gpus[0].xid_errors == {13: 2}, "two XID 13 events"
    nvml.xid(0, 48)
    s = e.collect()
    assert s.gpus[0].xid_errors == {13: 2, 48: 1}, "counts accumulate across scrapes"
    assert e.collect().gpus[0].xid_errors == {13: 2, 48: 1}, "and stay without new events"


def test_counters_ecc_survives_gpu_reset(sim: Any, make_exporter: Any) -> None:
    nvml = two_gpus(sim)
    e = make_exporter(nvml)
    nvml.gpus[0].ecc_volatile = [5, 0]
    before = e.collect().gpus[0].ecc_errors["corrected"]
    nvml.reset(0)
    after = e.collect().gpus[0].ecc_errors["corrected"]
    assert after >= before, f"a counter never goes down across a GPU reset: {before} -> {after}"


# ------------------------------------------------------------------------------ serve


def test_serve_metrics(sim: Any, make_exporter: Any, start_server: Any, get: Any, parse: Any):
    url = start_server(make_exporter(two_gpus(sim)))
    r = get(url + "/metrics")
    assert r.status == 200, f"GET /metrics: {r.status}"
    assert r.content_type.replace(" ", "") == "text/plain;version=0.0.4;charset=utf-8", (
        f"Content-Type: {r.content_type!r}"
    )
    e = parse(r.body)
    assert e.get("gpu_power_watts", gpu="1", uuid=RTX) == pytest.approx(21.05), "the RTX: 21.05 W"
    assert get(url + "/").status == 404, "only /metrics is served"


def test_serve_concurrent_scrapes(sim: Any, make_exporter: Any, start_server: Any, get: Any):
    url = start_server(make_exporter(two_gpus(sim)))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: get(url + "/metrics"), range(16)))
    assert all(r.status == 200 and "gpu_up" in r.body for r in replies), "16 scrapes, 8 at once"


@pytest.mark.parametrize("after", [3])
def test_serve_gpu_lost_mid_scrape(
    sim: Any, make_exporter: Any, start_server: Any, get: Any, parse: Any, after: int
) -> None:
    nvml = two_gpus(sim)
    url = start_server(make_exporter(nvml))
    nvml.lose(0, after_calls=after)
    r = get(url + "/metrics")
    assert r.status == 200, f"a lost GPU is a partial answer, not HTTP {r.status}"
    e = parse(r.body)
    assert e.get("gpu_up", gpu="0", uuid=H100) == 0, "gpu_up 0 for the lost GPU"
    assert e.get("gpu_up", gpu="1", uuid=RTX) == 1, "the other GPU is complete"
