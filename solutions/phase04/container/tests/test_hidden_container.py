"""Hidden tests of the container kata: other hostnames, namespace subsets and limits, IPC
isolation, and the gates against the shortcuts (chroot for pivot_root, an rlimit for the memory
cgroup, a devices controller that allows everything, driver libraries mounted read-write).
Random values are drawn at run time from the run seed."""

from __future__ import annotations

import ctypes
import os
import random
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from harness.testing import random_for

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


rng = random_for("hostnames, keys and words")  # fresh each run (the run seed)


def _check_clone_flags(rt: Any, spec: Any, s: Any) -> None:
    """clone_flags(s): exactly the or of the spec's CLONE_NEW* flags, a plain int."""
    want = 0
    for name in s.namespaces:
        want |= spec.NAMESPACES[name]
    got = rt.clone_flags(s)
    assert type(got) is int and got == want, (
        f"clone_flags, namespaces {s.namespaces}: {got!r}, expected {want:#x}"
    )


# --- namespaces --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "asked", [("uts",), ("pid", "ipc"), ("network", "user", "mount"), ("user", "uts", "pid")]
)
def test_namespaces_subsets(
    run: Any, rt: Any, spec: Any, host: Any, asked: tuple[str, ...]
) -> None:
    name = f"h{rng.randrange(10**6)}"
    script = "hostname; " + "; ".join(f"readlink /proc/self/ns/{n}" for n in HOST_NS)
    s = spec.Spec(args=[host.busybox(), "sh", "-c", script], namespaces=asked, hostname=name)
    _check_clone_flags(rt, spec, s)
    r = ok(run(s))
    if "uts" in asked:
        assert r.lines[0] == name, (
            f"set_hostname, namespaces {asked}: the container's hostname is {r.lines[0]!r}, "
            f"the spec's is {name!r}"
        )
    for ns, link in zip(HOST_NS, r.lines[1:], strict=True):
        shared = link == os.readlink(f"/proc/self/ns/{ns}")
        wrong = (
            "shared with the host, it should be new"
            if shared
            else "new, it should be the host's (the spec does not ask for it)"
        )
        assert shared == (SPEC_NS[ns] not in asked), (
            f"enter_namespaces, namespaces {asked}: the {ns} namespace is {wrong}"
        )


@pytest.mark.kata_gate(
    "in the container's user namespace root is not the host's root: uid_map and gid_map must "
    "map ids 0.. to the host's 0.. over the whole range (0 0 4294967295), so id -u and id -g "
    "say 0 (namespace sets drawn at random, the user namespace among them)"
)
def test_namespaces_user_ids_are_mapped_whole(run: Any, rt: Any, spec: Any, host: Any) -> None:
    """write_id_maps, checked for both maps and both ids, on namespace sets drawn fresh each
    run: an unmapped id reads as the overflow id 65534 inside, and a map of a single id (or
    a uid map without the gid map) leaves every other id unmapped."""
    others = ["pid", "mount", "uts", "ipc", "network"]
    for _ in range(2):
        asked = ("user", *rng.sample(others, rng.randrange(len(others) + 1)))
        script = "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map"
        s = spec.Spec(args=[host.busybox(), "sh", "-c", script], namespaces=asked)
        _check_clone_flags(rt, spec, s)
        r = ok(run(s))
        got = [" ".join(line.split()) for line in r.lines]
        want = ["0", "0", "0 0 4294967295", "0 0 4294967295"]
        assert got == want, (
            f"write_id_maps, namespaces {asked}: id -u, id -g, uid_map and gid_map inside read "
            f"{got}, expected {want}"
        )


def test_namespaces_ipc_objects_stay_on_the_host(run: Any, spec: Any, host: Any) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    key = rng.randrange(1 << 20, 1 << 30)
    shmid = libc.shmget(key, 4096, 0o1600)  # IPC_CREAT | 0600
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    try:
        r = ok(run(spec.Spec(args=[host.busybox(), "cat", "/proc/sysvipc/shm"])))
        keys = {int(line.split()[0]) for line in r.lines[1:]}
        assert key not in keys, "the container sees the host's System V shared memory"
        on_host = {
            int(x.split()[0]) for x in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        }
        assert key in on_host, "the host's shared memory segment is gone after the container ran"
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
    assert (r1.lines, r2.lines) == ([word], ["none"]), (
        f"setup_rootfs: a file of one rootfs must be seen by its container only: the first "
        f"container read {r1.lines}, the second {r2.lines}"
    )


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
    assert not r.timed_out, f"the pids-limited container did not finish: {r.stderr[-400:]}"
    started = r.lines.count("ok")
    # In the cgroup: the shell and the sleeps that forked (the runtime's child left it).
    assert started == limit - 1, f"{started} sleeps started under pids.max={limit}"
    assert "can't fork" in r.stderr and r.counters.get("pids_refused", 0) > 0, (
        f"pids.max={limit}: no fork was refused by the pids controller (counters "
        f"{r.counters}): {r.stderr[-400:]}"
    )


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
    s = _gpu_spec(spec, rootfs, script)
    _premade(rootfs, s.devices)
    r = run(s)
    _no_node_missing(r.stderr, "restrict_devices")
    for node in ("nvidia0", "nvidiactl", "nvidia-uvm", "kgpu0"):
        assert f"can't open '/dev/{node}': No such device or address" in r.stderr, (
            f"restrict_devices: /dev/{node} is allowed: opening it reaches the (absent) driver, "
            f"ENXIO; the container said: {r.stderr[-600:]}"
        )
    for node in ("nvidia1", "nvidia2"):
        assert f"can't open '/dev/{node}': Operation not permitted" in r.stderr, (
            f"restrict_devices: /dev/{node} is refused by the spec: opening it is EPERM; the "
            f"container said: {r.stderr[-600:]}"
        )


def _premade(root: Path, devices: list[Any]) -> None:
    """Every node of the spec made in the rootfs beforehand (0666; create_device_nodes makes it
    again): the devices controller's tests then test the controller, whatever
    create_device_nodes did (test_devices_nodes_are_the_specs checks that one)."""
    for d in devices:
        path = root / d.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(path):
            os.mknod(path, d.file_type | 0o666, os.makedev(d.major, d.minor))


def _no_node_missing(said: str, where: str) -> None:
    missing = re.findall(r"can't open '?(/dev/[^':]+)'?: No such file or directory", said)
    assert not missing, (
        f"{where}: the device nodes {missing} are missing in the container (ENOENT: nothing was "
        "refused or allowed; create_device_nodes must make every node of spec.devices, the "
        "refused ones too)"
    )


def _free_char_majors() -> list[int]:
    """Character majors of the local/experimental range (234-254) no driver of this machine
    has (/proc/devices): an allowed node there gives ENXIO, a denied one EPERM."""
    used, char = set(), False
    for line in Path("/proc/devices").read_text().splitlines():
        if line.endswith(":"):
            char = line.startswith("Character")
        elif char and line.strip():
            used.add(int(line.split()[0]))
    return [m for m in range(234, 255) if m not in used]


def _run_seed() -> int:
    """A seed for this test's drawn devices, from the run seed (--kata-seed reproduces it);
    every failure message names it."""
    return random_for().randrange(1 << 32)


@pytest.mark.kata_gate(
    "a device node opens in the container although the spec does not allow it, or an allowed "
    "one is refused: GPUs given and refused, and nodes the spec never names (other GPUs, "
    "other minors and majors), drawn at run time"
)
def test_devices_only_the_allowed_nodes_open(
    run: Any, spec: Any, host: Any, kata: Any, tmp_path: Path, cgroup_version: int
) -> None:
    """The devices controller denies every device and allows the list (runc: deny 'a', then
    allow each rule). Nodes the spec never names are made in the rootfs beforehand (an image
    can ship any node; root in a container without a user namespace can mknod one)."""
    seed = _run_seed()
    r = random.Random(seed)
    root = kata.module("rootfs").build(tmp_path / "rootfs", host.busybox())
    gpus = r.sample(range(16), 5)
    visible, hidden = tuple(sorted(gpus[: r.randint(1, 3)])), tuple(sorted(gpus[3:]))
    kgpu = r.randrange(4)
    devices = [
        *spec.nvidia_devices(visible, hidden=hidden),
        spec.Device(f"/dev/kgpu{kgpu}", spec.KGPU_MAJOR, kgpu),
    ]
    unnamed = {f"nvidia{i}": (spec.NVIDIA_MAJOR, i) for i in r.sample(range(16, 255), 2)}
    unnamed[f"kgpu{kgpu + 4}"] = (spec.KGPU_MAJOR, kgpu + 4)
    unnamed["uvm-tools"] = (spec.NVIDIA_UVM_MAJOR, r.randrange(1, 256))
    free = [
        m
        for m in _free_char_majors()
        if m not in (spec.NVIDIA_MAJOR, spec.NVIDIA_UVM_MAJOR, spec.KGPU_MAJOR)
    ]
    if free:
        major = r.choice(free)
        unnamed[f"dev{major}"] = (major, r.randrange(256))
    for name, (major, minor) in unnamed.items():
        os.mknod(root / "dev" / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    _premade(root, devices)
    allowed = [d.path for d in devices if d.allow]
    refused = [d.path for d in devices if not d.allow] + [f"/dev/{n}" for n in unnamed]
    # a subshell per node: a failed redirection ends only it (POSIX: `:` is a special built-in)
    script = "".join(f"(: < {p}) && echo '{p} opened'; " for p in (*allowed, *refused)) + "true"
    res = run(
        spec.Spec(
            args=["/bin/sh", "-c", script],
            rootfs=str(root),
            devices=devices,
            restrict_devices=True,
            cgroup_name="sampled",
        )
    )
    assert not res.timed_out and res.exit_code == 0, (
        f"restrict_devices (seed {seed}): the probe did not run: {res.stderr[-800:]}"
    )
    out = res.stdout + res.stderr
    _no_node_missing(out, f"restrict_devices (seed {seed})")

    def said(p: str, error: str) -> bool:
        return re.search(rf"can't open '?{re.escape(p)}'?: {error}", out) is not None

    wrong = [
        f"{p} (allowed) gives no ENXIO" for p in allowed if not said(p, "No such device or address")
    ] + [
        f"{p} ({'refused' if p in [d.path for d in devices] else 'never named'}) gives no EPERM"
        for p in refused
        if not said(p, "Operation not permitted")
    ]
    assert not wrong, (
        f"restrict_devices (seed {seed}; GPUs {visible} given, {hidden} refused): {wrong}; the "
        f"container said:\n{out[-1200:]}"
    )


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
    assert r.lines[:2] == ["original", "nvml"], (
        f"bind_mounts: the driver libraries read {r.lines[:2]} in the container"
    )
    assert r.stderr.count("Read-only file system") == 3, (
        f"bind_mounts: the three writes into the driver libraries must fail read-only: "
        f"{r.stderr[-600:]}"
    )
    assert lib.read_text() == "original\n" and single.read_text() == "nvml\n", (
        "bind_mounts: a write in the container changed the host's driver library"
    )
    assert not (driver / "new").exists(), (
        "bind_mounts: a file created in the container appeared in the host's driver directory"
    )


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
    assert (data / "out").read_text() == "hi\n", (
        "bind_mounts: a read-write mount asked for: the container's write is not on the host"
    )
