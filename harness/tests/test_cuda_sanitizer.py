"""--kata-cuda-sanitize: compute-sanitizer reports parsed into failures, and the subprocess round trip.

No GPU here: the reports are written in compute-sanitizer's formats (2021-2025 releases and the
older cuda-memcheck one), and a fake `compute-sanitizer` executable stands in for the real one; in
the clean case it runs harness.cuda.sanitize_runner against a host "driver" that adds vectors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import harness.cuda as hc
from harness.cuda import gpu, sanitizer

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vadd(const float *, const float *, float *, int)+0x90 in /kata/vadd.cu:4
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f3c1e000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3c1e000000 of size 4,000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2ea231] in /usr/lib/x86_64-linux-gnu/libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at vadd(const float *, const float *, float *, int)+0x90 in /kata/vadd.cu:4
=========     by thread (233,0,0) in block (3,0,0)
=========     Address 0x7f3c1e000fa4 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f3c1e000000 of size 4,000 bytes
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on \
CUDA API call to cuEventSynchronize.
=========
========= ERROR SUMMARY: 3 errors
"""

MEMCHECK_WRAPPED = """\
========= Invalid __global__ read of size 8 bytes
=========     at void ns::scale<(int)4>(double *, int)+0x70
=========        in scale.cu:9
=========     by thread (7,1,0) in block (0,2,0)
=========     Access to 0xd67bffffc is out of bounds
=========     and is 8 bytes before the nearest allocation at 0xd67c00000 of size 512 bytes
"""

MEMCHECK_OLD = """\
========= CUDA-MEMCHECK
========= Invalid __global__ read of size 8
=========     at 0x000000c8 in /src/helper.cuh:75:void project<double>(double*, int)
=========     by thread (9,0,0) in block (0,0,0)
=========     Address 0x000370e8 is out of bounds
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
the kernel printed this line
========= Error: Race reported between Write access at transpose_tiled(float *, const float *, int)+0x1a0 in transpose.cu:12
=========     and Read access at transpose_tiled(float *, const float *, int)+0x2b0 in transpose.cu:15 [1,024 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""  # noqa: E501 - racecheck's lines are long

RACECHECK_WRAPPED = """\
========= Error: Race reported between Write access at
=========     reduce(float *)+0xb0 in reduce.cu:28
=========     and Read access at
=========     reduce(float *)+0xc0 in reduce.cu:30
=========     [512 hazards]
"""

RACECHECK_OLD = """\
========= WARN: Race reported between Read access at 0x00000170 in ./race.cu:4:test(int*, int*)
=========     and Write access at 0x00000148 in ./race.cu:3:test(int*, int*) [4 hazards]
=========     and Write access at 0x000001a8 in ./race.cu:4:test(int*, int*) [4 hazards]
"""


def test_memcheck_records_name_kernel_line_thread_and_allocation() -> None:
    found = sanitizer.parse_report(MEMCHECK)
    assert [f.kind for f in found] == ["memory", "memory", "api"]
    f = found[0]
    assert f.title == "Invalid __global__ write of size 4 bytes"
    assert (f.kernel, f.location) == ("vadd", "/kata/vadd.cu:4")
    assert (f.thread, f.block) == ((232, 0, 0), (3, 0, 0))
    assert f.detail == (
        "address 0x7f3c1e000fa0 is out of bounds, 1 bytes after the nearest allocation (4000 bytes)"
    )
    assert found[1].thread == (233, 0, 0)
    assert found[2].title.startswith("Program hit cudaErrorLaunchFailure")


def test_memcheck_variants_wrapped_sites_templates_and_cuda_memcheck() -> None:
    (f,) = sanitizer.parse_report(MEMCHECK_WRAPPED)
    assert (f.kernel, f.location, f.thread, f.block) == (
        "scale",
        "scale.cu:9",
        (7, 1, 0),
        (0, 2, 0),
    )
    assert "8 bytes before the nearest allocation (512 bytes)" in f.detail
    (old,) = sanitizer.parse_report(MEMCHECK_OLD)
    assert (old.kernel, old.location) == ("project", "/src/helper.cuh:75")
    assert old.title == "Invalid __global__ read of size 8"
    assert old.detail == "address 0x000370e8 is out of bounds"


@pytest.mark.parametrize(
    ("report", "kernel", "title", "hazards"),
    [
        (
            RACECHECK,
            "transpose_tiled",
            "Race reported between Write access at transpose.cu:12 and Read access at "
            "transpose.cu:15",
            1024,
        ),
        (
            RACECHECK_WRAPPED,
            "reduce",
            "Race reported between Write access at reduce.cu:28 and Read access at reduce.cu:30",
            512,
        ),
        (
            RACECHECK_OLD,
            "test",
            "Race reported between Read access at ./race.cu:4 and Write access at ./race.cu:3",
            8,
        ),
    ],
)
def test_racecheck_records(report: str, kernel: str, title: str, hazards: int) -> None:
    (f,) = sanitizer.parse_report(report)
    assert (f.kind, f.kernel, f.title, f.hazards) == ("race", kernel, title, hazards)


def test_a_clean_report_has_no_findings() -> None:
    clean = "========= COMPUTE-SANITIZER\nresult ok\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitizer.parse_report(clean) == []


def test_failure_message_reads_on_its_own() -> None:
    msg = sanitizer.failure_message("memcheck", "vadd", sanitizer.parse_report(MEMCHECK), "v.cu")
    first, second = msg.splitlines()[:2]
    assert first == "compute-sanitizer memcheck found 2 problems in kernel vadd (v.cu):"
    assert second == (
        "  Invalid __global__ write of size 4 bytes at /kata/vadd.cu:4 by thread (232,0,0) in "
        "block (3,0,0): address 0x7f3c1e000fa0 is out of bounds, 1 bytes after the nearest "
        "allocation (4000 bytes)"
    )
    assert "check the index bound" in msg
    race = sanitizer.failure_message("racecheck", "t", sanitizer.parse_report(RACECHECK), "t.cu")
    assert "(1024 hazards)" in race and "__syncthreads()" in race


def test_configure_checks_tool_and_executable(tmp_path: Path) -> None:
    with pytest.raises(hc.CudaError, match="unknown tool 'synccheck'"):
        sanitizer.configure("synccheck", tmp_path / "x")
    sanitizer.configure(None)
    assert sanitizer.sanitize_tool() is None


# ----------------------------------------------------------------------------- round trip
class HostDriver:
    """A gpu driver that runs vadd(a, b, c, n) on the host (for the runner, in the subprocess)."""

    name = "host"

    def compile(self, source, options, name):
        return options

    def function(self, module, name):
        return name

    def alloc(self, a):
        return a.copy()

    def get(self, handle, a):
        a[...] = handle

    def set(self, handle, a):
        handle[...] = a

    def launch(self, fn, plan, block, grid, shared, timed):
        a, b, c = (p.value.handle if p.kind == "device" else p.value for p in plan[:3])
        c[...] = a + b
        return 0.125


FAKE = """\
#!{python}
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
args = sys.argv[1:]
directory = Path(args[-1])
Path({record!r}).write_text(json.dumps({{"argv": args, "spec": json.loads(
    (directory / "spec.json").read_text())}}))
if {report!r}:
    print("the program's output")
    print({report!r}, end="")
    sys.exit(86)
from test_cuda_sanitizer import HostDriver
from harness.cuda.sanitize_runner import run
run(directory, drv=HostDriver())
print("========= ERROR SUMMARY: 0 errors")
"""


def fake_sanitizer(tmp_path: Path, report: str) -> tuple[Path, Path]:
    exe = tmp_path / "compute-sanitizer"
    record = tmp_path / "record.json"
    exe.write_text(
        FAKE.format(
            python=sys.executable,
            tests=str(Path(__file__).parent),
            record=str(record),
            report=report,
        )
    )
    exe.chmod(0o755)
    return exe, record


@pytest.fixture
def vadd():
    yield gpu.GpuModule("__global__ void vadd() {}", ["-DX=1"], name="v.cu", drv=HostDriver())
    sanitizer.configure(None)


def test_a_sanitized_launch_runs_in_the_runner_and_copies_outputs_back(tmp_path, vadd) -> None:
    exe, record = fake_sanitizer(tmp_path, "")
    sanitizer.configure("memcheck", exe)
    f = vadd.get_function("vadd")
    a = np.arange(6, dtype=np.float32)
    d = gpu.GpuDeviceArray(np.full(6, 2, np.float32), HostDriver())
    c = np.zeros(6, np.float32)
    t = f(hc.In(a), d, hc.Out(c), np.int32(6), block=(6, 1, 1), time_kernel=True)
    np.testing.assert_array_equal(c, a + 2)
    assert t == 0.125
    seen = json.loads(record.read_text())
    assert seen["argv"][:2] == ["--tool", "memcheck"]
    assert seen["argv"][-3:-1] == ["-m", "harness.cuda.sanitize_runner"]
    spec = seen["spec"]
    assert spec["kernel"] == "vadd" and spec["options"] == ["-DX=1", "-lineinfo"]
    assert [a["kind"] for a in spec["args"]] == ["in", "inout", "out", "scalar"]


def test_findings_fail_the_launch_with_the_parsed_report(tmp_path, vadd) -> None:
    exe, _ = fake_sanitizer(tmp_path, textwrap.dedent(RACECHECK))
    sanitizer.configure("racecheck", exe)
    f = vadd.get_function("vadd")
    a = np.ones(4, np.float32)
    c = np.zeros(4, np.float32)
    with pytest.raises(hc.SanitizerError) as e:
        f(hc.In(a), hc.In(a), hc.Out(c), np.int32(4), block=(4, 1, 1))
    assert str(e.value).startswith(
        "compute-sanitizer racecheck found 1 problem in kernel vadd (v.cu):\n"
        "  Race reported between Write access at transpose.cu:12"
    )
    assert e.value.tool == "racecheck" and e.value.kernel == "vadd"
    assert e.value.findings[0].hazards == 1024
    np.testing.assert_array_equal(c, 0)  # nothing copied back from a failed launch


def test_the_option_without_compute_sanitizer_is_a_usage_error(monkeypatch) -> None:
    from types import SimpleNamespace

    from harness.cuda import fixtures

    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: None)
    config = SimpleNamespace(getoption=lambda name, default=None: "racecheck")
    with pytest.raises(pytest.UsageError, match=r"racecheck needs NVIDIA compute-sanitizer"):
        fixtures.pytest_configure(config)  # type: ignore[arg-type]
    assert sanitizer.sanitize_tool() is None


LARGE = """\
import resource, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import numpy as np
from test_cuda_sanitizer import HostDriver
from harness.cuda import gpu, sanitizer
import harness.cuda as hc

cap = 1 << 20  # the sandbox's cap on one file, scaled down (harness.sandbox.limits.OUTPUT_LIMIT)
resource.setrlimit(resource.RLIMIT_FSIZE, (cap, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sanitizer.configure("memcheck", {exe!r})
f = gpu.GpuModule("__global__ void vadd() {{}}", [], name="v.cu", drv=HostDriver()).get_function(
    "vadd"
)
n = 1 << 19  # 2 MiB of float32 per array: args.npz and out.npz are each over the cap
a = np.arange(n, dtype=np.float32)
c = np.zeros(n, np.float32)
f(hc.In(a), hc.In(a), hc.Out(c), np.int32(n), block=(256, 1, 1), grid=(n // 256,))
np.testing.assert_array_equal(c, 2 * a)
assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == cap, "the cap is back for learner code"
try:
    Path({big!r}).write_bytes(b"x" * (2 * cap))
except OSError as e:
    print("capped again:", e.strerror)
"""


def test_a_sanitized_launch_with_arrays_over_the_sandbox_file_cap(tmp_path: Path) -> None:
    # Under the sandbox, args.npz and out.npz failed with "[Errno 27] File too large".
    exe, _ = fake_sanitizer(tmp_path, "")
    script = LARGE.format(tests=str(Path(__file__).parent), exe=str(exe), big=str(tmp_path / "big"))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "capped again: File too large" in proc.stdout, proc.stdout + proc.stderr


# ----------------------------------------------------------------------------- findings fire
# The stand-in compute-sanitizer (harness/tests/standins/compute-sanitizer) runs the launch on the
# cpu backend and prints what it finds in compute-sanitizer's formats: the whole path from a
# kernel with a bug to a SanitizerError runs here, with only the sanitizer itself replaced.
STANDIN = Path(__file__).parent / "standins" / "compute-sanitizer"
KERNELS = Path(__file__).parent / "cuda_kernels"


def sanitized(tool: str, source: str, name: str):
    sanitizer.configure(tool, STANDIN)
    module = gpu.GpuModule((KERNELS / source).read_text(), [], name=source, drv=HostDriver())
    return module.get_function(name)


@pytest.fixture
def no_sanitizer():
    yield
    sanitizer.configure(None)


def test_memcheck_finds_the_out_of_bounds_store(no_sanitizer) -> None:
    fill = sanitized("memcheck", "oob_store.cu", "fill")
    c = np.zeros(1000, np.float32)
    with pytest.raises(hc.SanitizerError) as e:
        fill(hc.Out(c), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    assert not isinstance(e.value, hc.SanitizerRefused)
    (f,) = e.value.findings
    assert (f.kind, f.title, f.kernel) == (
        "memory",
        "Invalid __global__ write of size 4 bytes",
        "fill",
    )
    assert f.block == (3, 0, 0) and f.thread[0] >= 1000 - 3 * 256, "a thread past n = 1000"
    assert str(e.value).startswith("compute-sanitizer memcheck found 1 problem in kernel fill")
    assert "check the index bound" in str(e.value)


def test_racecheck_finds_the_missing_syncthreads(no_sanitizer) -> None:
    shift = sanitized("racecheck", "missing_sync.cu", "shift")
    d = np.arange(256, dtype=np.float32)
    with pytest.raises(hc.SanitizerError) as e:
        shift(hc.InOut(d), np.int32(256), block=(256, 1, 1))
    (f,) = e.value.findings
    assert (f.kind, f.kernel) == ("race", "shift") and f.hazards and f.hazards > 0
    assert "add the missing barrier" in str(e.value)


def test_clean_kernels_pass_the_stand_in(no_sanitizer) -> None:
    fill = sanitized("memcheck", "oob_store.cu", "fill")
    c = np.zeros(1024, np.float32)
    fill(hc.Out(c), np.int32(1024), block=(256, 1, 1), grid=(4, 1))  # exactly the grid: in bounds
    np.testing.assert_array_equal(c, 2.0 * np.arange(1024, dtype=np.float32))


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("refuse", "Error: Device not supported"),
        ("silent", "the program under it never launched the kernel"),
    ],
)
def test_a_sanitizer_that_checked_nothing_is_never_a_pass(no_sanitizer, monkeypatch, mode, why):
    """Refusing the device (gVisor) and then running the program unchecked, with a clean
    summary and exit status 0; or a clean summary without running it at all."""
    monkeypatch.setenv("KATA_STANDIN_SANITIZER", mode)
    fill = sanitized("memcheck", "oob_store.cu", "fill")
    c = np.zeros(1000, np.float32)
    with pytest.raises(hc.SanitizerRefused) as e:
        fill(hc.Out(c), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    assert str(e.value).startswith(
        f"compute-sanitizer memcheck did not check kernel fill (oob_store.cu): {why}. Nothing "
        "was checked, so this is not a pass"
    )
    assert isinstance(e.value, hc.SanitizerError) and e.value.findings == []


def test_refusal_lines_and_missing_summaries() -> None:
    clean = "========= COMPUTE-SANITIZER\nok\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitizer.refusal(clean) is None
    assert sanitizer.refusal(clean, sentinel="launched k") == (
        "the program under it never launched the kernel"
    )
    internal = (
        "========= Internal Sanitizer Error: The Sanitizer encountered an error while launching "
        "k and didn't track the launch. Errors might go undetected.\n" + clean
    )
    assert sanitizer.refusal(internal).startswith("Internal Sanitizer Error")
    assert sanitizer.refusal("========= COMPUTE-SANITIZER\n") == (
        "it printed no ERROR SUMMARY / RACECHECK SUMMARY line"
    )
    assert sanitizer.refusal(RACECHECK) is None, "findings and a summary: it checked"


# ----------------------------------------------------------------------------- the cpu backend
def test_the_cpu_backend_catches_the_same_two_kernels() -> None:
    """Without --kata-cuda-sanitize, the cpu backend's own checks fire on the same kernels: the
    guard page after each buffer (OutOfBounds) and the schedule comparison (RaceDetected)."""
    fill = hc.SourceModule((KERNELS / "oob_store.cu").read_text(), name="oob_store.cu")
    c = np.zeros(1000, np.float32)
    with pytest.raises(hc.OutOfBounds) as oob:
        fill.get_function("fill")(hc.Out(c), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    assert oob.value.block == (3, 0, 0) and "write" in str(oob.value)
    shift = hc.SourceModule((KERNELS / "missing_sync.cu").read_text(), name="missing_sync.cu")
    d = np.arange(256, dtype=np.float32)
    with pytest.raises(hc.RaceDetected, match="missing __syncthreads"):
        hc.check_races(shift.get_function("shift"), hc.InOut(d), np.int32(256), block=(256,))


# ----------------------------------------------------------------------------- on a GPU
REAL = """\
import json, sys
import numpy as np
import harness.cuda as hc
from harness.cuda import gpu, sanitizer
tool, source, kernel, n, grid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
sanitizer.configure(tool)
f = gpu.GpuModule(open(source).read(), [], name=source.rsplit("/", 1)[-1]).get_function(kernel)
a = np.arange(n, dtype=np.float32)
arg = hc.Out(np.zeros(n, np.float32)) if kernel == "fill" else hc.InOut(a)
try:
    f(arg, np.int32(n), block=(256, 1, 1), grid=(grid, 1))
    print(json.dumps({"error": None}))
except hc.SanitizerError as e:
    print(json.dumps({"error": type(e).__name__, "kinds": [x.kind for x in e.findings],
                      "message": str(e)}))
"""


def _gpu_and_sanitizer() -> str | None:
    from harness.tiers import probe

    caps = probe()
    if not caps.has_tier("gpu"):
        return f"needs the gpu tier: {caps.why_not('gpu')}"
    if sanitizer.find_sanitizer() is None:
        return "needs NVIDIA compute-sanitizer (the CUDA toolkit)"
    return None


@pytest.mark.parametrize(
    ("tool", "source", "kernel", "n", "grid", "kind"),
    [
        ("memcheck", "oob_store.cu", "fill", 1000, 4, "memory"),
        ("racecheck", "missing_sync.cu", "shift", 256, 1, "race"),
    ],
)
def test_real_compute_sanitizer_finds_them(tool, source, kernel, n, grid, kind) -> None:
    """On a GPU: the real compute-sanitizer, in a child process (CUDA is never initialised in
    the pytest process). A refusal (gVisor) is reported as what it is, never as a pass."""
    why = _gpu_and_sanitizer()
    if why:
        pytest.skip(why)
    proc = subprocess.run(
        [sys.executable, "-c", REAL, tool, str(KERNELS / source), kernel, str(n), str(grid)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if got["error"] == "SanitizerRefused":
        pytest.fail(f"compute-sanitizer refused this machine: {got['message']}")
    assert got["error"] == "SanitizerError" and kind in got["kinds"], got
