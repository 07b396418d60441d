"""Hidden tests of the container kata: other hostnames, namespace subsets and limits, IPC
isolation, and the gates against the shortcuts (chroot for pivot_root, an rlimit for the memory
cgroup, a devices controller that allows everything, driver libraries mounted read-write).
Random values are drawn at run time from a seeded generator."""

from __future__ import annotations

import ctypes
import os
import random
from pathlib import Path
from typing import Any

import pytest

HOST_NS = ("pid", "mnt", "uts", "ipc", "net", "user")
SPEC_NS = {
    "pid": "pid",
    "mnt": "mount",
    "uts": "uts",
    "ipc": "ipc",
    "net": "network",
    "user": "user",
}


def ok(result: Any) -> Any:
    assert not result.timed_out, f"the container did not finish: {result.stderr[-400:]}"
    assert result.exit_code == 0, (
        f"pid 1 ended with exit {result.exit_code}, signal {result.signal}:\n{result.stderr[-800:]}"
    )
    return result


rng = random.Random(0xC0A7)


# --- namespaces --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "asked", [("uts",), ("pid", "ipc"), ("network", "user", "mount"), ("user", "uts", "pid")]
)
def test_namespaces_subsets(run: Any, spec: Any, host: Any, asked: tuple[str, ...]) -> None:
    name = f"h{rng.randrange(10**6)}"
    script = "hostname; " + "; ".join(f"readlink /proc/self/ns/{n}" for n in HOST_NS)
    r = ok(
        run(spec.Spec(args=[host.busybox(), "sh", "-c", script], namespaces=asked, hostname=name))
    )
    if "uts" in asked:
        assert r.lines[0] == name
    for ns, link in zip(HOST_NS, r.lines[1:], strict=True):
        assert (link == os.readlink(f"/proc/self/ns/{ns}")) == (SPEC_NS[ns] not in asked), ns


def test_namespaces_ipc_objects_stay_on_the_host(run: Any, spec: Any, host: Any) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    key = rng.randrange(1 << 20, 1 << 30)
    shmid = libc.shmget(key, 4096, 0o1600)  # IPC_CREAT | 0600
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    try:
        r = ok(run(spec.Spec(args=[host.busybox(), "cat", "/proc/sysvipc/shm"])))
        keys = {int(line.split()[0]) for line in r.lines[1:]}
        assert key not in keys, "the container sees the host's System V shared memory"
        assert key in {
            int(x.split()[0]) for x in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        }
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


# --- rootfs ------------------------------------------------------------------------------


@pytest.mark.kata_gate(
    "the container's root is not a mount of the rootfs: chroot(2) only changes path lookup, "
    "the host's tree stays mounted in the container and root escapes it (use pivot_root and "
    "detach the old root)"
)
def test_rootfs_no_escape_through_the_mount_namespace(run: Any, spec: Any, rootfs: Path) -> None:
    """setns(2) into a mount namespace sets the caller's root to that namespace's root: after
    chroot it is still the host's /, after pivot_root and detaching the old root it is the
    rootfs. Root in the container may do it to its own namespace (busybox nsenter)."""
    script = "nsenter --mount=/proc/self/ns/mnt /bin/busybox ls /; cat /proc/self/mountinfo"
    r = ok(run(spec.Spec(args=["/bin/sh", "-c", script], rootfs=str(rootfs))))
    host_only = set(os.listdir("/")) - set(os.listdir(rootfs))
    seen = set(r.lines) & host_only
    assert not seen, f"the container reached the host's / and listed {sorted(seen)}"
    points = {line.split()[4] for line in r.lines if line.count(" - ") == 1}
    assert "/" in points, f"no mount at / inside the container: {sorted(points)}"


def test_rootfs_each_container_sees_its_own_files(
    run: Any, spec: Any, rootfs: Path, tmp_path: Path, host: Any, kata: Any
) -> None:
    other = tmp_path / "other"
    kata.module("rootfs").build(other, host.busybox())
    word = f"w{rng.randrange(10**6)}"
    (other / "root" / "word").write_text(word)
    r1 = ok(
        run(spec.Spec(args=["/bin/sh", "-c", "cat /root/word || echo none"], rootfs=str(other)))
    )
    r2 = ok(
        run(
            spec.Spec(
                args=["/bin/sh", "-c", "cat /root/word 2>/dev/null || echo none"],
                rootfs=str(rootfs),
            )
        )
    )
    assert (r1.lines, r2.lines) == ([word], ["none"])


# --- cgroups -----------------------------------------------------------------------------


@pytest.mark.kata_gate(
    "the memory limit is not the cgroup's: an allocation past it must be killed by the "
    "kernel's OOM killer (SIGKILL, counted in the cgroup), not refused by an rlimit"
)
def test_cgroups_oom_killer_kills_past_the_limit(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int
) -> None:
    limit = rng.choice((40, 48)) << 20
    s = spec.Spec(
        args=["/bin/sh", "-c", f"exec dd if=/dev/zero of=/dev/null bs={2 * limit >> 20}M count=1"],
        rootfs=str(rootfs),
        memory_limit=limit,
        pids_limit=20,
        cgroup_name="oomed",
    )
    r = run(s)
    assert r.signal == 9, f"dd past the limit: exit {r.exit_code}, signal {r.signal}: {r.stderr}"
    assert r.counters.get("oom_kill", 0) >= 1, r.counters
    s.args = ["/bin/sh", "-c", f"exec dd if=/dev/zero of=/dev/null bs={limit // 2 >> 20}M count=1"]
    s.cgroup_name = "fits"
    ok(run(s))


def test_cgroups_pids_limit_counts_exactly(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int
) -> None:
    limit = rng.randrange(6, 10)
    script = "for i in $(seq 20); do sleep 3 & echo ok; done; echo end"
    s = spec.Spec(
        args=["/bin/sh", "-c", script], rootfs=str(rootfs), pids_limit=limit, cgroup_name="exact"
    )
    r = run(s, timeout=15)
    assert not r.timed_out
    started = r.lines.count("ok")
    # In the cgroup: the shell and the sleeps that forked (the runtime's child left it).
    assert started == limit - 1, f"{started} sleeps started under pids.max={limit}"
    assert "can't fork" in r.stderr and r.counters.get("pids_refused", 0) > 0


# --- devices -----------------------------------------------------------------------------


def _gpu_spec(spec: Any, rootfs: Path, script: str, **kw: Any) -> Any:
    devs = [
        *spec.nvidia_devices((0,), hidden=(1, 2)),
        spec.Device("/dev/kgpu0", spec.KGPU_MAJOR, 0),
    ]
    return spec.Spec(
        args=["/bin/sh", "-c", script],
        rootfs=str(rootfs),
        devices=devs,
        restrict_devices=True,
        cgroup_name="gpu",
        **kw,
    )


@pytest.mark.kata_gate(
    "a device the spec does not allow still opens: the devices controller must deny every "
    "device and allow only the listed ones (never 'a *:* rwm')"
)
def test_devices_hidden_gpus_are_refused(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int
) -> None:
    script = (
        "for d in nvidia0 nvidia1 nvidia2 nvidiactl nvidia-uvm kgpu0; do cat /dev/$d; done; true"
    )
    r = run(_gpu_spec(spec, rootfs, script))
    for node in ("nvidia0", "nvidiactl", "nvidia-uvm", "kgpu0"):
        assert f"can't open '/dev/{node}': No such device or address" in r.stderr, r.stderr
    for node in ("nvidia1", "nvidia2"):
        assert f"can't open '/dev/{node}': Operation not permitted" in r.stderr, r.stderr


def test_devices_rules_in_the_cgroup(
    rt: Any, spec: Any, rootfs: Path, cgroup_version: int, run: Any
) -> None:
    if cgroup_version == 2:
        pytest.skip("cgroup v2 has no devices.list: the rules are an eBPF program")
    s = _gpu_spec(spec, rootfs, "true")
    cg = rt.create_cgroup(s)
    try:
        rt.restrict_devices(s, cg)
        rules = set(Path(cg["devices"], "devices.list").read_text().split("\n")) - {""}
    finally:
        rt.remove_cgroup(cg)
    want = {d.rule() for d in (*spec.DEFAULT_DEVICES, *s.devices) if d.allow}
    assert rules == want, f"devices.list: {sorted(rules)}"


@pytest.mark.kata_gate(
    "the driver libraries are mounted read-write: a container could overwrite the host's "
    "libcuda (bind, then remount MS_BIND | MS_REMOUNT | MS_RDONLY)"
)
def test_devices_driver_libraries_are_read_only(
    run: Any, spec: Any, rootfs: Path, tmp_path: Path
) -> None:
    driver = tmp_path / "driver"
    driver.mkdir()
    lib = driver / "libcuda.so.1"
    lib.write_text("original\n")
    single = tmp_path / "libnvidia-ml.so.1"
    single.write_text("nvml\n")
    script = (
        "cat /usr/lib/nvidia/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1; "
        "echo evil > /usr/lib/nvidia/libcuda.so.1; echo evil > /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1; "
        "touch /usr/lib/nvidia/new; true"
    )
    s = spec.Spec(
        args=["/bin/sh", "-c", script],
        rootfs=str(rootfs),
        mounts=[
            spec.Mount(str(driver), "/usr/lib/nvidia"),
            spec.Mount(str(single), "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
        ],
    )
    r = ok(run(s))
    assert r.lines[:2] == ["original", "nvml"]
    assert r.stderr.count("Read-only file system") == 3, r.stderr
    assert lib.read_text() == "original\n" and single.read_text() == "nvml\n"
    assert not (driver / "new").exists()


def test_devices_writable_bind_when_asked(
    run: Any, spec: Any, rootfs: Path, tmp_path: Path
) -> None:
    data = tmp_path / "scratch"
    data.mkdir()
    s = spec.Spec(
        args=["/bin/sh", "-c", "echo hi > /data/out"],
        rootfs=str(rootfs),
        mounts=[spec.Mount(str(data), "/data", readonly=False)],
    )
    ok(run(s))
    assert (data / "out").read_text() == "hi\n"
