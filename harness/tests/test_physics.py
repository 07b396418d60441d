"""harness.physics: peaks from a device's own report, and speeds that beat them (issue 22).

No GPU and no particular CPU here: the GPU attributes are an H200's and an A100's as their
drivers report them, the CPU facts those of an Intel, an AMD and an Apple machine; the budget
runs with fake timings (a cost in "GPU seconds" returned by the test).
"""

from __future__ import annotations

import html
import json

import pytest

from harness import physics
from harness.physics import CpuFacts, Peak

from .conftest import KataRepo
from .test_budgets import MANIFEST

# cudaDeviceGetAttribute's answers (kHz, bits, counts).
H200 = {
    "name": "NVIDIA H200",
    "memory_clock_khz": 3_201_000,
    "memory_bus_bits": 6144,
    "sm_count": 132,
    "clock_khz": 1_980_000,
    "cc_major": 9,
    "cc_minor": 0,
}
A100 = {**H200, "name": "NVIDIA A100-SXM4-80GB", "memory_clock_khz": 1_593_000,
        "memory_bus_bits": 5120, "sm_count": 108, "clock_khz": 1_410_000, "cc_minor": 0,
        "cc_major": 8}  # fmt: skip


def test_a_gpus_peak_comes_from_its_attributes() -> None:
    h200 = physics.gpu_peak(H200)
    assert h200 is not None and h200.device == "this H200"
    assert h200.bytes_per_s == pytest.approx(3.201e9 * 6144 * 2 / 8)  # 4.92 TB/s
    assert h200.flops_per_s == pytest.approx(132 * 1.98e9 * 128 * 2)  # 66.9 TFLOP/s
    assert "6144-bit bus" in h200.how and "128 FP32 lanes (sm_90)" in h200.how
    a100 = physics.gpu_peak(A100)
    assert a100 is not None
    assert a100.bytes_per_s == pytest.approx(2.039e12, rel=1e-3)  # NVIDIA's 2.0 TB/s
    assert a100.flops_per_s == pytest.approx(19.5e12, rel=0.01)  # 64 lanes on sm_80: 19.5 TF
    assert physics.gpu_peak({**H200, "memory_clock_khz": 0}) is None, "no clock: no bound"
    assert physics.gpu_peak({"name": "x"}) is None


def test_the_sentence_for_a_speed_that_beats_physics() -> None:
    h200 = physics.gpu_peak(H200)
    why = physics.impossible(h200, bytes_moved=9.1e12, seconds=1.0)
    assert why == (
        "measured 9.1 TB/s; this H200's peak is 4.92 TB/s: the kernel did not move the bytes it "
        "was asked to"
    )
    assert physics.impossible(h200, bytes_moved=2.8e12, seconds=1.0) is None  # the copy's 2.8
    assert physics.impossible(h200, bytes_moved=5.5e12, seconds=1.0) is None, "within the margin"
    flops = physics.impossible(h200, flops=2 * 8192**3, seconds=1e-3)
    assert flops is not None and flops.startswith(
        "measured 1.1 PFLOP/s; this H200's peak is 66.9 TFLOP/s"
    )
    assert flops.endswith("the kernel did not do the arithmetic it was asked to")
    assert physics.impossible(h200, flops=9.1e12, seconds=1.0) is None  # tiled matmul's 9.1
    assert physics.impossible(None, bytes_moved=1e30, seconds=1.0) is None
    assert physics.impossible(h200, bytes_moved=1e30, seconds=0.0) is None


@pytest.mark.parametrize(
    ("facts", "flops", "bandwidth"),
    [
        # An Intel Xeon with AVX-512 (2 FMA pipes), 16 cores, cpufreq's maximum 3.8 GHz.
        (CpuFacts("Xeon", 16, 3.8e9, "cpufreq", 64, 2), 16 * 3.8e9 * 16 * 2 * 2, 16 * 3.8e9 * 192),
        # An AMD Zen 3 (AVX2), 8 cores, 4.9 GHz.
        (CpuFacts("Ryzen", 8, 4.9e9, "cpufreq", 32, 2), 8 * 4.9e9 * 8 * 2 * 2, 8 * 4.9e9 * 96),
        # An Apple M2 (NEON, 4 FMA pipes), 8 cores, no clock reported: the 6.5 GHz cap.
        (CpuFacts("Apple M2", 8, 6.5e9, "none", 16, 4), 8 * 6.5e9 * 4 * 4 * 2, 8 * 6.5e9 * 48),
    ],
)
def test_a_cpus_bound_comes_from_what_it_reports(facts, flops, bandwidth) -> None:
    peak = physics.cpu_peak(facts)
    assert (peak.flops_per_s, peak.bytes_per_s) == (pytest.approx(flops), pytest.approx(bandwidth))
    assert peak.device == f"this CPU ({facts.model}, {facts.cores} cores)"


def test_this_machines_facts_are_plausible() -> None:
    f = physics.cpu_facts()
    assert f.cores >= 1 and 0.5e9 <= f.max_hz <= physics.FASTEST_CORE_HZ
    assert f.simd_bytes in (16, 32, 64, 256) and f.fma_pipes in (2, 4)
    peak = physics.cpu_peak(f)
    assert peak.flops_per_s > 1e9 and peak.bytes_per_s > 1e9


def test_fraction_of_the_peak() -> None:
    peak = Peak("this H200", 4.8e12, 67e12)
    assert peak.fraction(bytes_per_s=2.4e12) == pytest.approx(0.5)
    assert peak.fraction(bytes_per_s=0.48e12, flops_per_s=33.5e12) == pytest.approx(0.5)
    assert peak.fraction() == 0.0


# --------------------------------------------------------------------------- in a budget
GPU_TESTS = """\
from harness.physics import Peak

PEAK = Peak("this H200", 4.8e12, 67e12, "fake attributes")
MOVES = 9.1e6  # bytes one launch moves


def test_fast(kata, kata_budget):
    mine, ref = kata.module("work"), kata_budget.reference.module("work")
    kata_budget.compare(mine.launch, ref.launch, name="copy", ratio=1.5, metric="GPU seconds",
                        cost=lambda seconds: seconds, moves=MOVES, peak=PEAK)
"""


def gpu_kata(repo: KataRepo, learner_s: float, reference_s: float) -> None:
    repo.write("katas/phase01/speed/kata.toml", MANIFEST.format(extra=""))
    repo.write("katas/phase01/speed/work.py", f"def launch():\n    return {learner_s!r}\n")
    repo.write("solutions/phase01/speed/work.py", f"def launch():\n    return {reference_s!r}\n")
    repo.write("katas/phase01/speed/tests/test_speed.py", GPU_TESTS)


def metrics(repo: KataRepo) -> dict:
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    return data["katas"][0]["tasks"][0]["tests"][0]["metrics"]


def test_a_budget_faster_than_the_device_fails_with_the_sentence(repo: KataRepo) -> None:
    gpu_kata(repo, learner_s=1e-6, reference_s=4e-6)  # 9.1 TB/s against 2.3 TB/s
    result = repo.pytester.runpytest("katas")
    result.assert_outcomes(failed=1)
    assert (
        "budget 'copy': measured 9.1 TB/s; this H200's peak is 4.8 TB/s: the kernel did not "
        "move the bytes it was asked to"
    ) in result.stdout.str()
    rates = metrics(repo)["rates"]
    assert rates["copy (yours)"] == {"bytes/s": "9.1 TB/s", "of peak": 1.896}
    assert rates["copy (reference)"]["of peak"] == pytest.approx(0.474, abs=1e-3)


def test_a_budget_within_the_device_passes_and_reports_its_share(repo: KataRepo) -> None:
    gpu_kata(repo, learner_s=4.5e-6, reference_s=4e-6)
    repo.pytester.runpytest("katas").assert_outcomes(passed=1)
    m = metrics(repo)
    assert m["rates"]["copy (yours)"]["bytes/s"] == "2.02 TB/s"
    assert m["rates"]["peak"] == {"device": "this H200", "how": "fake attributes"}
    svg = html.unescape(m["svg"])
    assert "this H200's roofline" in svg and "copy: 42% of peak" in svg
    assert m["label"].startswith("your kernels on this H200's roofline")


def test_no_bound_when_the_reference_too_is_above_the_peak(repo: KataRepo) -> None:
    """Data that stays in a cache can beat DRAM's peak honestly: when the reference does too,
    the peak is not this measurement's bound, and the budget decides alone."""
    gpu_kata(repo, learner_s=1e-6, reference_s=1.2e-6)
    repo.pytester.runpytest("katas").assert_outcomes(passed=1)
    assert "no bound applied" in metrics(repo)["rates"]["note"]


def test_the_cuda_fixture_gives_the_devices_peak(monkeypatch) -> None:
    import harness.cuda.gpu
    from harness.cuda.fixtures import CudaSession

    assert CudaSession("cpu").device_peak() is None, "the cpu backend emulates no device"
    monkeypatch.setattr(harness.cuda.gpu, "device_attributes", lambda drv=None: dict(H200))
    peak = CudaSession("gpu").device_peak()
    assert peak is not None and peak.device == "this H200"

    def broken(drv=None):
        raise RuntimeError("no attribute queries in this driver")

    monkeypatch.setattr(harness.cuda.gpu, "device_attributes", broken)
    assert CudaSession("gpu").device_peak() is None, "no bound rather than a wrong one"


def test_the_roofline_picture_places_every_kind_of_kernel() -> None:
    import xml.etree.ElementTree as ET

    peak = physics.gpu_peak(H200)
    assert peak is not None
    svg = physics.roofline_svg(
        peak, [("copy", 2.8e12, 0.0), ("matmul", 0.0, 9.1e12), ("reduce", 2.25e12, 0.56e12)]
    )
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}circle")) == 3
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "copy: 57% of peak" in texts and "matmul: 14% of peak" in texts
    assert "reduce: 46% of peak" in texts
    assert texts[0] == "this H200's roofline: 4.92 TB/s, 66.9 TFLOP/s"
