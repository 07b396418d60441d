"""Structure on the cpu backend: what a trace says beyond global coalescing.

Shared-memory bank conflicts per warp request, where loads come from (global or shared),
barriers and parallel steps per block, warp collectives per thread, and probes of a huge grid's
last block (64-bit indexing). Each case compares a kernel that does the thing with one that
does not, so a check that cannot fail would show here.
"""

from __future__ import annotations

import numpy as np
import pytest

import harness.cuda as hc
from harness.cuda.cpu.backend import CpuDeviceArray, traced_toolchain

pytestmark = pytest.mark.skipif(
    traced_toolchain() is None, reason="needs g++ or clang (traced builds)"
)


def kernel(source: str, name: str, options: tuple[str, ...] = ()):
    return hc.SourceModule(source, options=list(options), name=f"{name}.cu").get_function(name)


# ----------------------------------------------------------------------------- bank conflicts
COLUMN = """
__global__ void column(const float* in, float* out, int stride) {
    __shared__ float tile[32 * 33];
    int t = threadIdx.x;
    for (int k = 0; k < 32; k++) tile[t * 33 + k] = in[t * 32 + k];
    __syncthreads();
    out[t] = tile[t * stride];  // lane t reads word t * stride
}
"""


@pytest.mark.parametrize(("stride", "degree"), [(1, 1), (2, 2), (32, 32), (33, 1), (0, 1)])
def test_bank_conflicts_are_distinct_words_per_bank(stride: int, degree: int) -> None:
    f = kernel(COLUMN, "column")
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros(32, np.float32)
    t = f.trace(hc.In(x), hc.Out(out), np.int32(stride), block=(32, 1, 1), grid=(1, 1))
    read = next(s for s in t.shared_lines if s.kind == "load")
    assert read.requests == 1, t.report()
    # stride 0: every lane reads word 0, a broadcast; stride 33 puts lane t in bank t.
    assert read.worst == degree, t.report()
    assert read.replays == degree - 1
    assert t.worst_conflict == max(degree, 1)


def test_eight_byte_accesses_take_two_wavefronts_per_warp() -> None:
    source = """
    __global__ void wide(const double* in, double* out) {
        __shared__ double s[32];
        s[threadIdx.x] = in[threadIdx.x];
        __syncthreads();
        out[threadIdx.x] = s[31 - threadIdx.x];
    }
    """
    f = kernel(source, "wide")
    x = np.arange(32, dtype=np.float64)
    out = np.zeros(32)
    t = f.trace(hc.In(x), hc.Out(out), block=(32, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(out, x[::-1])
    # 32 lanes x 8 bytes = 64 words, two in each bank: two passes, as on the GPU.
    assert {s.worst for s in t.shared_lines} == {2}, t.report()


def test_dynamic_shared_memory_is_shared() -> None:
    source = """
    __global__ void dyn(const float* in, float* out) {
        extern __shared__ float s[];
        s[threadIdx.x * 32] = in[threadIdx.x];  // all 32 lanes in bank 0
        __syncthreads();
        out[threadIdx.x] = s[threadIdx.x * 32];
    }
    """
    f = kernel(source, "dyn")
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    t = f.trace(hc.In(x), hc.Out(out), block=(32, 1, 1), grid=(1, 1), shared=32 * 32 * 4)
    np.testing.assert_array_equal(out, x)
    assert t.worst_conflict == 32, t.report()
    assert t.loads == {"global": 32, "shared": 32}
    assert t.stores == {"global": 32, "shared": 32}


# ----------------------------------------------------------------------------- where loads come from
MATMUL = """
__global__ void mm(const float* A, const float* B, float* C, int n) {
    __shared__ float As[16][16], Bs[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += 16) {
        As[ty][tx] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; k++) acc += FROM;
        __syncthreads();
    }
    C[row * n + col] = acc;
}
"""


@pytest.mark.parametrize(
    ("inner", "shared_per_fma", "global_per_fma"),
    [
        ("As[ty][k] * Bs[k][tx]", 2, 2 / 16),
        # The tiles are never read: the compiler drops their stores and loads too.
        ("A[row * n + t + k] * B[(t + k) * n + col]", 0, 2),
    ],
)
def test_loads_are_counted_by_space(inner: str, shared_per_fma: float, global_per_fma: float):
    n = 32
    f = kernel(MATMUL, "mm", (f"-DFROM={inner}",))
    a = np.random.default_rng(1).random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    t = f.trace(hc.In(a), hc.In(a), hc.Out(c), np.int32(n), block=(16, 16, 1), grid=(2, 2))
    np.testing.assert_allclose(c, a @ a, rtol=1e-5)
    fma = n**3
    assert t.loads["shared"] == shared_per_fma * fma, t.report()
    assert t.loads["global"] == global_per_fma * fma, t.report()
    assert t.barriers == 2 * n // 16


# ----------------------------------------------------------------------------- steps and barriers
TREE = """
__global__ void tree(const float* in, float* out) {
    __shared__ float buf[256];
    buf[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
"""

SERIAL = """
__global__ void serial(const float* in, float* out) {
    __shared__ float buf[256];
    buf[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int i = 0; i < 256; i++) sum += buf[i];
        out[blockIdx.x] = sum;
    }
}
"""

ATOMIC = """
__global__ void atomic(const float* in, float* out) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    atomicAdd(&total, in[blockIdx.x * 256 + threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


@pytest.mark.parametrize(
    ("source", "name", "barriers", "low", "high"),
    [(TREE, "tree", 9, 8, 40), (SERIAL, "serial", 1, 256, 260), (ATOMIC, "atomic", 2, 256, 260)],
)
def test_parallel_steps_tell_a_tree_from_a_serial_sum(source, name, barriers, low, high) -> None:
    f = kernel(source, name)
    x = np.random.default_rng(2).random(512, dtype=np.float32)
    out = np.zeros(2, np.float32)
    t = f.trace(hc.In(x), hc.Out(out), block=(256, 1, 1), grid=(2, 1))
    np.testing.assert_allclose(out, x.reshape(2, 256).sum(axis=1), rtol=1e-5)
    assert t.barriers == barriers, t.report()
    assert low <= t.steps <= high, t.report()


def test_phases_count_barriers_per_thread() -> None:
    from harness.cuda.cpu.trace import EV_BARRIER, EVENT_FIELDS, phases

    ev = np.zeros(6, np.dtype(EVENT_FIELDS))
    ev["gtid"] = [0, 1, 0, 1, 0, 1]
    ev["kind"] = [2, 2, EV_BARRIER, EV_BARRIER, 2, 3]
    assert phases(ev).tolist() == [0, 0, 0, 0, 1, 1]


def test_warp_collectives_are_counted_per_thread() -> None:
    source = """
    __global__ void wsum(const float* in, float* out) {
        float v = in[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) out[0] = v;
    }
    """
    f = kernel(source, "wsum")
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(1, np.float32)
    t = f.trace(hc.In(x), hc.Out(out), block=(32, 1, 1), grid=(1, 1))
    assert out[0] == x.sum()
    assert t.warp_ops == 5 and t.barriers == 0, t.report()


# ----------------------------------------------------------------------------- 64-bit indexing probes
VADD = """
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    for (INDEX i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (INDEX)blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}
"""


@pytest.mark.parametrize("index", ["long long", "int"])
def test_the_last_block_of_a_huge_grid_shows_32_bit_index_overflow(index: str) -> None:
    f = kernel(VADD, "vadd", (f"-DINDEX={index}",))
    n = 2**31 - 1  # 8 GiB per array, of which only the last 4096 floats are mapped
    a, b, c = (CpuDeviceArray(n, np.float32, tail=4096) for _ in range(3))
    a.tail_view()[:] = 1.0
    b.tail_view()[:] = 2.0
    blocks = 2**21  # x 1024 threads: the stride is 2**31, one past INT_MAX
    launch = {"block": (1024, 1, 1), "grid": (blocks, 1), "blocks": range(blocks - 1, blocks)}
    if index == "int":
        # i + stride wraps to -1024 + lane: a read 4 KiB before the start of a.
        with pytest.raises(hc.OutOfBounds, match="before the start of argument 0"):
            f(a, b, c, np.int32(n), **launch)
    else:
        f(a, b, c, np.int32(n), **launch)
        assert (c.tail_view()[-1023:] == 3.0).all()
        assert c.tail_view()[-1025] == 0.0, "only the last block ran"


def test_a_tail_array_faults_outside_its_tail() -> None:
    source = """
    __global__ void poke(float* a, long long i) { a[i] = 1.0f; }
    """
    f = kernel(source, "poke")
    a = CpuDeviceArray(2**30, np.float32, tail=1024)
    f(a, np.int64(2**30 - 1), block=(1, 1, 1), grid=(1, 1))
    assert a.tail_view()[-1] == 1.0
    with pytest.raises(hc.OutOfBounds, match="does not map"):
        f(a, np.int64(2**29), block=(1, 1, 1), grid=(1, 1))
    with pytest.raises(hc.OutOfBounds, match="past the end"):
        f(a, np.int64(2**30), block=(1, 1, 1), grid=(1, 1))
    with pytest.raises(hc.CudaError, match="tail_view"):
        a.get()


def test_blocks_must_lie_inside_the_grid() -> None:
    f = kernel(VADD, "vadd", ("-DINDEX=int",))
    a = hc.In(np.zeros(4, np.float32))
    with pytest.raises(hc.LaunchError, match="blocks="):
        f(
            a,
            a,
            hc.Out(np.zeros(4, np.float32)),
            np.int32(4),
            block=(4, 1, 1),
            grid=(1, 1),
            blocks=range(1, 2),
        )


# ----------------------------------------------------------------------------- who does the work
SPREAD = """
__global__ void spread(const float* in, float* out, int n) {
    size_t start = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
#ifdef ALONE  // thread 0 of each block copies its block's share, the other threads idle
    if (threadIdx.x != 0) return;
    for (size_t base = start; base < (size_t)n; base += stride)
        for (size_t i = base; i < base + blockDim.x && i < (size_t)n; i++) out[i] = in[i];
#else
    for (size_t i = start; i < (size_t)n; i += stride) out[i] = in[i];
#endif
}
"""


@pytest.mark.parametrize("alone", [False, True])
def test_thread_activity_tells_a_grid_stride_loop_from_one_thread_per_block(alone: bool) -> None:
    f = kernel(SPREAD, "spread", ("-DALONE",) if alone else ())
    n, block, grid = 1000, 64, 3  # 192 threads: ceil(1000 / 192) = 6 elements each at most
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    t = f.trace(hc.In(x), hc.Out(out), np.int32(n), block=(block, 1, 1), grid=(grid, 1))
    np.testing.assert_array_equal(out, x)
    if alone:
        assert t.active_threads["global load"] == grid, t.report()
        assert t.most_per_thread["global load"] > 300, t.report()
    else:
        assert t.active_threads["global load"] == block * grid, t.report()
        assert t.most_per_thread["global load"] == 6, t.report()
        assert t.most_per_thread["global store"] == 6, t.report()
    assert t.active_threads["shared load"] == 0 and t.most_per_thread["shared store"] == 0
    assert "threads that access memory" in t.report()


TOTALS = """
__global__ void totals(const float* in, float* out) {
    __shared__ float warp_totals[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_totals[warp] = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    if (warp == 0) {
#ifdef GUARD
        float v = lane < (int)(blockDim.x / 32) ? warp_totals[lane] : 0.0f;
#else
        float v = warp_totals[lane];  // lanes past the block's warps read what nobody wrote
#endif
        out[blockIdx.x * 32 + lane] = v;
    }
}
"""


@pytest.mark.parametrize("guard", [True, False])
def test_shared_loads_of_words_the_block_never_wrote_are_counted(guard: bool) -> None:
    f = kernel(TOTALS, "totals", ("-DGUARD",) if guard else ())
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(64, np.float32)
    # Two blocks of 64 threads (2 warps): neither writes words 2..31 of warp_totals.
    t = f.trace(hc.In(x), hc.Out(out), block=(64, 1, 1), grid=(2, 1))
    assert t.uninitialised_shared == (0 if guard else 2 * 30), t.report()


def test_an_atomic_on_a_word_nobody_wrote_reads_it() -> None:
    source = """
    __global__ void acc(const float* in, float* out) {
        __shared__ float total;
    #ifdef INIT
        if (threadIdx.x == 0) total = 0.0f;
        __syncthreads();
    #endif
        atomicAdd(&total, in[threadIdx.x]);
        __syncthreads();
        if (threadIdx.x == 0) out[blockIdx.x] = total;
    }
    """
    for init, want in ((True, 0), (False, 1)):
        f = kernel(source, "acc", ("-DINIT",) if init else ())
        x = np.ones(32, np.float32)
        out = np.zeros(1, np.float32)
        t = f.trace(hc.In(x), hc.Out(out), block=(32, 1, 1), grid=(1, 1))
        assert t.uninitialised_shared == want, (init, t.report())
