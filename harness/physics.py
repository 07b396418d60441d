"""Speeds that beat physics: a measured bandwidth or FLOP rate above what the machine can do.

A learner's kernel that is "faster than the hardware" did not do the work it was timed for (a
cached output, skipped iterations, a loop the compiler removed): a budget, or a kata test that
reports a rate, fails it with one sentence ("measured 9.1 TB/s; this H200's peak is 4.8 TB/s:
the kernel did not move the bytes it was asked to") instead of passing it as fast.

The peaks come from what the device or machine reports, never from one machine's numbers:

- a GPU (its attributes, read by the gpu backend's driver in the process that runs the kernels):
  DRAM bandwidth = memory clock x bus width x 2 (DDR) / 8; FP32 rate = SMs x clock x FP32 lanes
  per SM (by compute capability) x 2 (an FMA is two FLOPs);
- this CPU (`cpu_facts`: cores, the highest clock it reports, its widest SIMD): FLOP/s <= cores x
  clock x SIMD lanes x FMA pipes x 2; bytes/s <= cores x clock x 3 SIMD registers per cycle (two
  loads and a store, L1's best case: every other level is slower).

Each bound has a margin (`MARGIN`) for what the reports leave out (boost clocks, HBM's real
clock). No pytest here: harness.budgets, harness.cuda.fixtures and the kata tests call it.
"""

from __future__ import annotations

import math
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MARGIN",
    "Peak",
    "cpu_facts",
    "cpu_peak",
    "fp32_lanes_per_sm",
    "gpu_peak",
    "impossible",
    "rate_text",
    "roofline_svg",
]

MARGIN = 1.25  # a measured rate above MARGIN x peak is impossible, not fast
FASTEST_CORE_HZ = 6.5e9  # no shipping CPU core clocks higher (when a machine reports no maximum)


@dataclass(frozen=True)
class Peak:
    """What a device can do at most: bytes/s to and from its main memory, FLOP/s (FP32)."""

    device: str  # "this H200", "this CPU (AMD EPYC, 2 cores)"
    bytes_per_s: float
    flops_per_s: float
    how: str = ""  # the derivation, for reports

    def fraction(self, *, bytes_per_s: float = 0.0, flops_per_s: float = 0.0) -> float:
        """The larger of the two rates' shares of their peaks (the roofline's efficiency)."""
        shares = []
        if bytes_per_s and self.bytes_per_s:
            shares.append(bytes_per_s / self.bytes_per_s)
        if flops_per_s and self.flops_per_s:
            shares.append(flops_per_s / self.flops_per_s)
        return max(shares, default=0.0)


def rate_text(value: float, unit: str) -> str:
    """9.1e12, "B/s" -> "9.1 TB/s"; 5.4e12, "FLOP/s" -> "5.4 TFLOP/s"."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def impossible(
    peak: Peak | None, *, bytes_moved: float = 0.0, flops: float = 0.0, seconds: float
) -> str | None:
    """The sentence for a rate above `peak` (with MARGIN), or None when both are possible (or
    unknown: no peak, a zero peak, no time)."""
    if peak is None or not seconds or seconds <= 0:
        return None
    if bytes_moved and peak.bytes_per_s:
        rate = bytes_moved / seconds
        if rate > MARGIN * peak.bytes_per_s:
            return (
                f"measured {rate_text(rate, 'B/s')}; {peak.device}'s peak is "
                f"{rate_text(peak.bytes_per_s, 'B/s')}: the kernel did not move the bytes it was "
                "asked to"
            )
    if flops and peak.flops_per_s:
        rate = flops / seconds
        if rate > MARGIN * peak.flops_per_s:
            return (
                f"measured {rate_text(rate, 'FLOP/s')}; {peak.device}'s peak is "
                f"{rate_text(peak.flops_per_s, 'FLOP/s')}: the kernel did not do the arithmetic "
                "it was asked to"
            )
    return None


# --------------------------------------------------------------------------- GPUs
# FP32 lanes (CUDA cores) per SM by compute capability (NVIDIA's CUDA C++ Programming Guide,
# "Arithmetic Instructions" throughput table): (major, minor) first, then major alone.
_FP32_LANES = {
    (6, 0): 64,
    (6, 1): 128,
    (6, 2): 128,
    (7, 0): 64,
    (7, 2): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
}
_FP32_LANES_MAJOR = {5: 128, 6: 64, 7: 64, 8: 128, 9: 128, 10: 128, 11: 128, 12: 128}


def fp32_lanes_per_sm(major: int, minor: int) -> int:
    return _FP32_LANES.get((major, minor), _FP32_LANES_MAJOR.get(major, 128))


def gpu_peak(attrs: Mapping[str, object]) -> Peak | None:
    """The peak of a GPU from its attributes (`harness.cuda.gpu.device_attributes`): name,
    memory_clock_khz, memory_bus_bits, sm_count, clock_khz, cc_major, cc_minor. None when the
    driver reported no clocks (some runtimes report 0): no bound is better than a wrong one."""
    try:
        mem_khz = float(attrs["memory_clock_khz"])  # type: ignore[arg-type]
        bus = float(attrs["memory_bus_bits"])  # type: ignore[arg-type]
        sms = float(attrs["sm_count"])  # type: ignore[arg-type]
        khz = float(attrs["clock_khz"])  # type: ignore[arg-type]
        major, minor = int(attrs["cc_major"]), int(attrs["cc_minor"])  # type: ignore[call-overload]
    except (KeyError, TypeError, ValueError):
        return None
    if min(mem_khz, bus, sms, khz) <= 0:
        return None
    name = str(attrs.get("name") or "GPU").replace("NVIDIA ", "")
    short = name.split()[0] if name.split() else name
    lanes = fp32_lanes_per_sm(major, minor)
    bandwidth = mem_khz * 1e3 * bus * 2 / 8
    flops = sms * khz * 1e3 * lanes * 2
    how = (
        f"{name}: {mem_khz / 1e3:.0f} MHz memory clock x {bus:.0f}-bit bus x 2 (DDR) / 8 = "
        f"{rate_text(bandwidth, 'B/s')}; {sms:.0f} SMs x {khz / 1e3:.0f} MHz x {lanes} FP32 "
        f"lanes (sm_{major}{minor}) x 2 = {rate_text(flops, 'FLOP/s')}"
    )
    return Peak(f"this {short}", bandwidth, flops, how)


# --------------------------------------------------------------------------- CPUs
@dataclass(frozen=True)
class CpuFacts:
    model: str
    cores: int
    max_hz: float
    clock_source: str  # where max_hz came from
    simd_bytes: int  # the widest vector register
    fma_pipes: int  # vector FMA units per core (2 on x86 cores, up to 4 on Arm ones)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _sysctl(name: str) -> str:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def cpu_facts() -> CpuFacts:
    """What this machine says about its CPU (Linux /proc and /sys, macOS sysctl)."""
    cores = os.cpu_count() or 1
    cpuinfo = _read("/proc/cpuinfo")
    model = (re.findall(r"^(?:model name|Model|Hardware)\s*:\s*(.+)$", cpuinfo, re.M) or [""])[0]
    model = model.strip() or _sysctl("machdep.cpu.brand_string") or platform.processor() or "CPU"
    freqs = [
        int(t) * 1e3
        for t in (
            _read(f"/sys/devices/system/cpu/cpu{i}/cpufreq/cpuinfo_max_freq") for i in range(cores)
        )
        if t.strip().isdigit()
    ]
    if freqs:
        max_hz, source = max(freqs), "cpufreq's cpuinfo_max_freq"
    elif (mac := _sysctl("hw.cpufrequency_max")).isdigit():
        max_hz, source = float(mac), "sysctl hw.cpufrequency_max"
    else:  # /proc/cpuinfo's "cpu MHz" is the current clock, not the boost: no maximum reported
        max_hz, source = FASTEST_CORE_HZ, "none reported: the fastest shipping core's"
    flags = set((re.findall(r"^(?:flags|Features)\s*:\s*(.+)$", cpuinfo, re.M) or [""])[0].split())
    machine = platform.machine().lower()
    if "avx512f" in flags:
        simd = 64
    elif "avx" in flags or "avx2" in flags:
        simd = 32
    elif "sve" in flags:
        simd = 256  # SVE's widest vector (2048 bits): the register width is not in the flags
    elif flags or machine in ("x86_64", "amd64", "arm64", "aarch64"):
        simd = 16  # SSE2 / NEON (Apple's cores: 128-bit NEON)
    else:
        simd = 32
    pipes = 4 if machine in ("arm64", "aarch64") else 2
    return CpuFacts(model, cores, max_hz, source, simd, pipes)


def cpu_peak(facts: CpuFacts | None = None) -> Peak:
    """This CPU's bound: FLOP/s (FP32) and bytes/s, over all its cores (see the module doc)."""
    f = facts or cpu_facts()
    lanes = f.simd_bytes // 4
    flops = f.cores * f.max_hz * lanes * f.fma_pipes * 2
    bandwidth = f.cores * f.max_hz * 3 * f.simd_bytes
    how = (
        f"{f.model}: {f.cores} cores x {f.max_hz / 1e9:.2f} GHz ({f.clock_source}) x {lanes} "
        f"FP32 lanes x {f.fma_pipes} FMA pipes x 2 = {rate_text(flops, 'FLOP/s')}; {f.cores} "
        f"cores x {f.max_hz / 1e9:.2f} GHz x 3 x {f.simd_bytes} B per cycle = "
        f"{rate_text(bandwidth, 'B/s')}"
    )
    return Peak(f"this CPU ({f.model}, {f.cores} cores)", bandwidth, flops, how)


# --------------------------------------------------------------------------- the picture
def roofline_svg(
    peak: Peak, kernels: list[tuple[str, float, float]], *, width: int = 640, height: int = 400
) -> str:
    """The device's roofline (log-log: arithmetic intensity in FLOP/byte, FLOP/s) with each timed
    kernel, `kernels` being (label, achieved bytes/s, achieved FLOP/s; 0 when not counted).

    A kernel with both counts sits at its intensity; one that only moves bytes (a copy, a
    transpose) is drawn on the left edge at its share of the memory roof, one that only counts
    FLOPs on the right edge at its share of the compute roof. Each label says the share."""
    from html import escape

    bw, fl = peak.bytes_per_s, peak.flops_per_s
    ridge = fl / bw
    x_lo, x_hi = math.floor(math.log10(ridge / 100)), math.ceil(math.log10(ridge * 100))
    y_hi = math.ceil(math.log10(fl * 2))
    y_lo = y_hi - 5
    left, right, top, bottom = 70, 20, 30, 45
    pw, ph = width - left - right, height - top - bottom

    def px(ai: float) -> float:
        return left + (math.log10(ai) - x_lo) / (x_hi - x_lo) * pw

    def py(flops: float) -> float:
        value = max(math.log10(max(flops, 1e-30)), y_lo)
        return top + (y_hi - value) / (y_hi - y_lo) * ph

    title = f"{peak.device}'s roofline: {rate_text(bw, 'B/s')}, {rate_text(fl, 'FLOP/s')}"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="18">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="white" stroke="#444"/>',
    ]
    for d in range(x_lo, x_hi + 1):
        x = px(10.0**d)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">{10.0**d:g}</text>')
    for d in range(y_lo, y_hi + 1):
        y = py(10.0**d)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(rate_text(10.0**d, 'FLOP/s'))}</text>"
        )
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        "arithmetic intensity (FLOP/byte)</text>"
    )
    a0, a1 = 10.0**x_lo, 10.0**x_hi
    roof = [(a0, bw * a0), (ridge, fl), (a1, fl)]
    points = " ".join(f"{px(a):.1f},{py(f):.1f}" for a, f in roof)
    out.append(f'<polyline points="{points}" fill="none" stroke="black" stroke-width="2"/>')
    for i, (label, bps, fps) in enumerate(kernels):
        if bps and fps:
            ai, perf = fps / bps, fps
        elif bps:
            ai = a0 * 1.5
            perf = bps * ai
        else:
            ai, perf = a1 / 1.5, fps
        share = peak.fraction(bytes_per_s=bps, flops_per_s=fps)
        x, y = px(ai), py(perf)
        anchor = "end" if x > left + pw / 2 else "start"
        dx = -6 if anchor == "end" else 6
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#c33"/>')
        out.append(
            f'<text x="{x + dx:.1f}" y="{y + 4 + 12 * (i % 2):.1f}" text-anchor="{anchor}">'
            f"{escape(label)}: {share:.0%} of peak</text>"
        )
    out.append("</svg>")
    return "\n".join(out)
