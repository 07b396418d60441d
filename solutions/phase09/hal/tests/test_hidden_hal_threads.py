"""Hidden tests of hal, task threads: random mixes of every entry point from several threads on
a backend that counts overlapping calls; hal_init raced; a C stress program under
ThreadSanitizer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.testing import random_for

MIX = """
import threading, struct, json, os
plan = json.loads(PLAN)
barrier = threading.Barrier(len(plan))
errors, inits, todos = [], [], []
def work(t, ops):
    try:
        barrier.wait()
        inits.append(hal.init())
        st, m = hal.module_load(0, KERNELS)
        st, f = hal.module_function(m, "inc")
        st, x = hal.mem_alloc(0, 64)
        assert hal.memcpy_htod(x, 0, struct.pack("<16i", *([t] * 16))) == 0
        st, s = hal.stream_create(0)
        st, e = hal.event_create(0)
        expect = t
        for op in ops:
            if op == "launch":
                assert hal.launch(f, (1, 1, 1), (4, 1, 1), [("mem", x), ("i32", 16)], s) == 0, "launch"
                expect += 1
            elif op == "copy":
                st, y = hal.mem_alloc(0, 96)
                hal.memcpy_htod(y, 0, bytes([t]) * 96)
                assert hal.memcpy_dtoh(y, 0, 96)[1] == bytes([t]) * 96, "another thread's bytes"
                assert hal.mem_free(y) == 0, "mem_free"
            elif op == "memset":
                st, y = hal.mem_alloc(0, 32)
                assert hal.memset(y, 0, t, 32) == 0, "memset"
                assert hal.memcpy_dtoh(y, 0, 32)[1] == bytes([t]) * 32, "memset bytes"
                hal.mem_free(y)
            elif op == "event":
                hal.event_record(e, s); hal.event_query(e); hal.event_synchronize(e)
            elif op == "stream":
                st, s2 = hal.stream_create(0); hal.stream_synchronize(s2); hal.stream_destroy(s2)
            elif op == "module":
                st, m2 = hal.module_load(0, KERNELS); st, g = hal.module_function(m2, "inc"); hal.module_unload(m2)
            elif op == "info":
                hal.devices(); hal.backends(); hal.mem_size(x)
        hal.stream_synchronize(s)
        got = struct.unpack("<16i", hal.memcpy_dtoh(x, 0, 64)[1])
        assert got == tuple([expect] * 16), f"thread {t}: {got[:3]}, expected {expect}"
    except AssertionError as err:
        errors.append(f"thread {t}: {err!r}")
    except halpy.Todo as todo:
        todos.append(str(todo))
ts = [threading.Thread(target=work, args=(t, ops)) for t, ops in enumerate(plan)]
for t in ts: t.start()
for t in ts: t.join()
if todos:
    raise halpy.Todo(todos[0])
out["errors"] = errors
out["inits"] = inits
out["pid"] = os.getpid()
"""

OPS = ["launch", "copy", "memset", "event", "stream", "module", "info"]


def overlaps(log: Path) -> list[str]:
    return sorted(
        {ln.split()[3] for ln in log.read_text().splitlines() if ln.split()[2] == "concurrent"}
    )


def most_overlapped(log: Path) -> str:
    """The entry point in the most overlaps (both sides counted): the one left unlocked."""
    from collections import Counter

    pairs = [
        ln.split()[3::2] for ln in log.read_text().splitlines() if ln.split()[2] == "concurrent"
    ]
    seen = Counter(e for pair in pairs for e in set(pair))
    if not seen:
        return ""
    entry, n = seen.most_common(1)[0]
    return f"{entry} is in {n} of the {len(pairs)} overlaps"


@pytest.mark.kata_gate(
    "a backend without HAL_CAP_THREADSAFE was entered by two threads at once, under random mixes "
    "of every entry point from several threads"
)
def test_threads_random_mixes_enter_a_backend_one_at_a_time(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    r = random_for("mixes")
    for trial in range(2):
        log = tmp_path / f"log{trial}"
        caps = 2 | (1 if trial else 0)  # memset; native streams in one of the two
        d = backends(
            {
                "libhal_p.so": (
                    built.probe,
                    {"name": "p", "caps": caps, "dwell_us": r.choice([150, 250]), "log": log},
                )
            },
            f"t{trial}",
        )
        nthreads = r.randint(4, 7)
        plan = [[r.choice(OPS) for _ in range(r.randint(12, 20))] for _ in range(nthreads)]
        out = hal(
            f"KERNELS = {str(built.kernels)!r}\nPLAN = {json.dumps(json.dumps(plan))}\n" + MIX, [d]
        )
        assert out["errors"] == [], f"{nthreads} threads (caps {caps}): {out['errors'][:3]}"
        found = overlaps(log)
        assert not found, (
            f"{nthreads} threads, caps {caps}: calls into the backend overlapped in {found}; "
            f"{most_overlapped(log)}"
        )
        inits = [
            ln
            for ln in log.read_text().splitlines()
            if ln.split()[0] == str(out["pid"]) and ln.endswith("call init")
        ]
        assert out["inits"] == [0] * nthreads and len(inits) == 1, (
            f"{nthreads} threads called hal_init at once: each must succeed ({out['inits']}) and the "
            f"backend be initialised once in the process, not {len(inits)} times"
        )


@pytest.mark.kata_gate("the C stress program under ThreadSanitizer finds a data race in the core")
def test_threads_stress_under_tsan(c_program: Any, built: Any, backends: Any) -> None:
    from harness.native.isolate import tsan_runtime

    if tsan_runtime("cc") is None:
        pytest.skip("gcc has no ThreadSanitizer runtime (libtsan) here: apt-get install gcc")
    r = random_for("tsan")
    d = backends({"libhal_cpu.so": (built.cpu, None)})
    for _ in range(4):  # fresh thread counts; the rounds are barrier-aligned (stress.c)
        n = r.randint(4, 8)
        proc = c_program(
            "stress.c", [d], str(built.kernels), str(n), "200", sanitize="thread", timeout=180
        )
        if proc.returncode == 99:
            from harness import todo

            todo("stress.c: hal_init answered HAL_ERROR_TODO")
        if "FATAL: ThreadSanitizer" in proc.stderr:
            pytest.skip(f"ThreadSanitizer cannot run here: {proc.stderr.strip()[:200]}")
        assert "WARNING: ThreadSanitizer" not in proc.stderr and proc.returncode == 0, (
            f"stress.c ({n} threads) with your hal_core.c under ThreadSanitizer: exit {proc.returncode}\n"
            f"{proc.stdout}{proc.stderr[-3500:]}"
        )
