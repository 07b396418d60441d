"""Public tests of hal, task threads: many threads at once, one backend entered by one thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

THREADS = """
import threading, struct
assert hal.init() == 0, hal.last_error()
st, m = hal.module_load(0, {kernels!r})
errors, handles = [], []
def work(t):
    try:
        st, f = hal.module_function(m, "inc")
        st, x = hal.mem_alloc(0, 64)
        handles.append(x)
        hal.memcpy_htod(x, 0, struct.pack("<16i", *([t] * 16)))
        for i in range({rounds}):
            assert hal.launch(f, (1, 1, 1), (4, 1, 1), [("mem", x), ("i32", 16)]) == 0
            st, y = hal.mem_alloc(0, 128); handles.append(y)
            hal.memcpy_htod(y, 0, bytes([t]) * 128)
            assert hal.memcpy_dtoh(y, 0, 128)[1] == bytes([t]) * 128, "another thread's bytes"
            assert hal.mem_free(y) == 0
        got = struct.unpack("<16i", hal.memcpy_dtoh(x, 0, 64)[1])
        assert got == tuple([t + {rounds}] * 16), (t, got)
    except AssertionError as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(t,)) for t in range({threads})]
for t in ts: t.start()
for t in ts: t.join()
out["errors"] = errors
out["unique"] = len(set(handles)) == len(handles)
"""


def test_threads_many_threads_at_once(hal: Any, built: Any, backends: Any) -> None:
    d = backends({"libhal_cpu.so": (built.cpu, None)})
    out = hal(
        f"halpy.require_started({str(built.cpu)!r}, 'hal_cpu.c')\n"
        + THREADS.format(kernels=str(built.kernels), rounds=40, threads=8),
        [d],
    )
    assert out["errors"] == [], f"threads saw each other's work: {out['errors'][:3]}"
    assert out["unique"], "two threads were handed the same handle"


def test_threads_backend_entered_by_one_thread_at_a_time(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    d = backends({"libhal_p.so": (built.probe, {"name": "p", "dwell_us": 300, "log": log})})
    out = hal(THREADS.format(kernels=str(built.kernels), rounds=6, threads=6), [d])
    assert out["errors"] == [], out["errors"][:3]
    overlaps = sorted(
        {ln.split()[3] for ln in log.read_text().splitlines() if ln.split()[2] == "concurrent"}
    )
    assert not overlaps, (
        f"a backend without HAL_CAP_THREADSAFE was entered by two threads at once, in: {overlaps}"
    )
