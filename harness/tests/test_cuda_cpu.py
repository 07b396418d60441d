"""harness.cuda on the cpu backend: real CUDA C kernels, races, errors, tracing, the fixture.

The acceptance kernels live in cuda_kernels/*.cu. Each runs on the cpu backend and, on a machine
with the gpu tier, on the gpu backend too (skipped here with the probe's reason).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.cuda as hc
from harness.cuda.cpu.backend import traced_toolchain
from harness.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("cxx") is None, reason="needs a C++ compiler (g++)")
needs_traced = pytest.mark.skipif(
    traced_toolchain() is None, reason="needs g++ or clang (traced builds)"
)

KERNELS = Path(__file__).parent / "cuda_kernels"


def _gpu_skip_reason(config: pytest.Config) -> str | None:
    from harness.api import STATE

    caps = config.stash[STATE].caps
    return None if caps.has_tier("gpu") else f"needs the gpu tier: {caps.why_not('gpu')}"


@pytest.fixture(params=["cpu", "gpu"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "gpu":
        reason = _gpu_skip_reason(request.config)
        if reason:
            pytest.skip(reason)
        from harness.cuda.gpu import available_driver

        if available_driver() is None:
            pytest.skip("the gpu backend needs pycuda or CuPy: pip install -e '.[gpu]'")
    return request.param


def module(name: str, backend: str = "cpu", strip_sync: bool = False, **kw):
    source = (KERNELS / name).read_text()
    if strip_sync:
        source = re.sub(r"__syncthreads\(\);", "", source)
        assert "__syncthreads" not in source
    return hc.SourceModule(source, name=name, backend=backend, **kw)


RNG = np.random.default_rng(7)


# ----------------------------------------------------------------------------- the four kernels
def run_matmul(f, n: int = 40):
    a = RNG.random((n, n), dtype=np.float32)
    b = RNG.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    args = (hc.In(a), hc.In(b), hc.Out(c), np.int32(n))
    grid = ((n + 15) // 16, (n + 15) // 16)
    return args, {"block": (16, 16, 1), "grid": grid}, c, a @ b


def run_transpose(f, rows: int = 70, cols: int = 45):
    x = RNG.random((rows, cols), dtype=np.float32)
    y = np.zeros((cols, rows), np.float32)
    args = (hc.In(x), hc.Out(y), np.int32(rows), np.int32(cols))
    grid = ((cols + 31) // 32, (rows + 31) // 32)
    return args, {"block": (32, 8, 1), "grid": grid}, y, x.T


def run_reduce(f, n: int = 5000):
    x = RNG.random(n, dtype=np.float32)
    out = np.zeros(1, np.float32)
    args = (hc.In(x), hc.InOut(out), np.int32(n))
    return args, {"block": (256, 1, 1), "grid": (4, 1)}, out, np.array([x.sum(dtype=np.float64)])


def run_histogram(f, n: int = 20000):
    data = RNG.integers(0, 256, n).astype(np.uint8)
    bins = np.zeros(256, np.uint32)
    args = (hc.In(data), hc.InOut(bins), np.int32(n))
    return args, {"block": (128, 1, 1), "grid": (8, 1)}, bins, np.bincount(data, minlength=256)


CASES = {
    "matmul_tiled.cu": ("matmul_tiled", run_matmul, 1e-4),
    "transpose_shared.cu": ("transpose_shared", run_transpose, 0),
    "warp_reduce.cu": ("reduce_sum", run_reduce, 1e-4),
    "histogram.cu": ("histogram", run_histogram, 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_acceptance_kernels_match_numpy(name: str, backend: str) -> None:
    kernel, setup, rtol = CASES[name]
    f = module(name, backend).get_function(kernel)
    args, launch, out, want = setup(f)
    f(*args, **launch)
    np.testing.assert_allclose(out, want, rtol=rtol)


@pytest.mark.parametrize("name", list(CASES))
def test_acceptance_kernels_pass_the_race_check(name: str) -> None:
    kernel, setup, rtol = CASES[name]
    f = module(name).get_function(kernel)
    args, launch, out, want = setup(f)
    hc.check_races(f, *args, **launch)  # raises RaceDetected if schedules disagree
    np.testing.assert_allclose(out, want, rtol=rtol)


@pytest.mark.parametrize("name", list(CASES))
def test_removing_syncthreads_is_reported_as_a_race(name: str) -> None:
    kernel, setup, _ = CASES[name]
    f = module(name, strip_sync=True).get_function(kernel)
    args, launch, _, _ = setup(f)
    with pytest.raises(hc.RaceDetected) as e:
        f(*args, schedules=hc_schedules(), **launch)
    assert e.value.kernel == kernel
    assert "missing __syncthreads() or a data race" in str(e.value)
    assert e.value.mismatches > 0


def hc_schedules() -> tuple[str, ...]:
    from harness.cuda.cpu.backend import default_schedules

    return default_schedules()


@needs_traced
def test_lost_update_is_exposed_only_by_the_preempt_schedule() -> None:
    source = """
    __global__ void count(const int* keys, int* bins, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) bins[keys[i]] += 1;  // not atomic: two threads can read the same old value
    }
    """
    f = hc.SourceModule(source, name="count.cu").get_function("count")
    keys = (np.arange(512) % 4).astype(np.int32)
    bins = np.zeros(4, np.int32)
    args = (hc.In(keys), hc.InOut(bins), np.int32(512))
    # Whole-thread schedules run each read-modify-write uninterrupted: the count looks right.
    f(*args, block=(128, 1, 1), grid=(4, 1), schedules=("forward", "reverse", "random"))
    assert bins.tolist() == [128] * 4
    with pytest.raises(hc.RaceDetected, match="preempt"):
        f(*args, block=(128, 1, 1), grid=(4, 1), schedules=("forward", "preempt"))


# ----------------------------------------------------------------------------- fibers, barriers
def test_a_1024_thread_block_exchanges_through_shared_memory() -> None:
    source = """
    __global__ void reverse_block(const int* in, int* out) {
        __shared__ int s[1024];
        int t = threadIdx.x + threadIdx.y * blockDim.x;
        s[t] = in[blockIdx.x * 1024 + t];
        __syncthreads();
        out[blockIdx.x * 1024 + t] = s[1023 - t] + __syncthreads_count(t % 3 == 0);
    }
    """
    f = hc.SourceModule(source, name="rev.cu").get_function("reverse_block")
    x = np.arange(3 * 1024, dtype=np.int32)
    y = np.zeros_like(x)
    f(hc.In(x), hc.Out(y), block=(32, 32, 1), grid=(3, 1))
    want = x.reshape(3, 1024)[:, ::-1].reshape(-1) + len(range(0, 1024, 3))
    np.testing.assert_array_equal(y, want)


def test_early_return_before_a_barrier_is_a_reported_deadlock() -> None:
    source = """
    __global__ void bad(float* x, int n) {
        __shared__ float s[256];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        s[threadIdx.x] = x[i];
        __syncthreads();
        x[i] = s[(threadIdx.x + 1) % blockDim.x];
    }
    """
    f = hc.SourceModule(source, name="bad.cu").get_function("bad")
    x = np.zeros(300, np.float32)
    with pytest.raises(hc.BarrierDeadlock) as e:
        f(hc.InOut(x), np.int32(300), block=(256, 1, 1), grid=(2, 1))
    msg = str(e.value)
    assert "kernel bad" in msg and "line 7" in msg and "early `return`" in msg
    assert "a branch that only some threads take" in msg  # the other way to strand a barrier
    assert e.value.block == (1, 0, 0)


def test_a_collective_naming_an_exited_lane_is_a_reported_deadlock() -> None:
    source = """
    __global__ void partial(int* out, int n) {
        int i = threadIdx.x;
        if (i >= n) return;
        out[i] = __shfl_down_sync(0xffffffffu, i, 1);
    }
    """
    f = hc.SourceModule(source, name="p.cu").get_function("partial")
    out = np.zeros(32, np.int32)
    with pytest.raises(hc.BarrierDeadlock, match=r"__shfl_down_sync at line 5.*already exited"):
        f(hc.Out(out), np.int32(20), block=(32, 1, 1))


WARP_SOURCE = """
__global__ void warp_ops(const int* in, int* out) {
    int t = threadIdx.x;
    int lane = t % 32;
    int v = in[t];
    int base = t * 8;
    out[base + 0] = __shfl_sync(0xffffffffu, v, 3);              // broadcast lane 3
    out[base + 1] = __shfl_xor_sync(0xffffffffu, v, 1);          // swap neighbours
    out[base + 2] = __shfl_up_sync(0xffffffffu, v, 2, 16);       // within 16-lane halves
    out[base + 3] = (int)__ballot_sync(0xffffffffu, v % 2 == 0);
    out[base + 4] = __any_sync(0xffffffffu, v == 5) + 2 * __all_sync(0xffffffffu, v >= 0);
    int m = 0;
    if (lane < 10) {
        m = (int)__activemask();  // the lanes at this call site: 0..9
    } else {
        m = -(int)__activemask();
    }
    out[base + 5] = m;
    int s = v;
    for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
    out[base + 6] = s;
    __syncwarp();
    out[base + 7] = (int)__reduce_max_sync(0xffffffffu, (unsigned)v);
}
"""


def warp_reference(x: np.ndarray) -> np.ndarray:
    out = np.zeros((x.size, 8), np.int64)
    for w in range(x.size // 32):
        v = x[w * 32 : (w + 1) * 32].astype(np.int64)
        for lane in range(32):
            r = out[w * 32 + lane]
            r[0] = v[3]
            r[1] = v[lane ^ 1]
            seg = lane & ~15
            r[2] = v[lane - 2] if lane - 2 >= seg else v[lane]
            r[3] = sum(1 << k for k in range(32) if v[k] % 2 == 0)
            r[4] = int((v == 5).any()) + 2 * int((v >= 0).all())
            r[5] = (1 << 10) - 1 if lane < 10 else -(0xFFFFFFFF ^ ((1 << 10) - 1))
            r[6] = _down_sum(v, lane)
            r[7] = v.max()
    return out.astype(np.uint32).view(np.int32)


def _down_sum(v: np.ndarray, lane: int) -> int:
    s = v.copy()
    for o in (16, 8, 4, 2, 1):
        s = s + np.array([s[k + o] if k + o < 32 else s[k] for k in range(32)])
    return int(s[lane])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 1000), min_size=64, max_size=64))
def test_warp_intrinsics_are_warp_synchronous(values: list[int]) -> None:
    f = hc.SourceModule(WARP_SOURCE, name="warp.cu").get_function("warp_ops")
    x = np.array(values, np.int32)
    out = np.zeros(64 * 8, np.int32)
    f(hc.In(x), hc.Out(out), block=(64, 1, 1))
    got = out.reshape(64, 8)
    want = warp_reference(x)
    for col, what in enumerate(
        ["shfl", "shfl_xor", "shfl_up w16", "ballot", "any/all", "activemask", "sum", "max"]
    ):
        np.testing.assert_array_equal(got[:, col], want[:, col], err_msg=what)


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 5000),
    threads=st.sampled_from([1, 32, 100, 256, 1024]),
    blocks=st.integers(1, 9),
)
def test_grid_stride_vector_add(n: int, threads: int, blocks: int) -> None:
    f = module_vadd().get_function("vadd")
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, np.float32)
    c = np.zeros(n, np.float32)
    f(hc.In(a), hc.In(b), hc.Out(c), np.int32(n), block=(threads, 1, 1), grid=(blocks, 1))
    np.testing.assert_array_equal(c, a + b)


VADD = """
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}
__global__ void vadd_unguarded(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
"""


def module_vadd():
    return hc.SourceModule(VADD, name="vadd.cu")


# ----------------------------------------------------------------------------- errors
def test_out_of_bounds_is_reported_with_kernel_argument_and_thread() -> None:
    f = module_vadd().get_function("vadd_unguarded")
    n = 1000
    a = np.zeros(n, np.float32)
    with pytest.raises(hc.OutOfBounds) as e:
        f(hc.In(a), hc.In(a), hc.Out(a.copy()), np.int32(n), block=(256, 1, 1), grid=(4, 1))
    msg = str(e.value)
    assert msg.startswith("kernel vadd_unguarded, block (3,0,0) thread (232,0,0)")
    assert "read of" in msg and "0 bytes past the end of argument 0 (a) (4000 bytes)" in msg
    assert e.value.argument == 0


def test_out_of_bounds_write_is_reported_as_a_write() -> None:
    source = "__global__ void w(int* p) { p[threadIdx.x + 1] = 1; }"
    f = hc.SourceModule(source, name="w.cu").get_function("w")
    with pytest.raises(hc.OutOfBounds, match=r"write to .* past the end of argument 0 \(p\)"):
        f(hc.Out(np.zeros(8, np.int32)), block=(8, 1, 1))


def test_crashes_and_endless_loops_become_errors_not_dead_workers() -> None:
    source = """
    __global__ void divide(int* p, int d) { p[threadIdx.x] = 10 / d; }
    __global__ void spin(int* p) { while (((volatile int*)p)[0] == 0) { } }
    __global__ void check(int* p) { assert(p[threadIdx.x] == 0); }
    """
    m = hc.SourceModule(source, name="crash.cu")
    p = np.zeros(4, np.int32)
    with pytest.raises(hc.KernelCrash, match="kernel divide.*SIGFPE"):
        m.get_function("divide")(hc.InOut(p), np.int32(0), block=(4, 1, 1))
    with pytest.raises(hc.KernelTimeout, match="kernel spin did not finish within 0.3 s"):
        m.get_function("spin")(hc.InOut(p), block=(1, 1, 1), timeout=0.3)
    p[2] = 1
    with pytest.raises(hc.KernelCrash, match=r"kernel check, block \(0,0,0\) thread \(2,0,0\)"):
        m.get_function("check")(hc.In(p), block=(4, 1, 1))


def test_compile_errors_name_the_cu_file_and_line() -> None:
    source = "__global__ void k(float* x) {\n    x[0] = y;\n}\n"
    with pytest.raises(hc.CudaCompileError) as e:
        hc.SourceModule(source, name="broken.cu")
    assert "broken.cu:2:" in str(e.value) and "'y' was not declared" in str(e.value)


@pytest.mark.parametrize(
    ("args", "launch", "match"),
    [
        ("ok", {"block": (64, 32, 1)}, r"2048 threads; a block has at most 1024"),
        ("ok", {"block": (32, 0, 1)}, r"dimension y is 0"),
        ("ok", {"block": None}, r"block= is required"),
        ("few", {"block": (32, 1, 1)}, r"takes 4 arguments \(a \(pointer, 8 bytes\)"),
        ("pyint", {"block": (32, 1, 1)}, r"Python int \(10\); pass a numpy scalar.*np.int32"),
        ("float", {"block": (32, 1, 1)}, r"argument 3 is n \(signed integer, 4 bytes\), got np"),
        ("bare", {"block": (32, 1, 1)}, r"argument 0 is a \(pointer, 8 bytes\); pass cuda.In"),
    ],
)
def test_bad_launches_are_explained(args: str, launch: dict, match: str) -> None:
    f = module_vadd().get_function("vadd")
    a = np.zeros(10, np.float32)
    argv = {
        "ok": (hc.In(a), hc.In(a), hc.Out(a), np.int32(10)),
        "few": (hc.In(a), hc.In(a), hc.Out(a)),
        "pyint": (hc.In(a), hc.In(a), hc.Out(a), 10),
        "float": (hc.In(a), hc.In(a), hc.Out(a), np.float32(10)),
        "bare": (a, hc.In(a), hc.Out(a), np.int32(10)),
    }[args]
    with pytest.raises(hc.LaunchError, match=match):
        f(*argv, **launch)


def test_unknown_kernel_lists_the_kernels_of_the_file() -> None:
    with pytest.raises(hc.CudaError, match=r"no __global__ function 'vad' \(kernels: vadd, "):
        module_vadd().get_function("vad")


# ----------------------------------------------------------------------------- memory, printf
def test_device_arrays_dynamic_shared_memory_and_printf(capfd: pytest.CaptureFixture) -> None:
    source = """
    __global__ void rotate(float* x, int n) {
        extern __shared__ float buf[];
        int t = threadIdx.x;
        buf[t] = x[t];
        __syncthreads();
        x[t] = buf[(t + 1) % n];
        if (t == 0) printf("rotated %d\\n", n);
    }
    """
    f = hc.SourceModule(source, name="rot.cu").get_function("rotate")
    x = np.arange(64, dtype=np.float32)
    d = hc.to_device(x)
    f(d, np.int32(64), block=(64, 1, 1), shared=64 * 4)
    np.testing.assert_array_equal(d.get(), np.roll(x, -1))
    assert "rotated 64" in capfd.readouterr().out
    with pytest.raises(hc.OutOfBounds, match="dynamic shared memory"):
        f(d, np.int32(64), block=(64, 1, 1), shared=16)  # room for 4 floats, not 64


# ----------------------------------------------------------------------------- tracing
@needs_traced
def test_trace_counts_sectors_per_request_and_line() -> None:
    m = module("transpose_shared.cu")
    rows = cols = 128
    x = RNG.random((rows, cols), dtype=np.float32)
    y = np.zeros_like(x)
    launch = {"block": (32, 8, 1), "grid": (4, 4)}
    naive = m.get_function("transpose_naive").trace(
        hc.In(x), hc.Out(y), np.int32(rows), np.int32(cols), **launch
    )
    np.testing.assert_array_equal(y, x.T)  # a traced run still computes
    load, store = naive.line(25, "load"), naive.line(25, "store")
    assert load.sectors_per_request == 4 and load.efficiency == 1.0
    assert store.sectors_per_request == 32 and store.efficiency == 4 / 32
    assert naive.requests == 2 * (rows * cols // 32)
    tiled = m.get_function("transpose_shared").trace(
        hc.In(x), hc.Out(y), np.int32(rows), np.int32(cols), **launch
    )
    assert tiled.efficiency == 1.0 and tiled.store_efficiency == 1.0
    assert [(s.line, s.kind) for s in tiled.lines] == [(10, "load"), (16, "store")]
    assert "tile[threadIdx.x]" in tiled.line(16).source
    assert "transpose_naive" in naive.report() and "32.00" in naive.report()


@needs_traced
def test_trace_of_strided_access_with_hypothesis_strides() -> None:
    source = textwrap.dedent(
        """
        __global__ void gather(const float* in, float* out, int stride) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            out[i] = in[i * stride];
        }
        """
    )
    f = hc.SourceModule(source, name="gather.cu").get_function("gather")
    for stride in (1, 2, 8, 33):
        x = np.arange(256 * stride, dtype=np.float32)
        y = np.zeros(256, np.float32)
        t = f.trace(hc.In(x), hc.Out(y), np.int32(stride), block=(128, 1, 1), grid=(2, 1))
        np.testing.assert_array_equal(y, x[::stride])
        load = t.line(4, "load")
        assert load.requests == 8
        assert load.sectors_per_request == min(32, 4 * stride), stride
        assert t.line(4, "store").efficiency == 1.0


@needs_traced
def test_trace_counts_atomics_as_reads_and_names_the_busiest_thread() -> None:
    source = textwrap.dedent(
        """
        __global__ void reads(float* x, float* out) {
            int i = threadIdx.x;
            float s = x[i];
            if (i == 0) for (int k = 0; k < 8; k++) s += x[k];
            s += atomicAdd(&x[i], 0.0f);
            out[i] = s;
        }
        """
    )
    f = hc.SourceModule(source, name="reads.cu").get_function("reads")
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    t = f.trace(hc.InOut(x), hc.Out(y), block=(64, 1, 1), grid=(1, 1))
    assert t.loads["global"] == 64 + 8 and t.atomics["global"] == 64
    assert t.reads["global"] == 64 + 8 + 64
    assert t.thread_reads == 1 + 8 + 1  # thread 0: its load, the loop, its atomic
    assert "busiest thread's global reads: 10" in t.report()


HIDDEN = {
    "no_sanitize_thread": "__attribute__((noinline, no_sanitize_thread))",
    "no_sanitize": '__attribute__((no_sanitize("thread")))',
    "pasted": "Q(thread)",  # the attribute assembled by a macro
}


@needs_traced
@pytest.mark.parametrize("how", sorted(HIDDEN))
def test_a_helper_the_instrumentation_skips_is_refused(how: str) -> None:
    """Traces count the loads a kernel makes: code the traced build leaves uninstrumented would
    make a kernel look as if it read nothing, so such a source does not build at all."""
    source = textwrap.dedent(
        f"""
        #define Q(k) __attribute__((noinline, no_sanitize_##k))
        __device__ {HIDDEN[how]} static float fetch(const float* p) {{ return *p; }}
        __global__ void copy(const float* x, float* y) {{ y[threadIdx.x] = fetch(&x[threadIdx.x]); }}
        """
    )
    if how != "pasted":
        source = source.replace("#define Q", "// #define Q")
    with pytest.raises(hc.CudaCompileError, match=r"`no_sanitize\w*` at hide\.cu:3 hides memory"):
        hc.SourceModule(source, name="hide.cu")  # the plain build too


@needs_traced
@pytest.mark.parametrize(
    ("line", "word"),
    [
        ('asm volatile("" ::: "memory");', "asm"),
        ("memcpy(&v, &x[threadIdx.x], n * sizeof(float));", "memcpy"),
        ('extern "C" void __tsan_read4(void*); __tsan_read4((void*)&x[0]);', "__tsan_read4"),
    ],
)
def test_assembly_library_copies_and_trace_callbacks_are_refused(line: str, word: str) -> None:
    source = textwrap.dedent(
        f"""
        #include <string.h>
        __global__ void copy(const float* x, float* y, int n) {{
            float v = 0.0f;
            {line}
            y[threadIdx.x] = v;
        }}
        """
    )
    with pytest.raises(hc.CudaCompileError, match=rf"`{word}` at hide\.cu:\d+ hides memory"):
        hc.SourceModule(source, name="hide.cu")


@needs_traced
def test_the_words_in_comments_and_the_header_atomics_are_fine() -> None:
    source = textwrap.dedent(
        """
        // not asm, no memcpy, no no_sanitize_thread here: comments vanish before the check
        __global__ void add(float* x) { atomicAdd(&x[0], 1.0f); }
        """
    )
    x = np.zeros(1, np.float32)
    hc.SourceModule(source, name="fine.cu").get_function("add")(hc.InOut(x), block=(32, 1, 1))
    assert x[0] == 32


def test_shared_memory_starts_each_block_with_garbage() -> None:
    """A GPU keeps no promise about shared memory: a block that reads words it never wrote gets
    0x7f bytes here (3.4e38 as a float: finite and far off, not the NaN tests use for "never
    written"), in static and dynamic shared memory alike, in every block, not the
    zero of a fresh mapping or the previous block's values."""
    source = """
    __global__ void unwritten(float* out) {
        __shared__ float totals[32];
        extern __shared__ float dyn[];
        if (threadIdx.x == 0) { totals[0] = 1.0f; dyn[0] = 2.0f; }
        __syncthreads();
        out[blockIdx.x * 64 + threadIdx.x] = totals[threadIdx.x];
        out[blockIdx.x * 64 + 32 + threadIdx.x] = dyn[threadIdx.x];
    }
    """
    f = hc.SourceModule(source, name="unwritten.cu").get_function("unwritten")
    out = np.zeros(3 * 64, np.float32)
    f(hc.Out(out), block=(32, 1, 1), grid=(3, 1), shared=32 * 4)
    per_block = out.reshape(3, 2, 32)
    np.testing.assert_array_equal(per_block[:, 0, 0], 1.0)
    np.testing.assert_array_equal(per_block[:, 1, 0], 2.0)
    garbage = np.frombuffer(b"\x7f" * 4, np.float32)[0]
    assert (per_block[:, :, 1:] == garbage).all(), per_block


@needs_traced
@pytest.mark.skipif(find_tool("nm") is None, reason="needs nm (binutils)")
def test_library_code_a_kernel_calls_is_refused() -> None:
    """write() reads the memory it is given in the kernel's place, where no trace sees it: a
    kernel library that imports anything but the runtime, libm, printf and the compiler's
    helpers does not build (however the call is spelled)."""
    source = textwrap.dedent(
        """
        #include <unistd.h>
        __global__ void leak(const float* x, float* y) {
            y[threadIdx.x] = (float)::write(-1, &x[threadIdx.x], 0) + sqrtf(x[0]);
        }
        """
    )
    with pytest.raises(hc.CudaCompileError, match=r"leak\.cu: the kernels call `write`"):
        hc.SourceModule(source, name="leak.cu")
