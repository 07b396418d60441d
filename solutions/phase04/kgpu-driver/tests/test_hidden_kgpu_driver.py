"""Hidden tests of kgpu-driver: every bad pointer of every ioctl, the channel limit, fork and
close, a full ring and POLLOUT, more submitters, ThreadSanitizer, and the gates against the
shortcuts in ../shortcuts/."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness.native.build import BuildError
from harness.testing import random_for


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, every thread, from /proc."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- ioctl
@pytest.mark.kata_gate(
    "a command given a bad user pointer (null, low, kernel half, top of user space, unmapped) "
    "does not fail with EFAULT, or a failed copy changes the context"
)
def test_ioctl_every_bad_pointer_of_every_command_is_efault(kernel: Any) -> None:
    out = kernel.program(
        """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)      # ioctl(2) as C calls it: any pointer value
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
def raw_ioctl(fd, cmd, ptr):
    if libc.ioctl(fd, cmd, ptr) != 0:
        raise OSError(ctypes.get_errno(), "ioctl")
page = mmap.mmap(-1, 4096)
gone = ctypes.addressof(ctypes.c_char.from_buffer(page))
page.close()                                   # unmapped now
d = kgpu.Device()
cmds = {"info": kgpu.IOC_INFO, "set": kgpu.IOC_SET_PARAM, "get": kgpu.IOC_GET_PARAM,
        "submit": kgpu.IOC_SUBMIT, "wait": kgpu.IOC_WAIT}
bad = {"null": 0, "low": 8, "kernel_half": 0xFFFF800000000000, "top": (1 << 47) - 8,
       "unmapped": gone}
for c, cmd in cmds.items():
    for b, ptr in bad.items():
        out[f"{c}_{b}"] = errno_of(raw_ioctl, d.fd, cmd, ptr)
out["prio"] = d.get_param(kgpu.PARAM_PRIORITY)
out["submitted"] = d.get_param(kgpu.PARAM_SUBMITTED)
"""
    )
    state = {k: out.pop(k) for k in ("prio", "submitted")}
    wrong = {k: v for k, v in out.items() if v != "EFAULT"}
    assert not wrong, f"every command with a bad pointer must fail with EFAULT: {wrong}"
    assert state == {"prio": 1, "submitted": 0}, f"a failed copy must change nothing: {state}"


# A user program's helpers for structs at a page's end: the next page unmapped ("gone": a copy
# in is cut short) or read-only ("ro": a copy out is cut short), and ioctl(2) with any pointer.
EDGES = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
def raw(fd, cmd, ptr):
    if libc.ioctl(fd, cmd, ptr) != 0:
        return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
    return 0
def at_edge(data, cut, second):
    # data's first `cut` bytes end a page, the rest lie in the next page, which is then
    # unmapped ("gone") or made read-only ("ro")
    base = libc.mmap(None, 8192, 3, 0x22, -1, 0)      # PROT_READ | PROT_WRITE, private anonymous
    ptr = base + 4096 - cut
    ctypes.memmove(ptr, data, len(data))
    if second == "gone":
        libc.munmap(base + 4096, 4096)
    else:
        libc.mprotect(base + 4096, 4096, 1)            # PROT_READ
    return ptr
"""


def _cuts(rng: Any, size: int, n: int = 3) -> list[int]:
    """`n` places to cut a `size`-byte struct at a page's end: 1 .. size - 1 bytes before it."""
    return sorted(rng.sample(range(1, size), n))


def _pack(fmt: str, *values: int) -> bytes:
    import struct

    return struct.pack(fmt, *values)


@pytest.mark.kata_gate(
    "INFO, SET_PARAM or GET_PARAM given a struct cut short by the end of the mapped memory (the "
    "rest unmapped, or read-only where the answer goes) does not fail with EFAULT, or the failed "
    "call changes the context: cuts drawn at run time"
)
def test_ioctl_structs_cut_short_are_efault(kernel: Any) -> None:
    """A copy that moved some bytes but not all failed: copy_*_user return the bytes NOT copied,
    and anything but 0 is -EFAULT. The structs straddle a page whose second half is unmapped
    (nothing after the cut can be read) or read-only (nothing after it can be written)."""
    rng = random_for("kgpu structs cut short, ioctl")
    prio = rng.choice([0, 2, 3])
    param = _pack("=IIQ", 0, 0, prio)
    cases = {
        "INFO, answer cut short by an unmapped page": ("IOC_INFO", bytes(16), "gone", _cuts(rng, 16)),
        "INFO, answer cut short by a read-only page": ("IOC_INFO", bytes(16), "ro", _cuts(rng, 16)),
        f"SET_PARAM(PRIORITY, {prio}), struct cut short by an unmapped page":
            ("IOC_SET_PARAM", param, "gone", _cuts(rng, 16)),
        "GET_PARAM(PRIORITY), struct cut short by an unmapped page":
            ("IOC_GET_PARAM", _pack("=IIQ", 0, 0, 0), "gone", _cuts(rng, 16)),
        "GET_PARAM(PRIORITY), answer cut short by a read-only page":
            ("IOC_GET_PARAM", _pack("=IIQ", 0, 0, 0), "ro", _cuts(rng, 16)),
    }  # fmt: skip
    out = kernel.program(
        EDGES
        + f"""
d = kgpu.Device()
for name, (cmd, data, second, cuts) in {cases!r}.items():
    for cut in cuts:
        out[f"{{name}}, {{cut}} of {{len(data)}} bytes before the page's end"] = raw(
            d.fd, getattr(kgpu, cmd), at_edge(data, cut, second))
out["priority after"] = d.get_param(kgpu.PARAM_PRIORITY)
"""
    )
    after = out.pop("priority after")
    wrong = {k: v for k, v in out.items() if v != "EFAULT"}
    assert not wrong, (
        f"ioctl: a struct only partly copied (copy_*_user returned a nonzero count) must fail "
        f"with EFAULT, these did not: {wrong}"
    )
    assert after == 1, (
        f"SET_PARAM(PRIORITY, {prio}) whose struct was cut short failed, yet the priority is "
        f"{after}, not 1: a failed copy must change nothing"
    )


def _double_fetch(log: str) -> str:
    """The kernel's report of a call that read the same user memory twice, or ""."""
    at = log.find("double fetch")
    return "" if at < 0 else log[max(0, log.rfind("\n", 0, at)) : log.find("\n", at)].strip()


@pytest.mark.kata_gate(
    "INFO, SET_PARAM or GET_PARAM reads the same user struct more than once in one call (values "
    "drawn at run time)"
)
def test_ioctl_reads_each_user_struct_once(kernel: Any) -> None:
    """A second copy_from_user of the same bytes is a double fetch: another thread of the
    program can change them between the two reads, so what was checked is not what is used.
    The kernel process counts the user memory each call reads (kshim.c)."""
    rng = random_for("kgpu double fetch, ioctl")
    prios = [rng.randrange(4) for _ in range(3)]
    kernel.program(
        f"""
d = kgpu.Device()
for prio in {prios!r}:
    d.info()
    d.set_param(kgpu.PARAM_PRIORITY, prio)
    for p in (kgpu.PARAM_PRIORITY, kgpu.PARAM_SUBMITTED, kgpu.PARAM_COMPLETED):
        d.get_param(p)
    errno_of(d.set_param, kgpu.PARAM_PRIORITY, 4 + prio)
    errno_of(d.get_param, 3 + prio)
"""
    )
    seen = _double_fetch(kernel.stop())
    assert not seen, (
        f"ioctl: a call read the same user memory twice: {seen}. Copy the user struct once "
        "(copy_from_user into a local), then check and use only the copy"
    )


@pytest.mark.kata_gate(
    "SET_PARAM accepts a priority, parameter or pad out of range at a type boundary (2^31, "
    "2^32 + 0..3, 2^63, 2^64 - 1 and values drawn at run time), or GET_PARAM an unknown parameter"
)
def test_ioctl_values_at_type_boundaries_are_einval(kernel: Any) -> None:
    """A 64-bit value checked after a cast to 32 bits (or a 32-bit field after a cast to 8)
    passes the range check with its high bits set: 2^32 + 1 is "1" to (u32)value."""
    rng = random_for("kgpu values at type boundaries")
    values = [4, 255, 256, 1 << 31, 1 << 32, (1 << 32) + 1, (1 << 32) + 3, 1 << 63, (1 << 64) - 1]
    values += [(rng.randrange(1, 1 << 32) << 32) | rng.randrange(4) for _ in range(3)]
    values += [rng.randrange(4, 1 << 64) for _ in range(2)]
    params = [3, 255, 256, 1 << 16, 1 << 31, (1 << 32) - 1, rng.randrange(3, 1 << 32)]
    pads = [1, 1 << 8, 1 << 31, (1 << 32) - 1, rng.randrange(1, 1 << 32)]
    goods = [rng.randrange(4) for _ in range(3)]
    out = kernel.program(
        f"""
d = kgpu.Device()
bad, back = {{}}, []
for good in {goods!r}:
    d.set_param(kgpu.PARAM_PRIORITY, good)
    for v in {values!r}:
        bad[f"SET_PARAM(PRIORITY, {{v}})"] = errno_of(d.set_param, kgpu.PARAM_PRIORITY, v)
    for p in {params!r}:
        bad[f"SET_PARAM(param {{p}}, 1)"] = errno_of(d.set_param, p, 1)
        bad[f"GET_PARAM(param {{p}})"] = errno_of(d.get_param, p)
    for pad in {pads!r}:
        bad[f"SET_PARAM(PRIORITY, 1) with pad {{pad}}"] = errno_of(
            d.ioctl, kgpu.IOC_SET_PARAM, kgpu.PARAM.pack(kgpu.PARAM_PRIORITY, pad, 1))
    back.append(d.get_param(kgpu.PARAM_PRIORITY))
out["bad"], out["back"] = bad, back
"""
    )
    wrong = {k: v for k, v in out["bad"].items() if v != "EINVAL"}
    assert not wrong, f"SET_PARAM/GET_PARAM with values out of range must fail with EINVAL: {wrong}"
    assert out["back"] == goods, (
        f"GET_PARAM(PRIORITY) after SET_PARAM {goods} and refused values: {out['back']} (a "
        "refused SET_PARAM changes nothing)"
    )


@pytest.mark.kata_gate(
    "an ioctl number the driver does not define is not ENOTTY, or a defined one is: numbers "
    "that differ from a command in its type, number, size or direction, and random numbers, "
    "drawn at run time"
)
def test_ioctl_only_the_five_commands_are_known(kernel: Any) -> None:
    """Every command with one field changed (another magic, a free number, a different size,
    each other direction), random 32-bit numbers, and the five commands themselves, each on a
    zeroed 4 KiB buffer (so no EFAULT): only the five may get anything but ENOTTY."""
    from harness.testing import random_for

    seed = random_for().randrange(1 << 32)
    out = kernel.program(
        f"""
import ctypes, random
r = random.Random({seed})
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
buf = ctypes.create_string_buffer(4096)
d = kgpu.Device()
def raw(cmd):
    ctypes.memset(buf, 0, 4096)
    if libc.ioctl(d.fd, cmd, buf) != 0:
        return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
    return 0
known = {{"INFO": kgpu.IOC_INFO, "SET_PARAM": kgpu.IOC_SET_PARAM, "GET_PARAM": kgpu.IOC_GET_PARAM,
         "SUBMIT": kgpu.IOC_SUBMIT, "WAIT": kgpu.IOC_WAIT}}
out["known"] = {{name: raw(cmd) for name, cmd in known.items()}}
others = {{}}
for name, cmd in known.items():
    d_, size, kind, nr = cmd >> 30, (cmd >> 16) & 0x3FFF, (cmd >> 8) & 0xFF, cmd & 0xFF
    others[f"{{name}} with magic {{chr(kind ^ 0x20)}}"] = kgpu.ioc(d_, nr, size, chr(kind ^ 0x20))
    free = r.choice([n for n in range(256) if n > 4])
    others[f"{{name}} with number {{free}}"] = kgpu.ioc(d_, free, size)
    other = r.choice([n for n in range(1, 256) if n != size])
    others[f"{{name}} with size {{other}}"] = kgpu.ioc(d_, nr, other)
    for direction in range(4):
        if direction != d_:
            others[f"{{name}} with direction {{direction}}"] = kgpu.ioc(direction, nr, size)
for i in range(6):
    n = r.getrandbits(32)
    if n not in known.values():
        others[f"random {{n:#x}}"] = n
out["others"] = {{name: raw(cmd) for name, cmd in others.items()}}
"""
    )
    wrong = {k: e for k, e in out["others"].items() if e != "ENOTTY"}
    assert not wrong, (
        f"ioctl (seed {seed}): numbers the driver does not define must fail with ENOTTY, "
        f"these did not: {wrong}"
    )
    refused = {k: e for k, e in out["known"].items() if e == "ENOTTY"}
    assert not refused, f"ioctl: the driver's own commands gave ENOTTY: {refused}"


@pytest.mark.kata_gate(
    "INFO or the priority parameter is not what kgpu_uapi.h says on random opens: INFO must "
    "give the version, ring entries, VRAM bytes and context ids 1, 2, 3 ... in open order "
    "(never reused), and GET_PARAM must read back what SET_PARAM wrote, per context"
)
def test_ioctl_info_and_priorities_of_random_opens(kernel: Any) -> None:
    """Several contexts, some closed between opens, each given a priority drawn fresh each run;
    every INFO field and every context's own priority checked."""
    rng = random_for("kgpu info and priorities")
    opens = rng.randrange(3, 7)
    prios = [rng.randrange(4) for _ in range(opens)]
    closed = sorted(rng.sample(range(opens - 1), rng.randrange(1, opens - 1)))  # one at least
    out = kernel.program(
        f"""
devs, infos, got = [], [], [None] * len({prios!r})
for i, prio in enumerate({prios!r}):
    d = kgpu.Device()
    d.set_param(kgpu.PARAM_PRIORITY, prio)
    devs.append(d)
    infos.append(d.info())
    if i in {closed!r}:
        got[i] = d.get_param(kgpu.PARAM_PRIORITY)
        d.close()
for i, d in enumerate(devs):
    if i not in {closed!r}:
        got[i] = d.get_param(kgpu.PARAM_PRIORITY)
out["infos"], out["got"] = infos, got
"""
    )
    want = [
        {"version": 1, "ring_entries": 256, "vram_bytes": 64 * 1024, "ctx_id": i + 1}
        for i in range(opens)
    ]
    assert out["infos"] == want, (
        f"INFO of {opens} opens (closing {closed} right after their INFO): {out['infos']}, "
        f"expected {want}"
    )
    got = out["got"]
    assert got == prios, f"GET_PARAM(PRIORITY) of {opens} contexts after SET_PARAM {prios}: {got}"


# Threads of forked processes open, read their context's id, and close some at once.
OPENS = """
import threading
def opener(rounds, keep, ids):
    kept = []
    go.wait()
    for i in range(rounds):
        d = kgpu.Device()
        ids.append(d.info()["ctx_id"])
        (kept.append if i < keep else lambda d: d.close())(d)
    for d in kept:
        d.close()
def process(threads, rounds, keep):
    ids = []
    ts = [threading.Thread(target=opener, args=(rounds, keep, ids)) for _ in range(threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return ids
r, w = os.pipe()
kids = []
for p in range(PROCS):
    pid = os.fork()
    if pid == 0:
        go = threading.Barrier(THREADS)
        ids = process(THREADS, ROUNDS, KEEP)
        os.write(w, (json.dumps(ids) + "\\n").encode())
        os._exit(0)
    kids.append(pid)
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
with os.fdopen(r) as f:
    out["ids"] = sorted(i for line in f for i in json.loads(line))
"""


@pytest.mark.kata_gate(
    "context ids are not unique and never reused when threads of several processes open and "
    "close at once (ids must be 1 .. the number of opens)"
)
def test_ioctl_ids_of_concurrent_opens_are_unique(kernel: Any) -> None:
    """Every open takes the next id, whichever thread or process opened and whatever was closed
    before: N opens, at once or not, have the ids 1 .. N, each once."""
    rng = random_for("kgpu concurrent opens")
    procs, threads, rounds = rng.randrange(2, 4), rng.randrange(3, 6), rng.randrange(2, 4)
    keep = rng.randrange(1, rounds)
    body = OPENS.replace("PROCS", str(procs)).replace("THREADS", str(threads))
    out = kernel.program(body.replace("ROUNDS", str(rounds)).replace("KEEP", str(keep)), timeout=20)
    total = procs * threads * rounds
    ids = out["ids"]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert ids == list(range(1, total + 1)), (
        f"INFO's ctx_id of {total} opens by {threads} threads in each of {procs} processes at "
        f"once (each closing all but {keep} of its {rounds} right away): {len(set(ids))} distinct "
        f"ids{f', these more than once: {dup}' if dup else ''}, range {min(ids)}..{max(ids)}; "
        "expected 1 .. {total} each once: ids come from an atomic counter (atomic_inc_return) "
        "and are never reused"
    )


@pytest.mark.kata_gate(
    "ThreadSanitizer reports a data race in the driver when threads of several processes open "
    "and close at once"
)
def test_ioctl_no_data_race_in_concurrent_opens_under_tsan(
    kata: Any, kernel_py: Any, tmp_path: Path
) -> None:
    from harness.native.isolate import tsan_runtime

    if tsan_runtime() is None:
        pytest.skip("gcc has no ThreadSanitizer runtime (libtsan) here: apt-get install gcc")
    try:
        built = kernel_py.build(kata.source, kata.search_path, sanitize=["thread"])
    except BuildError as e:
        pytest.fail(f"compilation failed:\n{e}", pytrace=False)
    # Under TSan the shim's own bookkeeping orders nothing, so any two opens of different
    # threads are unordered: a few suffice (and keep the run short)
    body = OPENS.replace("PROCS", "2").replace("THREADS", "3").replace("ROUNDS", "2")
    with kernel_py.Kernel(built, tmp_path / "kernel.log") as k:
        k.program(body.replace("KEEP", "1"), timeout=60)
        log = k.stop(timeout=60)
    if "FATAL: ThreadSanitizer" in log:
        pytest.skip(f"ThreadSanitizer cannot run on this machine: {log.strip()[:200]}")
    race = log.find("WARNING: ThreadSanitizer")
    assert race < 0, (
        "ThreadSanitizer found a data race in the kernel process while threads of 2 processes "
        f"opened and closed contexts at once:\n{log[race : race + 3000]}"
    )


def test_ioctl_forked_child_closing_keeps_the_parents_context(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device()
d.set_param(kgpu.PARAM_PRIORITY, 2)
pid = os.fork()
if pid == 0:
    os.close(d.fd)               # the child's copy only: the file stays open in the parent
    os._exit(0)
os.waitpid(pid, 0)
out["prio"] = d.get_param(kgpu.PARAM_PRIORITY)
out["ctx"] = d.info()["ctx_id"]
"""
    )
    assert out == {"prio": 2, "ctx": 1}, (
        f"release: a forked child closing its copy of the fd must not release the parent's "
        f"context (priority 2, context 1): {out}"
    )


def test_ioctl_many_opens_then_more(kernel: Any) -> None:
    out = kernel.program(
        """
devs, errs = [], set()
for i in range(70):              # the GPU has 64 channels
    try:
        devs.append(kgpu.Device())
    except OSError as e:
        errs.add(errno.errorcode[e.errno])
out["opened"], out["errs"] = len(devs), sorted(errs)
for d in devs:
    d.close()
again = kgpu.Device(); again.map()
again.push(kgpu.INC, a=0)
again.wait(again.submit(), 5 * 10**9)
out["again"] = again.vram[0]
"""
    )
    assert out["opened"] == 64, f"64 channels, 64 contexts: {out}"
    assert out["errs"] and set(out["errs"]) <= {"EBUSY", "ENOSPC", "ENOMEM"}, (
        f"an open with no channel left fails with an error (EBUSY): {out}"
    )
    assert out["again"] == 1, "after closing, channels are free again"
    log = kernel.stop()
    assert "kgpu: leak:" not in log, f"a failed open must free what it allocated:\n{log}"


# --------------------------------------------------------------------------- submit
@pytest.mark.kata_gate(
    "WAIT returns before the GPU ran the submitted commands (300 ms of work, waits of 0 and 20 ms)"
)
def test_submit_fence_completes_only_after_the_gpu(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a=300_000)
d.push(kgpu.FILL, a=100, length=10, b=0x42)
f = d.submit()
out["completed_now"] = d.get_param(kgpu.PARAM_COMPLETED)
out["zero_wait"] = errno_of(d.wait, f, 0)
out["short_wait"] = errno_of(d.wait, f, 20_000_000)
d.wait(f, 5 * 10**9)
out["filled"] = bytes(d.vram[100:110]) == b"\\x42" * 10
out["completed"] = d.get_param(kgpu.PARAM_COMPLETED)
"""
    )
    assert out == {
        "completed_now": 0, "zero_wait": "ETIME", "short_wait": "ETIME", "filled": True,
        "completed": 1,
    }, f"SUBMIT then WAIT on 300 ms of work: the fence completes only after the GPU ran it: {out}"  # fmt: skip


@pytest.mark.kata_gate(
    "the kernel's threads keep waking while three WAITs wait for the GPU (more than a few "
    "wakeups in 0.8 s)"
)
def test_submit_waiters_sleep_until_the_interrupt(kernel: Any) -> None:
    """Three WAITs on 1.4 s of GPU work: while they wait, the kernel process's threads sleep
    (the interrupt handler's wake_up ends the wait). A driver that polls the fence on a timer
    wakes its waiters tens of times a second; the CPU they use is too small to tell, the
    voluntary context switches are not (the reference: 3, one per waiter at the shim's 1 s
    slice; a 1 ms poll: ~2000; a poll slower than ~160 ms fails the public latency test's time
    limit instead). The simulated GPU's two threads (the first of each
    name) are left out: they wake every 20 ms to look for kthread_stop."""
    out = kernel.program(
        f"""
import threading
def switches():
    n, hardware = {{}}, set()
    for tid in sorted(os.listdir("/proc/{kernel.proc.pid}/task"), key=int):
        try:
            text = open(f"/proc/{kernel.proc.pid}/task/{{tid}}/status").read()
        except OSError:
            continue
        name = text.split("Name:")[1].split()[0]
        if name in ("kgpu-engine", "kgpu-irq") and name not in hardware:
            hardware.add(name)  # the GPU's own threads look at kthread_should_stop every 20 ms
            continue
        n[tid] = int(text.split("voluntary_ctxt_switches:")[1].split()[0])
    return n
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a=1_400_000)
d.push(kgpu.INC, a=0)
f = d.submit()
threads = [threading.Thread(target=d.wait, args=(f, 5 * 10**9)) for _ in range(3)]
for th in threads: th.start()
time.sleep(0.25)                  # the three WAITs sleep in the kernel now
before = switches()
time.sleep(0.8)
after = switches()
out["switches"] = sum(after[t] - before[t] for t in after if t in before)
for th in threads: th.join()
out["inc"] = d.vram[0]
"""
    )
    assert out["inc"] == 1, f"the GPU ran the INC once: the counter is {out['inc']}"
    assert out["switches"] < 15, (
        f"the kernel's threads woke {out['switches']} times in 0.8 s while three WAITs waited "
        "for the GPU: sleep on the wait queue that the interrupt handler wakes (wake_up_all), "
        "do not poll kgpu_hw_completed with msleep"
    )


@pytest.mark.kata_gate(
    "WAIT returns before the GPU's interrupt reached the driver (a GPU whose interrupts come "
    "400 ms after the fence)"
)
def test_submit_wait_ends_with_the_interrupt(kernel_py: Any, built: Any, tmp_path: Path) -> None:
    """A GPU whose interrupt comes 400 ms after the fence (KGPU_IRQ_DELAY_US; real interrupt
    moderation delays them too): 400 ms of work, then WAIT. The interrupt handler is what
    completes a fence for the driver, so WAIT ends about 800 ms in, not at 400."""
    log = tmp_path / "kernel.log"
    with kernel_py.Kernel(built, log, irq_delay_us=400_000) as k:
        out = k.program(
            """
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a=400_000)
d.push(kgpu.INC, a=0)
t = time.monotonic()
f = d.submit()
d.wait(f, 5 * 10**9)
out["waited"] = time.monotonic() - t
out["inc"] = d.vram[0]
"""
        )
    assert out["inc"] == 1, f"the GPU ran the INC once: the counter is {out['inc']}"
    assert out["waited"] >= 0.7, (
        f"WAIT returned {out['waited']:.2f} s after SUBMIT: the work took 0.4 s, but the GPU's "
        "interrupt reached the driver only 0.4 s later. The interrupt handler records the "
        "completed fence and wakes the waiters; WAIT sleeps until it has"
    )


@pytest.mark.kata_gate(
    "SUBMIT or WAIT given a struct cut short by the end of the mapped memory (the rest unmapped, "
    "or read-only where SUBMIT's fence goes) does not fail with EFAULT, or a SUBMIT whose struct "
    "could not be read rings the doorbell: cuts drawn at run time"
)
def test_submit_structs_cut_short_are_efault(kernel: Any) -> None:
    """SUBMIT's fence comes back through copy_to_user: a read-only page where it goes is a
    failed copy (EFAULT; the fence is lost to the program, as in Linux). A struct that cannot
    be read whole is never used."""
    rng = random_for("kgpu structs cut short, submit")
    cases = {
        "SUBMIT(1), struct cut short by an unmapped page":
            ("IOC_SUBMIT", _pack("=IIQ", 1, 0, 0), "gone", _cuts(rng, 16)),
        "SUBMIT(1), fence cut short by a read-only page":
            ("IOC_SUBMIT", _pack("=IIQ", 1, 0, 0), "ro", sorted(rng.sample(range(8, 16), 3))),
        "WAIT(fence 1, 1 s), struct cut short by an unmapped page":
            ("IOC_WAIT", _pack("=QQ", 1, 10**9), "gone", _cuts(rng, 16)),
    }  # fmt: skip
    out = kernel.program(
        EDGES
        + f"""
d = kgpu.Device(); d.map()
for i in range(256):
    d.push(kgpu.INC, a=0)
got = {{}}
for name, (cmd, data, second, cuts) in {cases!r}.items():
    for cut in cuts:
        before = d.get_param(kgpu.PARAM_SUBMITTED)
        e = raw(d.fd, getattr(kgpu, cmd), at_edge(data, cut, second))
        rang = d.get_param(kgpu.PARAM_SUBMITTED) - before
        if rang:
            d.wait(d.get_param(kgpu.PARAM_SUBMITTED), 5 * 10**9)
        got[f"{{name}}, {{cut}} of {{len(data)}} bytes before the page's end"] = [e, rang]
out["got"] = got
"""
    )
    got = out["got"]
    wrong = {k: e for k, (e, _) in got.items() if e != "EFAULT"}
    assert not wrong, (
        f"SUBMIT/WAIT: a struct only partly copied (copy_*_user returned a nonzero count) must "
        f"fail with EFAULT, these did not: {wrong}"
    )
    rang = {k: n for k, (_, n) in got.items() if n and "unmapped" in k}
    assert not rang, (
        f"SUBMIT whose struct could not be read whole must not ring the doorbell (SUBMITTED "
        f"grew): {rang}"
    )


@pytest.mark.kata_gate(
    "SUBMIT or WAIT reads the same user struct more than once in one call (counts, fences and "
    "timeouts drawn at run time)"
)
def test_submit_reads_each_user_struct_once(kernel: Any) -> None:
    """SUBMIT checks count, then uses it: a second read of user memory may see another count
    (another thread changed it in between: a double fetch, TOCTOU). The kernel process counts
    the user memory each call reads."""
    rng = random_for("kgpu double fetch, submit")
    counts = [rng.randrange(1, 60) for _ in range(3)]
    kernel.program(
        f"""
d = kgpu.Device(); d.map()
for n in {counts!r}:
    for i in range(n):
        d.push(kgpu.INC, a=0)
    f = d.submit()
    d.wait(f, 5 * 10**9)
    errno_of(d.wait, f + 1, 0)
    errno_of(d.submit, 256 + n)
"""
    )
    seen = _double_fetch(kernel.stop())
    assert not seen, (
        f"SUBMIT/WAIT: a call read the same user memory twice: {seen}. Copy the user struct "
        "once (copy_from_user into a local), then check and use only the copy"
    )


@pytest.mark.kata_gate(
    "SUBMIT accepts a count or flags out of range at a type boundary (256, 257, 511, 512, 2^16 "
    "+ 1, 2^31, 2^32 - 1 and values drawn at run time): the count must be 1..255"
)
def test_submit_counts_at_type_boundaries_are_einval(kernel: Any) -> None:
    """A count checked after a cast to 8 or 16 bits passes with its high bits set: 257 is "1"
    to (u8)count. Nothing may run for a refused SUBMIT; a good one afterwards runs exactly its
    commands."""
    rng = random_for("kgpu counts at type boundaries")
    counts = [256, 257, 511, 512, (1 << 16) + 1, (1 << 31), (1 << 31) + 1, (1 << 32) - 1]
    counts += [rng.randrange(256, 1 << 32) for _ in range(3)]
    counts += [(rng.randrange(1, 1 << 24) << 8) | rng.randrange(1, 256) for _ in range(2)]
    flags = [1, 1 << 8, 1 << 31, (1 << 32) - 1, rng.randrange(1, 1 << 32)]
    good = rng.randrange(1, 256)
    out = kernel.program(
        f"""
d = kgpu.Device(); d.map()
ring = d.mem
for i in range(256):
    kgpu.CMD.pack_into(ring, i * kgpu.CMD_BYTES, kgpu.INC, 0, 0, 0, 0)
bad = {{}}
for n in {counts!r}:
    bad[f"count {{n}}"] = errno_of(d.ioctl, kgpu.IOC_SUBMIT, kgpu.SUBMIT.pack(n, 0, 0))
for fl in {flags!r}:
    bad[f"count 1, flags {{fl:#x}}"] = errno_of(d.ioctl, kgpu.IOC_SUBMIT, kgpu.SUBMIT.pack(1, fl, 0))
out["bad"] = bad
out["submitted"] = d.get_param(kgpu.PARAM_SUBMITTED)
time.sleep(0.05)
out["ran"] = int.from_bytes(d.vram[0:8], "little")
f = d.submit({good})
d.wait(f, 5 * 10**9)
out["good"] = [f, int.from_bytes(d.vram[0:8], "little")]
"""
    )
    wrong = {k: v for k, v in out["bad"].items() if v != "EINVAL"}
    assert not wrong, (
        f"SUBMIT with a count outside 1..255 or nonzero flags must fail with EINVAL: {wrong}"
    )
    assert (out["submitted"], out["ran"]) == (0, 0), (
        f"refused SUBMITs changed the context: SUBMITTED {out['submitted']}, {out['ran']} "
        "commands ran (expected 0 and 0)"
    )
    assert out["good"] == [1, good], (
        f"SUBMIT({good}) after the refused ones: fence and commands run {out['good']}, "
        f"expected [1, {good}]"
    )


@pytest.mark.kata_gate(
    "mmap accepts a mapping it must refuse, refuses one it must accept, or maps the wrong memory: "
    "offsets (up to 2^44), lengths and MAP_SHARED or MAP_PRIVATE drawn at run time"
)
def test_submit_mmap_offsets_lengths_and_flags(kernel: Any) -> None:
    """The oracle: MAP_SHARED, offset a page multiple inside the 72 KiB and the length (rounded
    up to pages) no more than what is left; anything else is EINVAL. An accepted mapping shows
    the context's bytes from that offset (the ring, then its memory)."""
    rng = random_for("kgpu mmap at random")
    total, page = 8192 + 65536, 4096
    offsets = [0, 8192, total - page, total, 1 << 32, (1 << 32) + 8192, 1 << 44]
    offsets += [page * rng.randrange(0, total // page) for _ in range(4)]
    offsets += [page * rng.randrange(total // page + 1, 1 << 30) for _ in range(2)]
    offsets += [(rng.randrange(1, 1 << 20) << 32) + page * rng.randrange(0, total // page)]
    cases = []
    for off in offsets:
        for _ in range(2):
            length = rng.choice(
                [1, page, page + 1, total, total + 1, rng.randrange(1, total + 2 * page)]
            )
            shared = rng.random() < 0.7
            ok = shared and off < total and -(-length // page) * page <= total - off
            cases.append((off, length, shared, ok))
    out = kernel.program(
        f"""
d = kgpu.Device(); d.map()
for i in range({total} // 8):
    d.mem[i * 8 : i * 8 + 8] = (i * 0x9E3779B97F4A7C15 % (1 << 64)).to_bytes(8, "little")
got = []
for off, length, shared, ok in {cases!r}:
    flags = mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE
    try:
        m = mmap.mmap(d.fd, length, flags, offset=off)
    except OSError as e:
        got.append(errno.errorcode.get(e.errno, e.errno))
        continue
    got.append("same" if m[:length] == d.mem[off : off + length] else "other memory")
    m.close()
out["got"] = got
"""
    )
    wrong = []
    for (off, length, shared, ok), got in zip(cases, out["got"], strict=True):
        want = "same" if ok else "EINVAL"
        if got != want:
            kind = "MAP_SHARED" if shared else "MAP_PRIVATE"
            wrong.append(f"offset {off:#x}, length {length}, {kind}: {got} (expected {want})")
    assert not wrong, "mmap of the context (72 KiB: the ring, then its memory): " + "; ".join(
        wrong[:6]
    )


@pytest.mark.kata_gate(
    "a fence shows as completed (COMPLETED, WAIT, poll) before the GPU completed it: fences "
    "behind a hung command, their number and position drawn at run time"
)
def test_submit_completes_exactly_the_fences_the_gpu_completed(kernel: Any) -> None:
    """Fences 1 .. k - 1 run, fence k hangs the channel, fences after it never run: once fence
    k - 1 completed, COMPLETED is k - 1, WAIT on k or later times out, poll has no POLLIN."""
    rng = random_for("kgpu exact completions")
    hung, total = rng.randrange(2, 5), rng.randrange(5, 8)
    out = kernel.program(
        f"""
d = kgpu.Device(); d.map()
for f in range(1, {total} + 1):
    d.push(kgpu.HANG if f == {hung} else kgpu.INC, a=0)
    d.push(kgpu.INC, a=8 * f)
    assert d.submit() == f
d.wait({hung} - 1, 5 * 10**9)
time.sleep(0.05)
out["completed"] = d.get_param(kgpu.PARAM_COMPLETED)
out["waits"] = [errno_of(d.wait, f, 0) for f in range(1, {total} + 1)]
out["poll"] = d.poll(select.POLLIN, 0)
out["ran"] = [int.from_bytes(d.vram[8 * f : 8 * f + 8], "little") for f in range(1, {total} + 1)]
"""
    )
    want_waits = [0] * (hung - 1) + ["ETIME"] * (total - hung + 1)
    assert (out["completed"], out["waits"], out["poll"] & 1) == (hung - 1, want_waits, 0), (
        f"{total} fences, fence {hung} hangs the GPU: after fence {hung - 1} completed, "
        f"COMPLETED is {out['completed']} (expected {hung - 1}), WAIT(f, 0) for f = 1.."
        f"{total} gave {out['waits']}, poll {'POLLIN' if out['poll'] & 1 else 'no POLLIN'}: the "
        "interrupt handler records kgpu_hw_completed(), the fence the GPU wrote, not the last "
        "one submitted"
    )


@pytest.mark.kata_gate(
    "WAIT accepts a fence never submitted (fresh contexts and after a number of SUBMITs drawn "
    "at run time; the next fence, further ones, 2^63, 2^64 - 1)"
)
def test_submit_wait_for_a_fence_never_submitted_is_einval(kernel: Any) -> None:
    rng = random_for("kgpu future fences")
    rounds = [0, rng.randrange(1, 4), rng.randrange(4, 9)]
    out = kernel.program(
        f"""
got = {{}}
for n in {rounds!r}:
    d = kgpu.Device(); d.map()
    for i in range(n):
        d.push(kgpu.NOP)
        d.wait(d.submit(), 5 * 10**9)
    for f in (n + 1, n + 2, n + {rng.randrange(3, 1000)}, 1 << 32, 1 << 63, (1 << 64) - 1):
        got[f"after {{n}} SUBMITs, WAIT(fence {{f}})"] = errno_of(d.wait, f, 10**6)
    d.close()
out["got"] = got
"""
    )
    wrong = {k: v for k, v in out["got"].items() if v != "EINVAL"}
    assert not wrong, (
        f"WAIT for a fence above the last one submitted must fail with EINVAL: {wrong}"
    )


@pytest.mark.kata_gate(
    "SUBMIT on a channel the GPU stopped (a bad command) returns a fence instead of failing, or "
    "counts it as submitted"
)
def test_submit_on_a_stopped_channel_fails(kernel: Any) -> None:
    """kgpu_hw_doorbell answers -EIO once the channel stopped: that SUBMIT failed, its fence
    would never complete."""
    rng = random_for("kgpu stopped channel")
    good = rng.randrange(0, 4)
    out = kernel.program(
        f"""
d = kgpu.Device(); d.map()
for i in range({good}):
    d.push(kgpu.INC, a=0)
    d.wait(d.submit(), 5 * 10**9)
d.push(kgpu.FILL, a=kgpu.VRAM_BYTES - 4, length=64, b=1)   # outside the memory: the GPU stops
bad = d.submit()
errno_of(d.wait, bad, 100_000_000)
out["after"] = []
for i in range(3):
    d.push(kgpu.INC, a=0)
    out["after"].append(errno_of(d.submit))
out["submitted"] = d.get_param(kgpu.PARAM_SUBMITTED)
"""
    )
    assert out["after"] == ["EIO"] * 3 and out["submitted"] == good + 1, (
        f"after a bad command stopped the channel (fence {good + 1}), 3 more SUBMITs gave "
        f"{out['after']} and SUBMITTED is {out['submitted']}: kgpu_hw_doorbell's -EIO is the "
        f"SUBMIT's error (expected ['EIO', 'EIO', 'EIO'] and {good + 1})"
    )


def test_submit_largest_batches_around_the_ring(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
for batch in range(5):
    for i in range(255):
        d.push(kgpu.INC, a=8 * (batch % 3))
    d.wait(d.submit(), 5 * 10**9)
out["counts"] = [int.from_bytes(d.vram[8 * i : 8 * i + 8], "little") for i in range(3)]
out["submitted"] = d.get_param(kgpu.PARAM_SUBMITTED)
"""
    )
    assert out == {"counts": [510, 510, 255], "submitted": 5}, (
        f"SUBMIT of 5 batches of 255 commands around the ring: each command runs once: {out}"
    )


def test_submit_bad_command_stops_only_its_channel(kernel: Any) -> None:
    out = kernel.program(
        """
a, b = kgpu.Device(), kgpu.Device()
a.map(); b.map()
a.push(kgpu.FILL, a=kgpu.VRAM_BYTES - 4, length=64, b=1)   # outside a's memory
fa = a.submit()
b.push(kgpu.FILL, a=0, length=4, b=5)
b.wait(b.submit(), 5 * 10**9)
out["a"] = errno_of(a.wait, fa, 100_000_000)
out["b"] = b.vram[0]
"""
    )
    assert out == {"a": "ETIME", "b": 5}, (
        f"a bad command stops its own channel (its WAIT times out), another context's work "
        f"runs (b's FILL wrote 5): {out}"
    )


# --------------------------------------------------------------------------- wait
class ThreadStates:
    """Samples the state (R running or runnable, S sleeping, ...) and the voluntary context
    switches of every thread of a process from /proc, every few ms, in a background thread.
    What a thread is doing, not how much CPU it got: a thread that loops stays R however
    loaded the machine is (sched_yield keeps it runnable), one that sleeps is S."""

    def __init__(self, pid: int) -> None:
        import threading

        self.pid = pid
        self.samples: list[tuple[float, dict[int, tuple[str, str, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> dict[int, tuple[str, str, int]]:
        threads: dict[int, tuple[str, str, int]] = {}
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
                status = (task / "status").read_text()
            except OSError:  # the thread ended
                continue
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            state = stat[stat.rindex(")") + 2]
            vcs = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
            threads[int(task.name)] = (comm, state, vcs)
        return threads

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                self.samples.append((t, self._read()))
            except OSError:  # the process ended
                return
            self._stop.wait(0.004)

    def __enter__(self) -> ThreadStates:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def callers(self, threads: dict[int, tuple[str, str, int]]) -> dict[int, tuple[str, str, int]]:
        """The threads that run the user programs' calls: all but the main thread and the
        named kernel threads (kthread_run names them; the connection threads keep the
        process's name)."""
        main = threads.get(self.pid, ("", "", 0))[0]
        return {t: v for t, v in threads.items() if t != self.pid and v[0] == main}

    def during(self, start: float, end: float) -> tuple[int, int, int]:
        """(samples, samples with a caller thread R, voluntary switches of the caller threads)
        between `start` and `end`."""
        inside = [(t, self.callers(th)) for t, th in self.samples if start <= t <= end]
        running = sum(any(v[1] == "R" for v in th.values()) for _, th in inside)
        if len(inside) < 2:
            return len(inside), running, 0
        first, last = inside[0][1], inside[-1][1]
        switches = sum(last[t][2] - first[t][2] for t in last if t in first)
        return len(inside), running, switches


# One waiter and three, short and long (1000 s) timeouts, work that completes and work that hangs:
# each waiter records when it called WAIT and when WAIT returned.
WAITERS = """
import threading
def phase(name, waits):
    marks = []
    def run(d, f, timeout):
        t0 = time.monotonic()
        e = errno_of(d.wait, f, timeout)
        marks.append((t0, time.monotonic(), e))
    threads = [threading.Thread(target=run, args=w) for w in waits]
    for th in threads: th.start()
    for th in threads: th.join()
    out[name] = marks
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a=700_000)
phase("one waiter", [(d, d.submit(), 5 * 10**9)])
d.push(kgpu.DELAY, a=700_000)
f = d.submit()
phase("three waiters", [(d, f, 5 * 10**9), (d, f, 10**12), (d, f, 3 * 10**9)])
h = kgpu.Device(); h.map()
h.push(kgpu.HANG)
phase("a waiter on hung work", [(h, h.submit(), 700_000_000)])
"""


@pytest.mark.kata_gate(
    "a thread in WAIT stays runnable (or keeps waking up) while the GPU works: one waiter or "
    "three, short or long timeout, work that completes or hangs"
)
def test_wait_sleeps_while_the_gpu_works(kernel: Any) -> None:
    """While WAITs wait, the threads that run them in the kernel process are sampled from
    /proc: a sleeping thread is S and does not wake until the interrupt; a loop, with or
    without cond_resched(), is R whatever the load; a loop around msleep() wakes every few ms."""
    before = cpu_seconds(kernel.proc.pid)
    want = {"one waiter": 0, "three waiters": 0, "a waiter on hung work": "ETIME"}
    for attempt in range(3):  # a machine too loaded to sample the wait gets another try
        with ThreadStates(kernel.proc.pid) as states:
            out = kernel.program(WAITERS, timeout=20)
        seen = {}
        for name, marks in out.items():
            assert {m[2] for m in marks} == {want[name]}, (
                f"WAIT, {name}: returned {[m[2] for m in marks]}, expected {want[name]!r}"
            )
            # from the last waiter's call (+50 ms to reach the kernel) to the first return
            start, end = max(m[0] for m in marks) + 0.05, min(m[1] for m in marks) - 0.03
            seen[name] = (end - start, *states.during(start, end), len(marks))
            print(f"WAIT, {name}, try {attempt + 1}: {seen[name]} (s, samples, R, wakeups, n)")
        if all(length >= 0.3 and samples >= 5 for length, samples, *_ in seen.values()):
            break
    else:
        raise AssertionError(
            f"WAIT: in 3 tries the waits could not be sampled (windows of at least 0.3 s with "
            f"5 samples were wanted): {seen}"
        )
    used = cpu_seconds(kernel.proc.pid) - before
    for name, (length, samples, running, switches, n) in seen.items():
        assert running <= samples // 4 and switches <= 20 * n, (
            f"WAIT, {name}: in {samples} samples over {length:.2f} s a thread of the "
            f"kernel was running or runnable in {running}, and the threads in WAIT woke up "
            f"{switches} times: a waiting thread must sleep on the wait queue "
            "(wait_event_*) until the interrupt handler wakes it, not loop"
        )
    assert used < 0.5 * (attempt + 1), (
        f"the kernel used {used:.2f} s of CPU while WAITs waited about 2 s for the GPU "
        f"({attempt + 1} runs): a waiting thread must sleep on the wait queue (wait_event_*), "
        "not loop"
    )


# While threads sleep in WAIT on context a, every call of a and another context b is timed.
STALL = """
import threading
def phase(name, waiters, work):
    a = kgpu.Device(); a.map()
    a.push(kgpu.HANG) if work == "hung" else a.push(kgpu.DELAY, a=1_500_000)
    fa = a.submit()
    ws = [threading.Thread(target=errno_of, args=(a.wait, fa, 1_200_000_000)) for _ in range(waiters)]
    for w in ws: w.start()
    time.sleep(0.15)                  # the waiters sleep in WAIT on a's work now
    took = {}
    def timed(call, f, *args):
        t = time.monotonic()
        took[call] = (errno_of(f, *args), time.monotonic() - t)
    b = kgpu.Device(); b.map()
    b.push(kgpu.INC, a=0)
    timed("SUBMIT and WAIT on another context", lambda: b.wait(b.submit(), 5 * 10**9))
    timed("INFO", a.info)
    timed("GET_PARAM", a.get_param, kgpu.PARAM_SUBMITTED)
    timed("SET_PARAM", a.set_param, kgpu.PARAM_PRIORITY, 2)
    a.push(kgpu.INC, a=8)
    timed("SUBMIT", a.submit)
    timed("WAIT with timeout 0", a.wait, fa, 0)
    timed("poll", a.poll, select.POLLIN, 0)
    out[name] = {k: [e, round(t, 3)] for k, (e, t) in took.items()}
    for w in ws: w.join()
    a.close(); b.close()
phase("one waiter, hung work", 1, "hung")
phase("two waiters, hung work", 2, "hung")
phase("two waiters, running work", 2, "delay")
"""


@pytest.mark.kata_gate(
    "a call stalls while another thread sleeps in WAIT: every ioctl and poll on the waited-for "
    "context and on another, with one or two waiters, on hung or running work"
)
def test_wait_sleeping_waiters_stall_nobody(kernel: Any) -> None:
    out = kernel.program(STALL, timeout=15)
    want = {"WAIT with timeout 0": "ETIME"}
    for name, took in out.items():
        errors = {k: e for k, (e, _) in took.items() if e != want.get(k, 0)}
        assert not errors, f"{name}: calls on the contexts failed: {errors}"
        slow = {k: t for k, (_, t) in took.items() if t >= 0.4}
        assert not slow, (
            f"{name}: while threads slept in WAIT on context a, these calls took (s) {slow}: "
            "release every lock before sleeping on the wait queue"
        )


@pytest.mark.kata_gate(
    "WAIT gives up before its timeout has passed: timeouts drawn at run time, short ones on a "
    "hung GPU and long ones (up to 2^64 - 1 ns) on work that takes over a second"
)
def test_wait_every_timeout_is_waited_out(kernel: Any) -> None:
    """The public test waits 200 ms; a WAIT that only looks for other short timeouts (or
    rounds them down to nothing), or caps long ones, passes it. Short timeouts on a hung GPU
    must be waited out; a long one on work that takes a drawn 1.1 .. 1.6 s must see it
    complete (a WAIT that caps its timeout at 1 s gives ETIME)."""
    rng = random_for("kgpu every timeout")
    timeouts = sorted(rng.sample(range(30, 160), 3))  # ms
    work_us = rng.randrange(1_100_000, 1_600_000)
    long_ns = rng.choice([5 * 10**9, 10**12, 1 << 63, (1 << 64) - 1])
    out = kernel.program(
        f"""
import threading
def long_wait():
    w = kgpu.Device(); w.map()
    w.push(kgpu.DELAY, a={work_us})
    t = time.monotonic()
    f = w.submit()
    out["long"] = [errno_of(w.wait, f, {long_ns}), time.monotonic() - t]
th = threading.Thread(target=long_wait)
th.start()
d = kgpu.Device(); d.map()
d.push(kgpu.HANG)
f = d.submit()
out["waits"] = []
for ms in {timeouts}:
    t = time.monotonic()
    e = errno_of(d.wait, f, ms * 1_000_000 + 1)     # + 1 ns: a part of a jiffy still counts
    out["waits"].append([ms, e, round((time.monotonic() - t) * 1000, 1)])
th.join()
""",
        timeout=8,
    )
    wrong = [w for w in out["waits"] if w[1] != "ETIME" or w[2] < w[0] * 0.95]
    assert not wrong, (
        f"[timeout ms, errno, waited ms] that came back too early: {wrong}: WAIT sleeps until "
        "the fence completes or the whole timeout has passed"
    )
    e, took = out["long"]
    assert e == 0 and took >= work_us / 1e6 * 0.95, (
        f"WAIT with a timeout of {long_ns} ns on {work_us / 1e6:.2f} s of GPU work returned "
        f"{e!r} after {took:.2f} s: it must wait until the work completes (0), however long "
        "the timeout (nsecs_to_jiffies, no cap)"
    )


@pytest.mark.kata_gate(
    "WAIT with timeout 0 sleeps instead of only looking (on pending and on completed fences)"
)
def test_wait_zero_timeout_answers_at_once(kernel: Any) -> None:
    """Timeout 0 looks and answers: ETIME on pending work, 0 on completed. It is timed against
    the same run's GET_PARAM (one round trip to the kernel): the fastest of several zero WAITs
    must be about as fast as the fastest GET_PARAM, not 100 ms."""
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.NOP)
done = d.submit()
d.wait(done, 5 * 10**9)
d.push(kgpu.HANG)
hung = d.submit()
def timed(f, *args):
    t = time.monotonic()
    e = errno_of(f, *args)
    return [e, time.monotonic() - t]
out["get"] = [timed(d.get_param, kgpu.PARAM_COMPLETED) for _ in range(7)]
out["pending"] = [timed(d.wait, hung, 0) for _ in range(7)]
out["done"] = [timed(d.wait, done, 0) for _ in range(7)]
"""
    )
    base = min(t for _, t in out["get"])
    for name, want in (("pending", "ETIME"), ("done", 0)):
        errs = {e for e, _ in out[name]}
        fastest = min(t for _, t in out[name])
        assert errs == {want}, f"WAIT(timeout 0) on a {name} fence gave {errs}, expected {want!r}"
        assert fastest < max(0.03, 5 * base), (
            f"WAIT(timeout 0) on a {name} fence: the fastest of 7 took {fastest * 1000:.1f} ms, "
            f"a GET_PARAM {base * 1000:.2f} ms: a timeout of 0 only looks, it never sleeps"
        )


@pytest.mark.kata_gate(
    "a WAIT sleeps holding a lock (a mutex or spinlock): timeouts drawn at run time, short and "
    "long, two contexts, while other threads SUBMIT"
)
def test_wait_sleeps_holding_no_lock(kernel: Any) -> None:
    """The kernel process reports a driver call that sleeps (wait_event*, msleep,
    usleep_range) while its thread holds a mutex or spinlock: whatever else needs that lock
    waits as long as the sleep, whatever the timeout."""
    rng = random_for("kgpu no lock across a sleep")
    shorts = [rng.randrange(20, 450) for _ in range(3)]  # ms
    longs = [rng.randrange(500, 900) for _ in range(2)]
    kernel.program(
        f"""
import threading
a, b = kgpu.Device(), kgpu.Device()
a.map(); b.map()
a.push(kgpu.HANG)
fa = a.submit()
b.push(kgpu.DELAY, a=300_000)
fb = b.submit()
ws = [threading.Thread(target=errno_of, args=(a.wait, fa, ms * 10**6)) for ms in {shorts + longs}]
ws.append(threading.Thread(target=errno_of, args=(b.wait, fb, 10**12)))
for w in ws: w.start()
for i in range(5):
    time.sleep(0.05)
    b.push(kgpu.NOP)
    errno_of(b.submit)
for w in ws: w.join()
""",
        timeout=10,
    )
    log = kernel.stop()
    at = log.find(" sleeps in ")
    assert at < 0, (
        "WAIT slept holding a lock: "
        + log[max(0, log.rfind("\n", 0, at)) : log.find("\n", at)].strip()
        + ". Take the context's lock around SUBMIT's bookkeeping only, never around the sleep"
    )


@pytest.mark.kata_gate(
    "poll says POLLIN before the GPU's interrupt reached the driver (a GPU whose interrupts come "
    "a drawn 250 .. 400 ms after the fence)"
)
def test_wait_pollin_only_after_the_interrupt(kernel_py: Any, built: Any, tmp_path: Path) -> None:
    """The interrupt handler is what completes a fence for the driver: before it ran, the
    context is not idle, whatever the hardware's registers say (GET at put, the completion
    register written). Any POLLIN (or COMPLETED) seen before work + interrupt delay passed is
    early; after it, poll(POLLIN) wakes."""
    rng = random_for("kgpu pollin after the interrupt")
    irq_us, work_us = rng.randrange(250_000, 400_000), rng.randrange(30_000, 120_000)
    with kernel_py.Kernel(built, tmp_path / "kernel.log", irq_delay_us=irq_us) as k:
        out = k.program(
            f"""
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a={work_us})
d.push(kgpu.INC, a=0)
t = time.monotonic()
f = d.submit()
early = []
while time.monotonic() - t < ({work_us} + {irq_us}) / 1e6 - 0.03:
    mask, done = d.poll(select.POLLIN, 0), d.get_param(kgpu.PARAM_COMPLETED)
    at = time.monotonic() - t
    if (mask & select.POLLIN or done) and at < ({work_us} + {irq_us}) / 1e6:
        early.append([round(at, 3), mask, done])
    time.sleep(0.015)
out["early"] = early
out["later"] = d.poll(select.POLLIN, 5000) & select.POLLIN
out["at"] = time.monotonic() - t
out["inc"] = d.vram[0]
"""
        )
    assert not out["early"], (
        f"poll(POLLIN)/COMPLETED before the interrupt: [seconds after SUBMIT, poll mask, "
        f"COMPLETED] {out['early'][:4]}, with {work_us / 1e6:.3f} s of work and the interrupt "
        f"{irq_us / 1e6:.3f} s after the fence: POLLIN when the fence the interrupt handler "
        "recorded reaches the last one submitted, not from the hardware's registers"
    )
    assert out["later"] and out["inc"] == 1, (
        f"poll(POLLIN, 5 s) after the interrupt: {out}: poll_wait on the queue the interrupt "
        "handler wakes"
    )


@pytest.mark.kata_gate(
    "poll says POLLOUT when the ring is full, or not when it has room: fill levels drawn at run "
    "time behind a hung command"
)
def test_wait_pollout_by_fill_level(kernel: Any) -> None:
    """POLLOUT means a SUBMIT of one more command would not be EBUSY: with a HANG first, k more
    commands waiting leave room for one more exactly when 1 + k + 1 < 256. The oracle is the
    SUBMIT itself, made after the poll."""
    rng = random_for("kgpu pollout by fill level")
    levels = sorted({253, 254, rng.randrange(0, 253), rng.randrange(200, 254)})
    out = kernel.program(
        f"""
got = []
for k in {levels!r}:
    d = kgpu.Device(); d.map()
    d.push(kgpu.HANG)
    d.submit()
    if k:
        d.submit(k)
    mask = d.poll(select.POLLOUT, 0)
    got.append([k, bool(mask & select.POLLOUT), errno_of(d.submit, 1)])
    d.close()
out["got"] = got
"""
    )
    wrong = [
        f"{k} commands behind the HANG: POLLOUT {pout}, then SUBMIT(1) gave {e!r}"
        for k, pout, e in out["got"]
        if pout != (e == 0) or pout != (k <= 253)
    ]
    assert not wrong, (
        "poll: POLLOUT exactly when the ring has room for one more command: " + "; ".join(wrong)
    )


def test_wait_pollout_when_the_ring_is_full(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.HANG)
d.submit()
d.submit(254)                      # 255 commands waiting: no room
out["full"] = d.poll(select.POLLOUT | select.POLLIN, 0)
out["timed"] = d.poll(select.POLLOUT, 100)
"""
    )
    assert out == {"full": 0, "timed": 0}, f"no POLLOUT when the ring is full, no POLLIN: {out}"


def test_wait_poll_wakes_for_each_completion(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
woke = []
for i in range(5):
    d.push(kgpu.DELAY, a=30_000)
    d.submit()
    t = time.monotonic()
    woke.append(bool(d.poll(select.POLLIN, 5000)))
    out.setdefault("slowest", 0.0)
    out["slowest"] = max(out["slowest"], time.monotonic() - t)
out["woke"] = woke
"""
    )
    assert out["woke"] == [True] * 5 and out["slowest"] < 2.5, (
        f"poll(POLLIN) wakes for each of 5 completions of 30 ms work: {out}"
    )


# --------------------------------------------------------------------------- isolation
@pytest.mark.kata_gate(
    "concurrent SUBMITs on one open get duplicate or lost fences, or commands run twice or never"
)
def test_isolation_many_submitters_on_one_open(kernel: Any, umd: Path) -> None:
    for _ in range(2):
        out = kernel.umd(umd, "threads", 12, 40, timeout=40)
        total = 12 * 40
        assert out["failures"] == 0 and out["distinct_fences"] == total, (
            f"{total} concurrent SUBMITs must get {total} distinct fences without failures: {out}"
        )
        assert "out of order" not in kernel.log(), (
            f"concurrent SUBMITs: the GPU saw fences out of order:\n{kernel.log()[-1500:]}"
        )


@pytest.mark.kata_gate("ThreadSanitizer reports a data race in the driver under concurrent calls")
def test_isolation_no_data_race_under_tsan(
    kata: Any, kernel_py: Any, umd: Path, tmp_path: Path
) -> None:
    from harness.native.isolate import tsan_runtime

    if tsan_runtime() is None:
        pytest.skip("gcc has no ThreadSanitizer runtime (libtsan) here: apt-get install gcc")
    try:
        built = kernel_py.build(kata.source, kata.search_path, sanitize=["thread"])
    except BuildError as e:
        pytest.fail(f"compilation failed:\n{e}", pytrace=False)
    with kernel_py.Kernel(built, tmp_path / "kernel.log") as k:
        k.umd(umd, "threads", 4, 30, timeout=60)
        k.umd(umd, "procs", 2, 20, timeout=60)
        log = k.stop(timeout=60)
    if "FATAL: ThreadSanitizer" in log:
        pytest.skip(f"ThreadSanitizer cannot run on this machine: {log.strip()[:200]}")
    race = log.find("WARNING: ThreadSanitizer")
    assert race < 0, (
        f"ThreadSanitizer found a data race in the kernel process:\n{log[race : race + 3000]}"
    )


@pytest.mark.kata_gate(
    "release frees memory or the context while the GPU channel is still bound (before "
    "kgpu_hw_unbind): contexts closed idle, busy, hung, never mapped, and with their process"
)
def test_isolation_release_frees_only_after_unbind(kernel: Any, umd: Path) -> None:
    """A channel reads its ring, writes its memory and passes its cookie to the interrupt
    handler until kgpu_hw_unbind returns: a kfree or vfree of any of them before is a use
    after free (kshim.c asks the simulated GPU at every free, so it shows even when the engine
    happened not to run at that moment)."""
    rng = random_for("kgpu free after unbind")
    kernel.program(
        f"""
states = {[rng.choice(["idle", "busy", "hung", "unmapped"]) for _ in range(6)]!r}
for s in states:
    d = kgpu.Device()
    if s != "unmapped":
        d.map()
        d.push(kgpu.HANG if s == "hung" else kgpu.DELAY, a=200_000 if s == "busy" else 0)
        f = d.submit()
        if s == "idle":
            d.wait(f, 5 * 10**9)
    d.close()
pid = os.fork()
if pid == 0:
    a = kgpu.Device(); a.map()
    a.push(kgpu.DELAY, a=200_000); a.submit()
    os._exit(0)
os.waitpid(pid, 0)
"""
    )
    kernel.umd(umd, "churn", 4)
    log = kernel.stop()
    at = log.find("use after free")
    assert at < 0, (
        "release: "
        + log[max(0, log.rfind("\n", 0, at)) : log.find("\n", at)].strip()
        + ". kgpu_hw_unbind first (it returns once neither the engine nor the interrupt can "
        "touch the channel), then vfree and kfree"
    )


@pytest.mark.kata_gate(
    "closing a context does not give back what its open allocated before the module unloads: "
    "idle, busy (work in flight), hung and never-mapped contexts, closed or ended with their "
    "process"
)
def test_isolation_close_frees_the_context_at_once(kernel: Any) -> None:
    """The unload report sees only what is left at unload; a driver that keeps closed contexts
    on a list and frees them in module_exit hides its leak there. The kernel's count of what
    the driver holds must be back where it was once the contexts are closed, whatever state
    each was in."""
    kernel.program("kgpu.Device().close()")  # a driver may allocate once, on its first open
    before = kernel.allocated()
    out = kernel.program(
        """
for i in range(4):                       # idle: its work completed
    d = kgpu.Device(); d.map()
    d.push(kgpu.INC, a=0)
    d.wait(d.submit(), 5 * 10**9)
    d.close()
out["busy"] = []
for i in range(4):                       # busy: 300 ms of work in flight at close
    d = kgpu.Device(); d.map()
    d.push(kgpu.DELAY, a=300_000)
    f = d.submit()
    out["busy"].append(d.get_param(kgpu.PARAM_COMPLETED) < f)
    d.close()
for i in range(3):                       # hung: its channel never completes
    d = kgpu.Device(); d.map()
    d.push(kgpu.HANG)
    d.submit()
    d.close()
for i in range(3):                       # never mapped, never submitted
    kgpu.Device().close()
pid = os.fork()
if pid == 0:                             # a process that ends with a busy and a hung context
    a, b = kgpu.Device(), kgpu.Device()
    a.map(); b.map()
    a.push(kgpu.DELAY, a=300_000); a.submit()
    b.push(kgpu.HANG); b.submit()
    os._exit(0)
os.waitpid(pid, 0)
out["closed_at"] = time.monotonic()
"""
    )
    assert out["busy"] == [True] * 4, (
        f"the busy contexts' work had completed before close ({out['busy']}): this test "
        "closes contexts with work in flight"
    )
    deadline = out["closed_at"] + 3.0
    after = kernel.allocated()
    while after != before and time.monotonic() < deadline:  # releases run as the program exits
        time.sleep(0.05)
        after = kernel.allocated()
    assert after == before, (
        f"release: after 16 contexts were opened and closed (idle, busy, hung, never mapped, "
        f"ended with their process) the driver holds {after[0]} kmalloc'd, {after[1]} "
        f"vmalloc_user and {after[2]} libc malloc bytes, {before} before: release must free "
        "what open allocated, at once (and allocate with kmalloc/kzalloc, not libc's malloc)"
    )
