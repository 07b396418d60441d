"""The `cuda` pytest fixture (registered by harness.plugin): kata .cu files on the cpu or gpu backend.

    def test_vadd(cuda):
        f = cuda.module("vadd.cu").get_function("vadd")
        f(cuda.In(a), cuda.In(b), cuda.Out(c), np.int32(n), block=(256, 1, 1), grid=(4, 1))

See docs/cuda.md for the whole API.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import harness.cuda as hc
import harness.cuda.bindings  # noqa: F401 - imported before any test: harness.sandbox's guard
import harness.cuda.cpu.backend
import harness.cuda.cpu.trace
import harness.cuda.gpu  # imported before any test: harness.sandbox's guard
from harness.api import capabilities, kata_context
from harness.cuda import sanitizer
from harness.cuda.args import In, InOut, Out
from harness.cuda.errors import CudaCompileError
from harness.loader import KataLoadError
from harness.manifest import ManifestError
from harness.native import includes

__all__ = ["CudaSession", "cuda", "cuda_gpu"]

_MODULES: dict[tuple[Any, ...], Any] = {}  # one build/load per source and options per process


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("gpu-katas").addoption(
        "--kata-cuda-backend",
        choices=("auto", "cpu", "gpu"),
        default="auto",
        help="backend of the `cuda` fixture: auto (gpu when the gpu tier is present), cpu, gpu",
    )
    parser.getgroup("gpu-katas").addoption(
        "--kata-cuda-sanitize",
        choices=sanitizer.TOOLS,
        default=None,
        help="run every gpu-backend launch under compute-sanitizer --tool racecheck|memcheck "
        "(in a subprocess; findings fail the test)",
    )


def pytest_configure(config: pytest.Config) -> None:
    tool = config.getoption("--kata-cuda-sanitize", None)
    try:
        sanitizer.configure(tool)
    except hc.CudaError as e:
        raise pytest.UsageError(str(e)) from None


class CudaSession:
    """What the `cuda` fixture gives a test. `backend` is "cpu" or "gpu"."""

    In = In
    Out = Out
    InOut = InOut
    CudaError = hc.CudaError
    CudaCompileError = hc.CudaCompileError
    LaunchError = hc.LaunchError
    KernelError = hc.KernelError
    OutOfBounds = hc.OutOfBounds
    BarrierDeadlock = hc.BarrierDeadlock
    KernelCrash = hc.KernelCrash
    KernelTimeout = hc.KernelTimeout
    RaceDetected = hc.RaceDetected
    SanitizerError = hc.SanitizerError

    def __init__(
        self,
        backend: str,
        resolve: Any = None,
        search_dirs: Sequence[Path] = (),
        timeout: float = 20.0,
    ) -> None:
        if backend not in hc.BACKENDS:
            raise ValueError(f"backend must be one of {hc.BACKENDS}, not {backend!r}")
        self.backend = backend
        self._resolve = resolve
        self._search_dirs = [Path(d) for d in search_dirs]
        self.timeout = timeout

    def path(self, name: str) -> Path:
        """The kata file `name` of the current implementation (learner's, or the reference)."""
        p = Path(name)
        if p.is_absolute():
            return p
        if self._resolve is not None:
            return Path(self._resolve(name))
        for d in self._search_dirs:
            if (d / name).exists():
                return d / name
        raise FileNotFoundError(f"{name} not found in {', '.join(map(str, self._search_dirs))}")

    def module(
        self,
        name: str,
        options: Sequence[str] = (),
        no_extern_c: bool = False,
        backend: str | None = None,
    ) -> Any:
        """SourceModule of the kata file `name`; backend="cpu" forces the cpu backend."""
        path = self.path(name)
        source = path.read_text(encoding="utf-8")
        refused = includes.refusal([path])
        if refused:  # `#include "../../kernel.cu"` from a shortcut would compile the reference
            raise CudaCompileError(refused, log=refused, command=())
        return self.source_module(
            source,
            options,
            no_extern_c,
            backend=backend,
            name=path.name,
            include_dirs=[path.parent],
        )

    def source_module(
        self,
        source: str,
        options: Sequence[str] = (),
        no_extern_c: bool = False,
        *,
        backend: str | None = None,
        name: str = "kernel.cu",
        include_dirs: Sequence[Path | str] = (),
    ) -> Any:
        backend = backend or self.backend
        dirs = tuple(str(d) for d in include_dirs)
        key = (source, tuple(options), no_extern_c, backend, name, dirs, self.timeout)
        if key not in _MODULES:
            kw: dict[str, Any] = {"timeout": self.timeout} if backend == "cpu" else {}
            _MODULES[key] = hc.SourceModule(
                source,
                options,
                no_extern_c,
                backend=backend,
                name=name,
                include_dirs=dirs,
                **kw,
            )
        return _MODULES[key]

    def to_device(self, a: Any) -> Any:
        return hc.to_device(a, backend=self.backend)

    def zeros(self, shape: Any, dtype: Any = "float32") -> Any:
        return hc.zeros(shape, dtype, backend=self.backend)

    def empty(self, shape: Any, dtype: Any = "float32") -> Any:
        return hc.empty(shape, dtype, backend=self.backend)

    def tail_array(self, n: int, dtype: Any = "float32", tail: int = 4096) -> Any:
        """A cpu-backend device array of `n` elements of which only the last `tail` exist (a
        guard page before the start and after the end; any other access is OutOfBounds). For
        probes of a huge grid's last block (`f(..., blocks=range(last, last + 1))`): 2**31
        floats cost a few pages. `.tail_view()` reads and writes those elements."""
        from harness.cuda.cpu.backend import CpuDeviceArray

        return CpuDeviceArray(n, dtype, tail=tail)

    def device_peak(self) -> Any:
        """The device's peak bandwidth and FP32 FLOP rate (a harness.physics.Peak), for
        ``kata_budget.compare(..., moves=, flops=, peak=)`` and the report; None on the cpu
        backend or when the driver reports no clocks. On the gpu backend it asks the driver."""
        from harness import physics

        if self.backend != "gpu":
            return None
        try:
            attrs = harness.cuda.gpu.device_attributes()
        except Exception:  # a driver without attribute queries: no bound rather than a wrong one
            return None
        return physics.gpu_peak(attrs)

    def check_races(self, f: Any, *args: Any, **kw: Any) -> None:
        hc.check_races(f, *args, **kw)

    def trace(self, f: Any, *args: Any, **kw: Any) -> Any:
        if not hasattr(f, "trace"):
            raise hc.CudaError(
                "memory tracing needs the cpu backend: cuda.module(..., backend='cpu')"
            )
        return f.trace(*args, **kw)


def _choose_backend(config: pytest.Config) -> str:
    wanted = config.getoption("--kata-cuda-backend", "auto")
    if wanted != "auto":
        return wanted
    caps = capabilities(config)
    return "gpu" if caps is not None and caps.has_tier("gpu") else "cpu"


@pytest.fixture(scope="module")
def cuda(request: pytest.FixtureRequest) -> CudaSession:
    """CUDA for this test's kata: `cuda.module("vadd.cu")`, `cuda.In(a)`, `cuda.backend`."""
    backend = _choose_backend(request.config)
    resolve = None
    timeout = 20.0
    try:
        ctx = kata_context(request.config, request.path)
    except (KataLoadError, ManifestError):  # not inside a kata: files resolve beside the test
        ctx = None
    if ctx is not None:
        resolve = ctx.source
        limit = getattr(ctx.manifest, "time_limit", 0) or 0
        timeout = max(1.0, min(timeout, 0.8 * limit)) if limit else timeout
    return CudaSession(backend, resolve, [request.path.parent], timeout)


@pytest.fixture(scope="module")
def cuda_gpu(cuda: CudaSession) -> CudaSession:
    """The `cuda` fixture for gpu-tier tests: skips, saying why, unless it runs on a real GPU."""
    if cuda.backend != "gpu":
        pytest.skip("the cuda fixture is on the cpu backend here (--kata-cuda-backend=cpu)")
    if harness.cuda.gpu.available_driver() is None:
        pytest.skip(
            "the gpu backend needs CuPy (pip install cupy-cuda12x), cuda-bindings or pycuda"
        )
    return cuda
