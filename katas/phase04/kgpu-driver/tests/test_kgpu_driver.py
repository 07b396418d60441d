"""Public tests of kgpu-driver: real user programs (Python with fcntl.ioctl/mmap/poll, and umd.c)
drive your kgpu.c through the kernel shim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


# --------------------------------------------------------------------------- ioctl
def test_ioctl_info_and_per_open_state(kernel: Any) -> None:
    out = kernel.program(
        """
a, b = kgpu.Device(), kgpu.Device()
out["a"], out["b"] = a.info(), b.info()
out["prio_before"] = a.get_param(kgpu.PARAM_PRIORITY)
a.set_param(kgpu.PARAM_PRIORITY, 3)
out["prio_a"], out["prio_b"] = a.get_param(kgpu.PARAM_PRIORITY), b.get_param(kgpu.PARAM_PRIORITY)
a.close(); b.close()
"""
    )
    a, b = out["a"], out["b"]
    assert (a["version"], a["ring_entries"], a["vram_bytes"]) == (1, 256, 65536), a
    assert (a["ctx_id"], b["ctx_id"]) == (1, 2), "context ids count opens: 1, 2, ..."
    assert out["prio_before"] == 1, "a new context's priority is 1"
    assert (out["prio_a"], out["prio_b"]) == (3, 1), (
        "SET_PARAM on one open must not change another: keep state in file->private_data"
    )


def test_ioctl_unknown_commands_are_enotty(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device()
buf = bytes(64)
out["nr"] = errno_of(d.ioctl, kgpu.ior(0x3F, kgpu.INFO.size), buf)       # no such command
out["type"] = errno_of(d.ioctl, kgpu.ior(0x00, kgpu.INFO.size, "H"), buf)  # another driver's
out["size"] = errno_of(d.ioctl, kgpu.ior(0x00, 8), buf)                    # INFO, wrong size
out["dir"] = errno_of(d.ioctl, kgpu.iow(0x00, kgpu.INFO.size), buf)        # INFO, wrong direction
out["io"] = errno_of(d.ioctl, kgpu.io(0x00), buf)
"""
    )
    assert out == dict.fromkeys(out, "ENOTTY"), (
        f"a command number the driver does not know (any bit of type, nr, size or direction "
        f"different) is -ENOTTY: {out}"
    )


def test_ioctl_bad_values_are_einval(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device()
out["prio4"] = errno_of(d.set_param, kgpu.PARAM_PRIORITY, 4)
out["readonly"] = errno_of(d.set_param, kgpu.PARAM_SUBMITTED, 7)
out["unknown_get"] = errno_of(d.get_param, 9)
out["pad"] = errno_of(d.ioctl, kgpu.IOC_SET_PARAM, kgpu.PARAM.pack(kgpu.PARAM_PRIORITY, 1, 2))
out["prio"] = d.get_param(kgpu.PARAM_PRIORITY)
"""
    )
    assert {k: v for k, v in out.items() if k != "prio"} == {
        "prio4": "EINVAL", "readonly": "EINVAL", "unknown_get": "EINVAL", "pad": "EINVAL",
    }, out  # fmt: skip
    assert out["prio"] == 1, "a refused SET_PARAM changes nothing"


def test_ioctl_bad_pointers_are_efault(kernel: Any, umd: Path) -> None:
    out = kernel.umd(umd, "efault")
    wrong = {k: v for k, v in out.items() if v != 14}
    assert not wrong, (
        f"every ioctl given a bad user pointer must fail with EFAULT (14), got {wrong}: "
        "copy_from_user/copy_to_user return the bytes NOT copied; nonzero -> -EFAULT"
    )
    after = kernel.program("out['info'] = kgpu.Device().info()")
    assert after["info"]["version"] == 1, "the kernel must survive bad pointers"


def test_ioctl_close_frees_the_context(kernel: Any) -> None:
    kernel.program(
        """
for i in range(10):
    d = kgpu.Device()
    d.info()
    d.close()
"""
    )
    log = kernel.stop()
    assert kernel.returncode == 0, f"the kernel did not unload cleanly:\n{log}"
    assert "kgpu: leak:" not in log, f"release must free what open allocated:\n{log}"


# --------------------------------------------------------------------------- submit
def test_submit_commands_run_on_the_gpu(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a=30_000)
d.push(kgpu.FILL, a=0, length=4096, b=0x5A)
d.push(kgpu.FILL, a=4096, length=100, b=0x11)
out["f1"] = d.submit()
d.wait(out["f1"], 5 * 10**9)
out["filled"] = [bytes(d.vram[:4096]) == b"\\x5a" * 4096, bytes(d.vram[4096:4196]) == b"\\x11" * 100]
out["untouched"] = not any(d.vram[4196:8192])
d.push(kgpu.INC, a=8192)
out["f2"] = d.submit()
d.wait(out["f2"], 5 * 10**9)
out["inc"] = int.from_bytes(d.vram[8192:8200], "little")
out["submitted"] = d.get_param(kgpu.PARAM_SUBMITTED)
out["completed"] = d.get_param(kgpu.PARAM_COMPLETED)
"""
    )
    assert (out["f1"], out["f2"]) == (1, 2), "fences count submissions: 1, 2, ..."
    assert out["filled"] == [True, True] and out["untouched"], (
        "after WAIT returned, the GPU has run the commands (FILL wrote the memory)"
    )
    assert out["inc"] == 1
    assert (out["submitted"], out["completed"]) == (2, 2)


def test_submit_each_command_runs_once_around_the_ring(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
fences = []
for batch in range(12):          # 600 commands: the ring (256) wraps twice
    for i in range(50):
        d.push(kgpu.INC, a=0)
    fences.append(d.submit())
    d.wait(fences[-1], 5 * 10**9)
out["fences"] = fences
out["count"] = int.from_bytes(d.vram[0:8], "little")
"""
    )
    assert out["fences"] == list(range(1, 13))
    assert out["count"] == 600, "every command runs exactly once, also after the ring wraps"


def test_submit_bad_requests(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
out["count0"] = errno_of(d.ioctl, kgpu.IOC_SUBMIT, kgpu.SUBMIT.pack(0, 0, 0))
out["count256"] = errno_of(d.ioctl, kgpu.IOC_SUBMIT, kgpu.SUBMIT.pack(256, 0, 0))
out["flags"] = errno_of(d.ioctl, kgpu.IOC_SUBMIT, kgpu.SUBMIT.pack(1, 1, 0))
out["future_fence"] = errno_of(d.wait, 1, 10**6)
size = kgpu.RING_BYTES + kgpu.VRAM_BYTES
out["map_too_big"] = errno_of(mmap.mmap, d.fd, size + 4096, mmap.MAP_SHARED)
out["map_past_end"] = errno_of(lambda: mmap.mmap(d.fd, 4096, mmap.MAP_SHARED, offset=size))
out["map_private"] = errno_of(mmap.mmap, d.fd, 4096, mmap.MAP_PRIVATE)
m = mmap.mmap(d.fd, kgpu.VRAM_BYTES, mmap.MAP_SHARED, offset=kgpu.MMAP_VRAM)
d.push(kgpu.FILL, a=0, length=16, b=7)
d.wait(d.submit(), 5 * 10**9)
out["vram_alone"] = m[:16] == bytes([7] * 16)
"""
    )
    assert {k: v for k, v in out.items() if k != "vram_alone"} == {
        "count0": "EINVAL", "count256": "EINVAL", "flags": "EINVAL", "future_fence": "EINVAL",
        "map_too_big": "EINVAL", "map_past_end": "EINVAL", "map_private": "EINVAL",
    }, out  # fmt: skip
    assert out["vram_alone"], "mmap at offset KGPU_MMAP_VRAM maps the context's memory alone"


def test_submit_full_ring_is_ebusy(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.HANG)                 # the GPU never reads past this command
out["hang"] = d.submit()
out["full"] = errno_of(d.submit, 255)       # 1 + 255 commands: would overwrite the HANG
out["fits"] = d.submit(254)                 # 1 + 254: fits
out["more"] = errno_of(d.submit, 1)
"""
    )
    assert out == {"hang": 1, "full": "EBUSY", "fits": 2, "more": "EBUSY"}, (
        f"at most {255} commands wait in the ring: one more would overwrite a command the GPU "
        f"has not read (GET): -EBUSY. Got {out}"
    )


def test_submit_wait_is_woken_by_the_interrupt(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.DELAY, a=50_000)
f = d.submit()
t = time.monotonic()
d.wait(f, 10 * 10**9)
out["waited"] = time.monotonic() - t
"""
    )
    assert out["waited"] < 5.0, (
        f"WAIT for 50 ms of work with a 10 s timeout took {out['waited']:.1f} s: the interrupt "
        "handler must wake the waiters (wake_up on the queue WAIT sleeps on)"
    )


def test_submit_latency_picture(kernel: Any, umd: Path, kata: Any, kata_metrics: Any) -> None:
    rows = {
        "WAIT ioctl": kernel.umd(umd, "latency", 200),
        "poll()": kernel.umd(umd, "latency", 200, "poll"),
    }
    for via, r in rows.items():
        assert 0 < r["p50_us"] < 200_000, (
            f"{via}: half the one-command jobs took over {r['p50_us']} µs from SUBMIT to "
            "complete: the waiters are woken by the interrupt, not by their timeout"
        )
    picture = kata.module("picture")
    kata_metrics["svg"] = picture.latency_svg(rows, "submit → complete, 200 one-command jobs")
    kata_metrics["label"] = "your driver's submit → complete latency"
    kata_metrics["WAIT p50 (µs)"] = rows["WAIT ioctl"]["p50_us"]
    kata_metrics["poll p50 (µs)"] = rows["poll()"]["p50_us"]


# --------------------------------------------------------------------------- wait
def test_wait_times_out_on_a_hung_gpu(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.FILL, a=0, length=8, b=1)
d.push(kgpu.HANG)
f = d.submit()
t = time.monotonic()
out["wait"] = errno_of(d.wait, f, 200_000_000)
out["waited"] = time.monotonic() - t
out["zero"] = errno_of(d.wait, f, 0)
out["completed"] = d.get_param(kgpu.PARAM_COMPLETED)
d.close()                        # release a context whose GPU channel is hung
e = kgpu.Device(); e.map()
e.push(kgpu.FILL, a=0, length=8, b=2)
e.wait(e.submit(), 5 * 10**9)
out["other"] = e.vram[0]
""",
        timeout=8,
    )
    assert out["wait"] == "ETIME", f"WAIT on a hung GPU must give up with ETIME, got {out}"
    assert 0.15 <= out["waited"] < 5, f"a 200 ms timeout took {out['waited']:.2f} s"
    assert out["zero"] == "ETIME", "timeout 0: just look (ETIME when not done)"
    assert out["completed"] == 0
    assert out["other"] == 2, "a new context works after a hung one was released"


def test_wait_zero_timeout_when_done(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
d.push(kgpu.NOP)
f = d.submit()
d.wait(f, 5 * 10**9)
out["again"] = errno_of(d.wait, f, 0)
out["older"] = errno_of(d.wait, 0, 0)
"""
    )
    assert out == {"again": 0, "older": 0}, "a completed fence: WAIT returns 0 at once"


def test_wait_poll_says_when_the_context_is_idle(kernel: Any) -> None:
    out = kernel.program(
        """
d = kgpu.Device(); d.map()
out["fresh"] = d.poll(select.POLLIN | select.POLLOUT, 0)
d.push(kgpu.DELAY, a=150_000)
f = d.submit()
out["busy"] = d.poll(select.POLLIN, 0)
t = time.monotonic()
out["later"] = d.poll(select.POLLIN, 10_000)
out["waited"] = time.monotonic() - t
out["done"] = errno_of(d.wait, f, 0)
"""
    )
    pin, pout = 0x001, 0x004
    assert out["fresh"] & pin and out["fresh"] & pout, "a fresh context is idle and has room"
    assert not out["busy"] & pin, "POLLIN only when every submitted fence has completed"
    assert out["later"] & pin and out["waited"] < 5, (
        f"poll(POLLIN, 10 s) must return when the work completes (~150 ms), took "
        f"{out['waited']:.2f} s: call poll_wait on the queue the interrupt handler wakes"
    )
    assert out["done"] == 0


def test_wait_hung_context_does_not_block_another(kernel: Any) -> None:
    out = kernel.program(
        """
import threading
a = kgpu.Device(); a.map()
a.push(kgpu.HANG)
fa = a.submit()
waiter = threading.Thread(target=lambda: out.__setitem__("a", errno_of(a.wait, fa, 1_200_000_000)))
waiter.start()
time.sleep(0.1)                   # a sleeps in WAIT now
b = kgpu.Device(); b.map()
t = time.monotonic()
b.push(kgpu.FILL, a=0, length=4, b=9)
b.wait(b.submit(), 5 * 10**9)
out["b_took"] = time.monotonic() - t
out["b"] = b.vram[0]
waiter.join()
""",
        timeout=8,
    )
    assert out["b"] == 9 and out["a"] == "ETIME"
    assert out["b_took"] < 0.6, (
        f"context b waited {out['b_took']:.2f} s while a slept in WAIT: never hold a lock "
        "shared between contexts while sleeping"
    )


# --------------------------------------------------------------------------- isolation
def test_isolation_two_opens_have_their_own_fences_and_memory(kernel: Any) -> None:
    out = kernel.program(
        """
a, b = kgpu.Device(), kgpu.Device()
a.map(); b.map()
for i in range(3):
    b.push(kgpu.FILL, a=0, length=64, b=0xBB)
    fb = b.submit()
a.push(kgpu.FILL, a=0, length=64, b=0xAA)
fa = a.submit()
a.wait(fa, 5 * 10**9); b.wait(fb, 5 * 10**9)
out["fences"] = [fa, fb]
out["mem"] = [a.vram[0], b.vram[0]]
out["a_waits_b_fence"] = errno_of(a.wait, 3, 0)
a.close()
b.push(kgpu.INC, a=64)
b.wait(b.submit(), 5 * 10**9)
out["b_after"] = int.from_bytes(b.vram[64:72], "little")
"""
    )
    assert out["fences"] == [1, 3], "each context numbers its own fences from 1"
    assert out["mem"] == [0xAA, 0xBB], "each context has its own memory"
    assert out["a_waits_b_fence"] == "EINVAL", "a cannot wait for a fence it never submitted"
    assert out["b_after"] == 1, "closing one context leaves the other working"


def test_isolation_threads_share_one_open(kernel: Any, umd: Path) -> None:
    out = kernel.umd(umd, "threads", 6, 40)
    total = 6 * 40
    assert out["failures"] == 0, f"a SUBMIT or WAIT failed (errno {out['errno']}): {out}"
    assert (out["distinct_fences"], out["max_fence"]) == (total, total), (
        f"{total} SUBMITs from 6 threads must get the fences 1..{total}, each once: {out}. "
        "Choosing the fence and ringing the doorbell is one step under the context's lock"
    )
    assert out["commands_run"] == total


def test_isolation_processes_share_one_open(kernel: Any, umd: Path) -> None:
    out = kernel.umd(umd, "procs", 3, 30)
    assert out["failures"] == 0 and out["distinct_fences"] == 90 and out["commands_run"] == 90, out


def test_isolation_processes_with_their_own_opens(kernel: Any, umd: Path) -> None:
    out = kernel.umd(umd, "own", 3, 30)
    assert out["failures"] == 0 and out["commands_run"] == 90, (
        f"each process's context runs its own 30 commands, with its own context id: {out}"
    )


def test_isolation_release_with_work_in_flight(kernel: Any, umd: Path) -> None:
    out = kernel.umd(umd, "churn", 12)
    assert out["opened"] == 12
    log = kernel.stop()
    assert kernel.returncode == 0, f"the kernel did not unload cleanly:\n{log}"
    assert "still bound" not in log, f"release must unbind the channel:\n{log}"
    assert "kgpu: leak:" not in log, f"release must free everything, busy or hung:\n{log}"


@pytest.mark.needs("valgrind")
def test_isolation_no_leaks_under_valgrind(
    kernel_py: Any, built: Any, umd: Path, tmp_path: Path
) -> None:
    valgrind = [
        "valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
        "--error-exitcode=99", "--quiet",
    ]  # fmt: skip
    with kernel_py.Kernel(built, tmp_path / "kernel.log", wrapper=valgrind) as k:
        k.umd(umd, "churn", 3, timeout=60)
        k.umd(umd, "threads", 2, 3, timeout=60)
        log = k.stop(timeout=60)
    assert k.returncode == 0, (
        f"valgrind found errors or leaks in the kernel process:\n{log[-3000:]}"
    )
    assert "kgpu: leak:" not in log, log
