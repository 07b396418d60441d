"""Public tests of hal: real programs (Python through cffi in a child process, and C programs)
drive your libhal.so over backends in a directory named by KATA_HAL_PATH."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

N = {
    "SUCCESS": 0, "INVALID_VALUE": 1, "NOT_INITIALIZED": 2, "NO_BACKEND": 3, "INVALID_HANDLE": 5,
    "INVALID_DEVICE": 6, "NOT_SUPPORTED": 7, "NOT_FOUND": 8, "BACKEND_LOAD": 11,
    "ABI_MISMATCH": 12, "BACKEND_INIT": 13, "BACKEND_CRASHED": 14,
}  # fmt: skip


def probe(name: str, **conf: Any) -> dict[str, Any]:
    return {"name": name, **conf}


# --------------------------------------------------------------------------- loader
def test_loader_finds_backends_in_name_order(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    d = backends({
        "libhal_zeta.so": (built.probe, probe("zeta", devices=1)),
        "libhal_alpha.so": (built.probe, probe("alpha", devices=2)),
        "not_a_backend.so": (built.probe, probe("ignored")),
    })  # fmt: skip
    out = hal(
        """
out["before"] = hal.device_count()[0]
out["init"] = hal.init()
out["again"] = hal.init()
out["backends"] = hal.backends()
out["devices"] = hal.devices()
""",
        [d],
    )
    assert out["before"] == N["NOT_INITIALIZED"], (
        "hal_device_count before hal_init: HAL_ERROR_NOT_INITIALIZED"
    )
    assert out["init"] == 0 and out["again"] == 0, f"hal_init (twice) should succeed: {out}"
    names = [b["name"] for b in out["backends"]]
    assert names == ["alpha", "zeta"], (
        f"backends in file-name order, only libhal_*.so files: got {names}"
    )
    assert [b["status"] for b in out["backends"]] == [0, 0], out["backends"]
    assert [b["ndevices"] for b in out["backends"]] == [2, 1], out["backends"]
    assert len(out["devices"]) == 3, f"3 devices in all: {out['devices']}"


def test_loader_refuses_broken_backends_and_survives(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    d = backends({
        "libhal_a_nosym.so": (built.broken["nosym"], None),
        "libhal_b_major.so": (built.broken["major"], None),
        "libhal_c_initfail.so": (built.broken["initfail"], None),
        "libhal_d_crash.so": (built.broken["crash"], None),
        "libhal_e_good.so": (built.probe, probe("good")),
    })  # fmt: skip
    (d / "libhal_f_garbage.so").write_bytes(b"not an ELF file")
    out = hal(
        "out['init'] = hal.init(); out['backends'] = hal.backends(); out['devices'] = hal.devices()",
        [d],
    )
    assert out["init"] == 0, f"one good backend is enough: hal_init must succeed, got {out['init']}"
    got = {Path(b["path"]).name: b["status"] for b in out["backends"]}
    want = {
        "libhal_a_nosym.so": N["BACKEND_LOAD"], "libhal_b_major.so": N["ABI_MISMATCH"],
        "libhal_c_initfail.so": N["BACKEND_INIT"], "libhal_d_crash.so": N["BACKEND_CRASHED"],
        "libhal_e_good.so": 0, "libhal_f_garbage.so": N["BACKEND_LOAD"],
    }  # fmt: skip
    assert got == want, f"each backend's status (hal_backend_info): expected {want}, got {got}"
    major = next(b for b in out["backends"] if b["path"].endswith("major.so"))
    assert "2" in major["message"] and "1" in major["message"], (
        f"the refusal of an ABI 2.0 backend names both majors: {major['message']!r}"
    )
    assert [x["backend"] for x in out["devices"]] == ["good"], out["devices"]


def test_loader_no_backend(hal: Any, built: Any, backends: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = backends({"libhal_x.so": (built.broken["initfail"], None)}, "bad")
    script = "out['init'] = hal.init(); out['last'] = hal.last_error(); out['count'] = hal.device_count()[0]"
    for path in ([empty], [bad], [tmp_path / "missing"]):
        out = hal(script, path)
        assert out["init"] == N["NO_BACKEND"], (
            f"KATA_HAL_PATH={path}: HAL_ERROR_NO_BACKEND, got {out}"
        )
        assert out["last"], "hal_last_error says why hal_init failed"
        assert out["count"] == N["NOT_INITIALIZED"], (
            "a failed hal_init leaves the HAL uninitialised"
        )


def test_loader_backends_are_local(hal: Any, built: Any, backends: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    d = backends({
        "libhal_one.so": (built.probe, probe("one", log=log)),
        "libhal_two.so": (built.probe, probe("two", log=log)),
    })  # fmt: skip
    out = hal("out['init'] = hal.init(); out['names'] = [b['name'] for b in hal.backends()]", [d])
    assert out["names"] == ["one", "two"], f"each copy's own entry symbol, own table: {out}"
    lines = log.read_text().splitlines()
    assert not [ln for ln in lines if ln.endswith(" global")], (
        "a backend found its symbols in the global namespace: dlopen backends with RTLD_LOCAL"
    )


def test_loader_error_strings(hal: Any, names: dict[str, int], tmp_path: Path) -> None:
    out = hal(
        "out['names'] = {s: hal.error_name(s) for s in list(range(15)) + [77, 1000]}\n"
        "out['strings'] = {s: hal.error_string(s) for s in list(range(15)) + [77, 1000]}",
        [tmp_path],
    )
    for value, name in ((v, k) for k, v in names.items() if k != "HAL_ERROR_TODO"):
        assert out["names"][str(value)] == name, (
            f"hal_error_name({value}) should be {name!r}: {out['names'][str(value)]!r}"
        )
        text = out["strings"][str(value)]
        assert text and text != "<NULL>" and text != name, (
            f"hal_error_string({value}) is a sentence: {text!r}"
        )
    for unknown in ("77", "1000"):
        assert out["names"][unknown] != "<NULL>" and out["strings"][unknown] != "<NULL>", (
            "hal_error_name/hal_error_string never return NULL, not even for an unknown code"
        )


# --------------------------------------------------------------------------- cpu
CPU_START = (
    "halpy.require_started({cpu!r}, 'hal_cpu.c')\nassert hal.init() == 0, hal.last_error()\n"
)


def cpu_dir(backends: Any, built: Any) -> Path:
    return backends({"libhal_cpu.so": (built.cpu, None)}, "cpu")


def test_cpu_vector_add_through_the_hal(hal: Any, built: Any, backends: Any) -> None:
    out = hal(
        CPU_START.format(cpu=str(built.cpu))
        + f"""
import array
n = 1000
a = array.array("f", [i * 0.25 for i in range(n)]); b = array.array("f", [3.0 - i for i in range(n)])
st, da = hal.mem_alloc(0, 4 * n); st, db = hal.mem_alloc(0, 4 * n); st, dc = hal.mem_alloc(0, 4 * n)
hal.memcpy_htod(da, 0, a.tobytes()); hal.memcpy_htod(db, 0, b.tobytes())
st, m = hal.module_load(0, {str(built.kernels)!r}); out["load"] = st
st, f = hal.module_function(m, "vector_add"); out["function"] = st
out["launch"] = hal.launch(f, (3, 1, 1), (128, 1, 1), [("mem", da), ("mem", db), ("mem", dc), ("i32", n)])
st, raw = hal.memcpy_dtoh(dc, 0, 4 * n)
c = array.array("f"); c.frombytes(raw)
out["wrong"] = [i for i in range(n) if c[i] != a[i] + b[i]][:5]
out["device"] = hal.devices()[0]
""",
        [cpu_dir(backends, built)],
    )
    assert (out["load"], out["function"], out["launch"]) == (0, 0, 0), out
    assert out["wrong"] == [], f"vector_add through the HAL: wrong elements at {out['wrong']}"
    assert out["device"]["backend"] == "cpu", out["device"]


def test_cpu_memory_handles_and_bounds(hal: Any, built: Any, backends: Any) -> None:
    out = hal(
        CPU_START.format(cpu=str(built.cpu))
        + """
st, m = hal.mem_alloc(0, 40)
out["size"] = hal.mem_size(m)
out["put"] = hal.memcpy_htod(m, 8, bytes(range(1, 17)))
out["get"] = list(hal.memcpy_dtoh(m, 4, 24)[1])
out["past_end"] = hal.memcpy_htod(m, 32, bytes(9))
out["huge_offset"] = hal.memcpy_dtoh(m, 2**64 - 4, 8)[0]
out["exact_end"] = hal.memcpy_htod(m, 32, bytes(8))
out["zero_alloc"] = hal.mem_alloc(0, 0)[0]
out["bad_device"] = hal.mem_alloc(7, 16)[0]
out["free"] = hal.mem_free(m)
out["double_free"] = hal.mem_free(m)
out["stale_copy"] = hal.memcpy_htod(m, 0, b"x")
out["zero_handle"] = hal.mem_size(0)[0]
st, s = hal.stream_create(0)
out["stream_as_mem"] = hal.mem_free(s)
""",
        [cpu_dir(backends, built)],
    )
    assert out["size"] == [0, 40], f"hal_mem_size: {out['size']}"
    assert out["put"] == 0 and out["get"][4:20] == list(range(1, 17)), (
        f"bytes 8..24 hold what was copied in: {out['get']}"
    )
    assert (out["past_end"], out["huge_offset"]) == (N["INVALID_VALUE"], N["INVALID_VALUE"]), (
        f"a copy past the end is HAL_ERROR_INVALID_VALUE (offset + size must not wrap): {out}"
    )
    assert out["exact_end"] == 0, "a copy that ends exactly at the end is fine"
    assert (out["zero_alloc"], out["bad_device"]) == (N["INVALID_VALUE"], N["INVALID_DEVICE"]), out
    assert out["free"] == 0
    assert (out["double_free"], out["stale_copy"], out["zero_handle"], out["stream_as_mem"]) == (
        N["INVALID_HANDLE"],) * 4, f"freed, zero and wrong-kind handles: HAL_ERROR_INVALID_HANDLE: {out}"  # fmt: skip


def test_cpu_modules_and_kernel_arguments(hal: Any, built: Any, backends: Any) -> None:
    out = hal(
        CPU_START.format(cpu=str(built.cpu))
        + f"""
import struct
out["missing_file"] = hal.module_load(0, "/nonexistent/kernels.so")[0]
st, m = hal.module_load(0, {str(built.kernels)!r})
out["missing_kernel"] = hal.module_function(m, "no_such_kernel")[0]
st, f = hal.module_function(m, "iota3d")
grid, block = (3, 2, 2), (4, 2, 3)
n = 3 * 2 * 2 * 4 * 2 * 3
st, o = hal.mem_alloc(0, 4 * n)
out["launch"] = hal.launch(f, grid, block, [("mem", o), ("u32", 7), ("u64", 2**33 + 5)])
out["iota"] = list(struct.unpack(f"<{{n}}I", hal.memcpy_dtoh(o, 0, 4 * n)[1]))
out["zero_grid"] = hal.launch(f, (0, 1, 1), block, [("mem", o), ("u32", 7), ("u64", 5)])
out["bad_size"] = hal.launch(f, grid, block, [("mem", o), ("u32", 7), ("mem", 12345)])
out["unload"] = hal.module_unload(m)
out["after_unload"] = hal.launch(f, grid, block, [("mem", o), ("u32", 7), ("u64", 5)])
""",
        [cpu_dir(backends, built)],
    )
    assert (out["missing_file"], out["missing_kernel"]) == (N["NOT_FOUND"], N["NOT_FOUND"]), out
    assert out["launch"] == 0, out
    n = len(out["iota"])
    want = [(i * 7 + 2**33 + 5) % 2**32 for i in range(n)]
    assert out["iota"] == want, (
        "iota3d over a 3-D grid of 3-D blocks: every thread ran once with its own indices"
    )
    assert out["zero_grid"] == N["INVALID_VALUE"], (
        "a grid dimension of 0 is HAL_ERROR_INVALID_VALUE"
    )
    assert out["bad_size"] == N["INVALID_HANDLE"], (
        "a HAL_ARG_MEM argument that is no buffer: INVALID_HANDLE"
    )
    assert out["unload"] == 0 and out["after_unload"] == N["INVALID_HANDLE"], (
        "after hal_module_unload its functions are invalid handles"
    )


def test_cpu_c_program_under_valgrind(c_program: Any, built: Any, backends: Any) -> None:
    d = cpu_dir(backends, built)
    proc = c_program("vadd_demo.c", [d], str(built.kernels), "vector_add", "5000")
    if proc.returncode == 99:
        from harness import todo

        todo(f"vadd_demo.c: {proc.stdout.strip()}")
    assert proc.returncode == 0, (
        f"vadd_demo exited {proc.returncode}: {proc.stdout}{proc.stderr[-1500:]}"
    )
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip(
            "valgrind is not installed (apt-get install valgrind): the memcheck run is skipped"
        )
    proc = c_program(
        "vadd_demo.c", [d], str(built.kernels), "vector_add", "300",
        wrapper=[valgrind, "-q", "--error-exitcode=77", "--leak-check=full", "--errors-for-leak-kinds=definite"],
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"vadd_demo under valgrind memcheck: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    )
