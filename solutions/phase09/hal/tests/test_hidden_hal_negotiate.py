"""Hidden tests of hal, task negotiate: random tables (minor, struct_size, caps, NULL entries)
against a model of the ABI's rules; the previous header's backend on random programs; the
order of work on emulated streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.testing import random_for

STREAMS, MEMSET, THREADSAFE, EMULATED = 1, 2, 4, 8
NOT_SUPPORTED = 7
HEADER = 24
ENTRIES = [
    "init", "shutdown", "device_count", "device_info", "mem_alloc", "mem_free", "memcpy_htod",
    "memcpy_dtoh", "module_load", "module_unload", "module_function", "launch",
    "stream_create", "stream_destroy", "stream_synchronize", "event_create", "event_destroy",
    "event_record", "event_query", "memset",
]  # fmt: skip
MINOR = {e: (1 if 12 <= i <= 18 else 2 if e == "memset" else 0) for i, e in enumerate(ENTRIES)}
STREAM_ENTRIES = ENTRIES[12:19]


def present(conf: dict[str, Any], entry: str) -> bool:
    """The ABI's rule for one entry: the backend's minor has it, it lies inside struct_size,
    and it is not NULL."""
    end = HEADER + 8 * (ENTRIES.index(entry) + 1)
    return (
        conf["minor"] >= MINOR[entry]
        and end <= conf["size"]
        and entry not in conf["null"].split(",")
    )


# halpy's methods and the backend entries each may call
CALLS = {
    "stream_create": {"stream_create"}, "stream_destroy": {"stream_synchronize", "stream_destroy"},
    "stream_synchronize": {"stream_synchronize"}, "event_create": {"event_create"},
    "event_destroy": {"event_destroy"}, "event_record": {"event_record"},
    "event_query": {"event_query"}, "event_synchronize": {"stream_synchronize"},
    "memset": {"memset"}, "launch": {"launch"}, "devices": {"device_info"}, "init": {"device_info"},
}  # fmt: skip


def crashed_in_absent_entry(err: BaseException, conf: dict[str, Any]) -> str:
    """The halpy method a child crashed in (faulthandler's innermost frame), when it may have
    called an entry this table does not have: a NULL pointer the core called."""
    import re

    frames = re.findall(r"line \d+ in (\w+)", getattr(err, "stderr", ""))
    method = next((f for f in frames if not f.startswith("_")), "")  # halpy's public method
    absent = {e for e in CALLS.get(method, set()) if not present(conf, e)}
    return f"{method} (the table has no {', '.join(sorted(absent))})" if absent else ""


def device_caps(conf: dict[str, Any]) -> int:
    native = bool(conf["caps"] & STREAMS) and all(present(conf, e) for e in STREAM_ENTRIES)
    memset = bool(conf["caps"] & MEMSET) and present(conf, "memset")
    return (
        (STREAMS if native else EMULATED) | (MEMSET if memset else 0) | (conf["caps"] & THREADSAFE)
    )


PROGRAM = """
import struct, json
assert hal.init() == 0, hal.last_error()
out["caps"] = hal.devices()[0]["caps"]
out["props"] = [hal.devices()[0]["name"], hal.devices()[0]["total_mem"]]
st, m = hal.module_load(0, KERNELS)
st, f = hal.module_function(m, "affine")
bufs = {}
res = []
streams = {0: 0}
for op in json.loads(OPS):
    if op[0] == "stream":
        st, s = hal.stream_create(0); streams[op[1]] = s; res.append(st)
    elif op[0] == "buf":
        st, b = hal.mem_alloc(0, 4 * op[2]); bufs[op[1]] = (b, op[2])
        res.append(hal.memcpy_htod(b, 0, struct.pack(f"<{op[2]}i", *op[3])))
    elif op[0] == "launch":
        b, n = bufs[op[1]]
        res.append(hal.launch(f, (1, 1, 1), (op[5], 1, 1), [("mem", b), ("i32", n), ("i32", op[3]), ("i16", op[4]), ("u8", 0)], streams[op[2]]))
    elif op[0] == "memset":
        b, n = bufs[op[1]]
        res.append(hal.memset(b, 0, 0, 4 * n))
    elif op[0] == "event":
        st, e = hal.event_create(0)
        res.append([st, hal.event_record(e, streams[op[1]]), hal.event_query(e), hal.event_synchronize(e), hal.event_destroy(e)])
    elif op[0] == "sync":
        res.append(hal.stream_synchronize(streams[op[1]]))
out["res"] = res
out["final"] = {k: list(struct.unpack(f"<{n}i", hal.memcpy_dtoh(b, 0, 4 * n)[1])) for k, (b, n) in bufs.items()}
out["shutdown"] = hal.shutdown()
"""


def random_program(r: Any) -> tuple[list[Any], dict[str, list[int]]]:
    """Buffers, streams, affine launches (order matters), memsets, events (`expected` gives
    the results and the final contents)."""
    ops: list[Any] = []
    model: dict[str, list[int]] = {}
    nstreams = r.randint(1, 3)
    for s in range(1, nstreams + 1):
        ops.append(["stream", s])
    for b in range(r.randint(1, 3)):
        n = r.randint(1, 40)
        vals = [r.randint(-50, 50) for _ in range(n)]
        ops.append(["buf", f"b{b}", n, vals])
        model[f"b{b}"] = list(vals)
    # One buffer per stream (work on different streams is unordered): buffer b on stream s(b).
    home = {b: r.randint(0, nstreams) for b in model}
    for _ in range(r.randint(4, 14)):
        roll = r.random()
        b = r.choice(list(model))
        if roll < 0.7:
            mul, add = r.randint(-3, 3), r.randint(-20, 20)
            ops.append(["launch", b, home[b], mul, add, r.randint(1, 9)])
        elif roll < 0.8:
            ops.append(["memset", b])
        elif roll < 0.9:
            ops.append(["event", r.randint(0, nstreams)])
        else:
            ops.append(["sync", r.randint(0, nstreams)])
    b = r.choice(list(model))
    ops += [
        ["launch", b, nstreams, 2, 1, 3],
        ["memset", b],
        ["event", nstreams],
    ]  # every kind, always
    return ops, model


def expected(ops: list[Any], caps: int) -> tuple[list[Any], dict[str, list[int]]]:
    res: list[Any] = []
    mem: dict[str, list[int]] = {}
    for op in ops:
        if op[0] == "stream":
            res.append(0)
        elif op[0] == "buf":
            mem[op[1]] = list(op[3])
            res.append(0)
        elif op[0] == "launch":
            mem[op[1]] = [(v * op[3] + op[4] + 2**31) % 2**32 - 2**31 for v in mem[op[1]]]
            res.append(0)
        elif op[0] == "memset":
            if caps & MEMSET:
                mem[op[1]] = [0] * len(mem[op[1]])
            res.append(0 if caps & MEMSET else NOT_SUPPORTED)
        elif op[0] == "event":
            res.append([0, 0, 0, 0, 0])
        else:
            res.append(0)
    return res, mem


def entry_end(entry: str) -> int:
    return HEADER + 8 * (ENTRIES.index(entry) + 1)


def random_table(r: Any, style: str, entry: str = "", rule: str = "") -> dict[str, Any]:
    """A table of one style: "short" (a new minor whose struct_size ends before some of its
    entries, often inside one), "old" (an old minor in a table long enough for newer entries:
    the slots hold garbage), "one-absent" (a full table claiming streams and memset where one
    of those eight entries is absent by one rule: NULL, cut by struct_size, or newer than the
    minor), or "any". Sizes need not be whole slots. A table larger than the core's (184
    bytes) has its bytes past 184 on a guard page that logs a read ("readpast")."""
    null: list[str] = []
    if style == "short":
        minor = r.choice([1, 2, 2, 3])
        size = r.randrange(120, {1: 176}.get(minor, 184))
    elif style == "old":
        minor = r.choice([0, 0, 1])
        size = r.choice([184, 192, 256, r.randrange(176, 264)])
    elif style == "one-absent":
        minor, size = r.choice([2, 3, 6]), r.choice([184, 184, r.randrange(185, 264)])
        if rule == "null":
            null = [entry]
        elif rule == "size":  # the entry starts inside struct_size and ends past it
            size = entry_end(entry) - r.randint(1, 7)
        else:
            minor = 1 if entry == "memset" else 0
        caps = STREAMS | MEMSET | r.choice([0, THREADSAFE])
        return {"minor": minor, "size": size, "caps": caps, "null": ",".join(null)}
    else:
        minor = r.choice([0, 1, 2, 2, 3, 6])
        natural = {0: 120, 1: 176}.get(minor, 184)
        size = r.choice([natural, natural, 120, 176, 184, 200, r.randrange(120, 264)])
    caps = r.randrange(8) | (r.random() < 0.85 and style != "any") * (STREAMS | MEMSET)
    null = [e for e in STREAM_ENTRIES + ["memset", "device_info"] if r.random() < 0.12]
    return {"minor": minor, "size": size, "caps": caps, "null": ",".join(null)}


def read_past(log: Path) -> list[str]:
    """The guard page's log: reads of a larger table past the entries the core knows."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [ln.split(None, 2)[2] for ln in lines if " readpast " in ln]


@pytest.mark.kata_gate(
    "a backend table of a random minor, size, capabilities and NULL entries gets capabilities, "
    "calls or results the ABI's rules do not give"
)
def test_negotiate_random_tables_against_the_rules(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    r = random_for("tables")
    styles = [("short", "", ""), ("short", "", ""), ("old", "", ""), ("old", "", ""),
              ("any", "", ""), ("any", "", "")]  # fmt: skip
    # Each rule that makes a feature's entry absent, every run: memset NULL, partly past
    # struct_size, newer than the minor; a stream entry NULL; event_query partly past the end.
    styles += [("one-absent", "memset", rule) for rule in ("null", "size", "minor")]
    styles += [
        ("one-absent", r.choice(STREAM_ENTRIES), "null"),
        ("one-absent", "event_query", "size"),
    ]
    for trial, (style, entry, rule) in enumerate(styles):
        conf = random_table(r, style, entry, rule)
        if trial == 5:  # one table without device_info, every run
            conf["null"] = ",".join(x for x in (conf["null"], "device_info") if x)
        log = tmp_path / f"log{trial}"
        d = backends(
            {"libhal_p.so": (built.probe, {"name": "p", "log": log, "guard": 1, **conf})},
            f"t{trial}",
        )
        ops, _ = random_program(r)
        caps = device_caps(conf)
        script = (
            f"KERNELS = {str(built.kernels)!r}\nOPS = {json.dumps(json.dumps(ops))}\n" + PROGRAM
        )
        what = f"a table of minor {conf['minor']}, {conf['size']} bytes, caps {conf['caps']}, NULL: [{conf['null']}]"
        try:
            out = hal(script, [d])
        except AssertionError as err:
            past = read_past(log)
            if past:
                raise AssertionError(
                    f"{what}: the core read the table past the 184 bytes of the entries it knows "
                    f"({past[0]}), then the program died"
                ) from None
            where = crashed_in_absent_entry(err, conf)
            if where:
                raise AssertionError(
                    f"{what}: the program crashed in {where}: an absent entry was called"
                ) from None
            raise
        assert out["caps"] == caps, (
            f"{what}: the device's negotiated caps should be {caps}, got {out['caps']}"
        )
        props = ["p device 0", 1 << 30] if present(conf, "device_info") else ["", 0]
        assert out["props"] == props, (
            f"{what}: the device's name and total_mem should be {props}, got {out['props']}"
        )
        past = read_past(log)
        assert not past, (
            f"{what}: the core read the table past the 184 bytes of the entries it knows: {past[:2]}"
        )
        lines = log.read_text().splitlines()
        trips = [ln for ln in lines if " tripwire " in ln]
        assert not trips, f"{what}: the core called slots that are not in the table: {trips[:3]}"
        called = {ln.split()[3] for ln in lines if ln.split()[2] == "call"} | {
            "launch" for ln in lines if ln.endswith("call launch_stream")}  # fmt: skip
        absent = sorted(e for e in called if e in ENTRIES and not present(conf, e))
        assert not absent, f"{what}: absent entries were called: {absent}"
        if not caps & STREAMS:
            streamy = sorted(called & (set(STREAM_ENTRIES) | {"launch_stream"}))
            assert not streamy, f"{what}: emulated streams, yet the backend got {streamy}"
        want_res, want_mem = expected(ops, caps)
        for i, (op, got, want) in enumerate(zip(ops, out["res"], want_res, strict=True)):
            assert got == want, (
                f"{what}: call {i} of the program ({op[0]} {op[1:3]}): expected {want}, got {got}"
            )
        assert out["final"] == want_mem, (
            f"{what}: buffers after the program differ from in-order execution"
        )


@pytest.mark.kata_gate(
    "a backend built against the previous header (ABI 1.0) has its table read past its end or is granted what it only claims"
)
def test_negotiate_previous_header_on_random_programs(hal: Any, built: Any, backends: Any) -> None:
    r = random_for("legacy")
    d = backends({"libhal_legacy.so": (built.legacy, None)})
    for _ in range(2):
        ops, _ = random_program(r)
        script = (
            f"KERNELS = {str(built.kernels)!r}\nOPS = {json.dumps(json.dumps(ops))}\n" + PROGRAM
        )
        try:
            out = hal(script, [d])
        except AssertionError as e:
            if "past the end of a 1.0 table" in getattr(e, "stderr", ""):
                raise AssertionError(
                    "the core called an entry past the end of a 1.0 backend's 120-byte table"
                ) from None
            raise
        assert out["caps"] == EMULATED, (
            f"a 1.0 table (claims streams and memset): device caps {out['caps']}, expected {EMULATED}"
        )
        want_res, want_mem = expected(ops, EMULATED)
        assert out["res"] == want_res, (
            f"results on the 1.0 backend: expected {want_res}, got {out['res']}"
        )
        assert out["final"] == want_mem, (
            "buffers after the program on the 1.0 backend differ from in-order execution"
        )
        assert out["shutdown"] == 0, "hal_shutdown of a 1.0 backend"


@pytest.mark.kata_gate(
    "a table larger than the core's (a newer minor, a random size) is read past the entries the "
    "core knows, or its known entries are not used"
)
def test_negotiate_newer_minor_backend_works(
    hal: Any, built: Any, backends: Any, tmp_path: Path
) -> None:
    """A backend built against a newer minor (a bigger table): the core uses what it knows and
    reads nothing past it (the probe's guard page after byte 184 logs a read)."""
    r = random_for("newer-minor")
    log = tmp_path / "log"
    minor, size = r.randint(3, 9), r.randrange(185, 320)
    conf = {"name": "new", "minor": minor, "size": size, "caps": 3, "log": log, "guard": 1}
    d = backends({"libhal_new.so": (built.probe, conf)})
    ops = [
        ["stream", 1],
        ["buf", "b0", 5, [1, 2, 3, 4, 5]],
        ["launch", "b0", 1, 2, 1, 2],
        ["memset", "b0"],
        ["event", 1],
    ]
    what = f"a minor {minor} table of {size} bytes"
    try:
        out = hal(
            f"KERNELS = {str(built.kernels)!r}\nOPS = {json.dumps(json.dumps(ops))}\n" + PROGRAM,
            [d],
        )
    except AssertionError:
        past = read_past(log)
        if past:
            raise AssertionError(
                f"{what}: the core read it past the 184 bytes of the entries it knows ({past[0]}), "
                "then the program died"
            ) from None
        raise
    past = read_past(log)
    assert not past, f"{what}: the core read it past the 184 bytes it knows: {past[:2]}"
    assert out["caps"] == STREAMS | MEMSET, f"{what}: caps {out['caps']}, expected 3"
    assert out["final"] == {"b0": [0] * 5} and out["res"][3] == 0, out
    assert not [ln for ln in log.read_text().splitlines() if " tripwire " in ln], (
        "slots past the known entries were called"
    )


@pytest.mark.kata_gate(
    "devices of equal priority are not in their backends' discovery order, then each backend's "
    "own order (random backends, priorities, device counts and failing backends)"
)
def test_negotiate_priority_ties_keep_discovery_order(hal: Any, built: Any, backends: Any) -> None:
    r = random_for("ties")
    for trial in range(2):
        n = r.randint(3, 6)
        prios = [r.choice([1, 5, 5, 9]) for _ in range(n)]
        devs = [r.randint(1, 3) for _ in range(n)]
        fails = [r.random() < 0.2 for _ in range(n)]
        i, j = sorted(r.sample(range(n), 2))  # at least one tie of two backends with 2+ devices
        prios[j], devs[i], devs[j], fails[i], fails[j] = (
            prios[i],
            r.randint(2, 3),
            r.randint(2, 3),
            False,
            False,
        )
        spec = {
            f"libhal_{chr(97 + k)}{r.randrange(10)}.so": (
                built.probe,
                {"name": f"n{k}", "priority": prios[k], "devices": devs[k],
                 **({"init": "fail"} if fails[k] else {})},
            )
            for k in range(n)
        }  # fmt: skip
        d = backends(spec, f"t{trial}")
        out = hal(
            "assert hal.init() == 0\n"
            "out['d'] = [(x['backend'], x['backend_device']) for x in hal.devices()]",
            [d],
        )
        want = [
            [f"n{k}", dv]
            for _, k in sorted((-p, k) for k, p in enumerate(prios) if not fails[k])
            for dv in range(devs[k])
        ]
        got = [list(x) for x in out["d"]]
        assert got == want, (
            f"devices for backends (discovery order) with priorities {prios}, devices {devs}, "
            f"failing {[k for k in range(n) if fails[k]]}: expected (backend, its device) {want}, "
            f"got {got}"
        )
