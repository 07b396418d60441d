"""Public tests of hal, task cuda: phase 02's vector_add through your HAL on your backend over
the harness's cpu CUDA runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

VADD = """
import array
halpy.require_started({cuda!r}, "hal_cuda.c")
assert hal.init() == 0, hal.last_error()
out["devices"] = hal.devices()
n = {n}
a = array.array("f", [i * 0.5 for i in range(n)]); b = array.array("f", [2.0 - i for i in range(n)])
st, da = hal.mem_alloc(0, 4 * n); st, db = hal.mem_alloc(0, 4 * n); st, dc = hal.mem_alloc(0, 4 * n)
hal.memcpy_htod(da, 0, a.tobytes()); hal.memcpy_htod(db, 0, b.tobytes())
st, m = hal.module_load(0, {kernels!r}); out["load"] = st
st, f = hal.module_function(m, "vector_add"); out["function"] = st
out["launch"] = hal.launch(f, (4, 1, 1), (64, 1, 1), [("mem", da), ("mem", db), ("mem", dc), ("i32", n)])
c = array.array("f"); c.frombytes(hal.memcpy_dtoh(dc, 0, 4 * n)[1])
out["wrong"] = [i for i in range(n) if c[i] != a[i] + b[i]][:5]
st, g = hal.module_function(m, "read_past_end")
out["oob"] = hal.launch(g, (n // 64 + 1, 1, 1), (64, 1, 1), [("mem", da), ("mem", dc), ("i32", n)])
out["after_oob"] = hal.memcpy_dtoh(dc, 0, 4)[0]
out["shutdown"] = hal.shutdown()
"""


def test_cuda_vector_add_runs_through_the_hal(
    hal: Any, built: Any, backends: Any, cuda_vendor: dict[str, Path]
) -> None:
    d = backends({"libhal_cuda.so": (built.cuda, None)})
    out = hal(
        VADD.format(cuda=str(built.cuda), kernels=str(cuda_vendor["kernels"]), n=1024), [d],
        env={"KATA_CUDA_RUNTIME": str(cuda_vendor["runtime"])},
    )  # fmt: skip
    assert out["devices"][0]["backend"] == "cuda", out["devices"]
    assert (out["load"], out["function"], out["launch"]) == (0, 0, 0), out
    assert out["wrong"] == [], f"vector_add on the cuda backend: wrong elements at {out['wrong']}"
    assert out["shutdown"] == 0, (
        "hal_shutdown frees the buffers still allocated on the cuda backend"
    )
    assert out["oob"] == 9 and out["after_oob"] == 0, (
        f"a kernel that reads past its buffer fails its launch (HAL_ERROR_LAUNCH_FAILED) and the process goes on: {out}"
    )


def test_cuda_no_driver_falls_back_to_cpu(hal: Any, built: Any, backends: Any) -> None:
    d = backends({"libhal_cuda.so": (built.cuda, None), "libhal_cpu.so": (built.cpu, None)})
    out = hal(
        f"halpy.require_started({str(built.cuda)!r}, 'hal_cuda.c')\n"
        "assert hal.init() == 0, hal.last_error()\n"
        "out['backends'] = {b['name'] or b['path']: b['status'] for b in hal.backends()}\n"
        "out['order'] = [x['backend'] for x in hal.devices()]",
        [d],
        env={"KATA_CUDA_RUNTIME": "/nonexistent/libcuda-runtime.so"},
    )
    assert out["order"] == ["cpu"], (
        f"without the vendor runtime the cuda backend's init fails and cpu serves: {out}"
    )
