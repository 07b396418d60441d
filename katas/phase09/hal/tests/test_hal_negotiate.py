"""Public tests of hal, task negotiate: the previous minor's tables, capabilities and stream
emulation, priority and fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STREAMS, MEMSET, THREADSAFE, EMULATED = 1, 2, 4, 8
NOT_SUPPORTED = 7

PROGRAM = """
import struct
assert hal.init() == 0, hal.last_error()
out["devices"] = hal.devices()
st, m = hal.module_load(0, {kernels!r})
st, f = hal.module_function(m, "affine")
st, x = hal.mem_alloc(0, 4 * 10)
hal.memcpy_htod(x, 0, struct.pack("<10i", *range(10)))
st, s = hal.stream_create(0); out["stream"] = st
st, e = hal.event_create(0); out["event"] = st
out["launches"] = [hal.launch(f, (1, 1, 1), (4, 1, 1), [("mem", x), ("i32", 10), ("i32", mul), ("i16", add), ("u8", 0)], s)
                   for mul, add in ((2, 1), (3, 0), (1, -5))]
out["record"] = hal.event_record(e, s)
out["query"] = hal.event_query(e)
out["sync"] = [hal.event_synchronize(e), hal.stream_synchronize(s), hal.stream_synchronize(0)]
out["x"] = list(struct.unpack("<10i", hal.memcpy_dtoh(x, 0, 40)[1]))
out["memset"] = hal.memset(x, 0, 0, 4)
out["destroy"] = [hal.event_destroy(e), hal.stream_destroy(s)]
"""


def affine3(v: int) -> int:
    return ((v * 2 + 1) * 3 + 0) * 1 - 5


def calls(log: Path, name: str) -> list[str]:
    return [
        ln.split()[3]
        for ln in log.read_text().splitlines()
        if ln.split()[1] == name and ln.split()[2] == "call"
    ]


def test_negotiate_previous_header_backend_loads(hal: Any, built: Any, backends: Any) -> None:
    """A backend built against hal_backend_1_0.h (120-byte table, claims streams and memset)."""
    d = backends({"libhal_legacy.so": (built.legacy, None)})
    out = hal(PROGRAM.format(kernels=str(built.kernels)), [d])
    dev = out["devices"][0]
    assert dev["backend"] == "legacy", out["devices"]
    assert dev["caps"] & EMULATED and not dev["caps"] & (STREAMS | MEMSET), (
        f"a 1.0 table has no streams and no memset, whatever its caps say: device caps {dev['caps']}"
    )
    assert out["launches"] == [0, 0, 0] and out["x"] == [affine3(v) for v in range(10)], (
        f"launches on an emulated stream run, in order: {out}"
    )
    assert out["memset"] == NOT_SUPPORTED, (
        "hal_memset on a backend without memset: HAL_ERROR_NOT_SUPPORTED"
    )


def test_negotiate_emulates_streams(hal: Any, built: Any, backends: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    d = backends({"libhal_p.so": (built.probe, {"name": "p", "caps": MEMSET, "log": log})})
    out = hal(PROGRAM.format(kernels=str(built.kernels)), [d])
    assert out["devices"][0]["caps"] == EMULATED | MEMSET, out["devices"]
    assert (out["stream"], out["event"], out["record"], out["query"]) == (0, 0, 0, 0), out
    assert out["sync"] == [0, 0, 0] and out["destroy"] == [0, 0], out
    assert out["x"] == [affine3(v) for v in range(10)], (
        "the three launches ran on the stream, in order"
    )
    seen = set(calls(log, "p"))
    assert not seen & {"stream_create", "event_create", "event_record", "launch_stream"}, (
        f"a backend without HAL_CAP_STREAMS never gets stream calls (the core emulates them): {sorted(seen)}"
    )
    assert out["memset"] == 0 and "memset" in seen, (
        "HAL_CAP_MEMSET and a memset entry: hal_memset uses it"
    )


def test_negotiate_native_streams_are_used(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    d = backends({"libhal_p.so": (built.probe, {"name": "p", "caps": STREAMS, "log": log})})
    out = hal(PROGRAM.format(kernels=str(built.kernels)), [d])
    assert out["devices"][0]["caps"] == STREAMS, out["devices"]
    seen = calls(log, "p")
    for entry in (
        "stream_create",
        "event_create",
        "launch_stream",
        "event_record",
        "event_query",
        "stream_destroy",
    ):
        assert entry in seen, (
            f"a backend with HAL_CAP_STREAMS and the stream entries gets {entry}: {seen}"
        )
    assert out["memset"] == NOT_SUPPORTED, "memset without HAL_CAP_MEMSET: HAL_ERROR_NOT_SUPPORTED"


def test_negotiate_priority_and_fallback(hal: Any, built: Any, backends: Any) -> None:
    d = backends({
        "libhal_cpu.so": (built.cpu, None),
        "libhal_fast.so": (built.probe, {"name": "fast", "priority": 50}),
    })  # fmt: skip
    script = "assert hal.init() == 0, hal.last_error()\nout['order'] = [x['backend'] for x in hal.devices()]"
    out = hal(f"halpy.require_started({str(built.cpu)!r}, 'hal_cpu.c')\n" + script, [d])
    assert out["order"] == ["fast", "cpu"], (
        f"the higher priority's devices come first: {out['order']}"
    )
    (d / "libhal_fast.so.conf").write_text("name=fast\npriority=50\ninit=fail\n")
    out = hal(script, [d])
    assert out["order"] == ["cpu"], (
        f"when the preferred backend fails, the other one serves: {out['order']}"
    )
