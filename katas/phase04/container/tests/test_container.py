"""Public tests of the container runtime. Each one runs real containers: root, namespaces and
(for cgroups, devices) a writable cgroup file system are needed; elsewhere they skip with what
to run. Every cgroup a test makes is removed afterwards, whatever your code did."""

from __future__ import annotations

import os
import stat
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


def sh(busybox: str, script: str) -> list[str]:
    return [busybox, "sh", "-c", script]


def ok(result: Any) -> Any:
    assert not result.timed_out, f"the container did not finish: {result.stderr[-400:]}"
    assert result.exit_code == 0, (
        f"pid 1 ended with exit {result.exit_code}, signal {result.signal}:\n{result.stderr[-800:]}"
    )
    return result


# --- task "namespaces" -------------------------------------------------------------------


def test_namespaces_clone_flags(rt: Any, spec: Any) -> None:
    s = spec.Spec(args=["/bin/true"])
    assert rt.clone_flags(s) == (
        spec.CLONE_NEWPID
        | spec.CLONE_NEWNS
        | spec.CLONE_NEWUTS
        | spec.CLONE_NEWIPC
        | spec.CLONE_NEWNET
        | spec.CLONE_NEWUSER
    )
    s.namespaces = ("uts", "mount")
    assert rt.clone_flags(s) == spec.CLONE_NEWUTS | spec.CLONE_NEWNS


def test_namespaces_pid_1_and_hostname(run: Any, spec: Any, host: Any) -> None:
    before = os.uname().nodename
    r = ok(run(spec.Spec(args=sh(host.busybox(), "echo $$; hostname"), hostname="kata-box")))
    assert r.lines == ["1", "kata-box"], (
        "the shell should be pid 1 of a new pid namespace and see its own hostname"
    )
    assert os.uname().nodename == before, "the host's hostname changed: use a new UTS namespace"


def test_namespaces_each_one_is_new(run: Any, spec: Any, host: Any) -> None:
    script = "; ".join(f"readlink /proc/self/ns/{n}" for n in HOST_NS)
    r = ok(run(spec.Spec(args=sh(host.busybox(), script))))
    inside = dict(zip(HOST_NS, r.lines, strict=True))
    for name in HOST_NS:
        assert inside[name] != os.readlink(f"/proc/self/ns/{name}"), (
            f"the container shares the host's {name} namespace ({inside[name]})"
        )


def test_namespaces_only_the_asked_ones(run: Any, spec: Any, host: Any) -> None:
    """A spec without "network" keeps the host's network, as `docker run --network host`."""
    script = "; ".join(f"readlink /proc/self/ns/{n}" for n in HOST_NS)
    asked = ("pid", "uts", "mount")
    r = ok(run(spec.Spec(args=sh(host.busybox(), script), namespaces=asked)))
    for name, link in zip(HOST_NS, r.lines, strict=True):
        same = link == os.readlink(f"/proc/self/ns/{name}")
        assert same == (SPEC_NS[name] not in asked), f"{name}: {link}"


def test_namespaces_network_is_only_loopback(run: Any, spec: Any, host: Any) -> None:
    r = ok(run(spec.Spec(args=sh(host.busybox(), "cat /proc/net/dev"))))
    devices = [line.split(":")[0].strip() for line in r.lines[2:]]
    assert devices == ["lo"], f"a new network namespace has only lo; saw {devices}"


def test_namespaces_root_inside_is_mapped(run: Any, spec: Any, host: Any) -> None:
    r = ok(run(spec.Spec(args=sh(host.busybox(), "id -u; cat /proc/self/uid_map"))))
    assert r.lines[0] == "0"
    assert r.lines[1].split()[:2] == ["0", "0"], f"uid_map inside: {r.lines[1:]}"


def test_namespaces_a_hung_container_is_killed(run: Any, spec: Any, rt: Any, runner: Any) -> None:
    """A container that never exits is cut at the timeout and nothing of it survives: pid 1
    dying takes its whole pid namespace with it (the runner kills pid 1 and its parent)."""
    import time
    import types

    hung = types.SimpleNamespace(**{k: getattr(rt, k) for k in dir(rt) if not k.startswith("__")})

    def set_hostname_then_hang(s: Any) -> None:
        rt.set_hostname(s)
        time.sleep(60)

    hung.set_hostname = set_hostname_then_hang
    t = time.monotonic()
    r = runner.run(hung, spec.Spec(args=["/bin/true"]), timeout=1.0)
    assert r.timed_out and time.monotonic() - t < 5, "the run was not cut at its timeout"
    assert r.pid1 > 0
    deadline = time.monotonic() + 3
    while _running(r.pid1) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _running(r.pid1), f"pid 1 ({r.pid1}) of the hung container is still running"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state not in "ZX"  # a zombie waits for init to reap it: it runs nothing


# --- task "rootfs" -----------------------------------------------------------------------


def test_rootfs_sees_only_the_rootfs(run: Any, spec: Any, rootfs: Path) -> None:
    (rootfs / "root" / "marker").write_text("from the image\n")
    r = ok(
        run(
            spec.Spec(
                args=["/bin/sh", "-c", "ls /; cat /root/marker /etc/hostname"], rootfs=str(rootfs)
            )
        )
    )
    listed = set(r.lines[:-2])
    assert {"bin", "proc", "etc", "dev"} <= listed
    assert "home" not in listed and "usr" in listed and "sys" in listed, listed
    assert r.lines[-2:] == ["from the image", "rootfs"]


def test_rootfs_proc_shows_the_containers_processes(run: Any, spec: Any, rootfs: Path) -> None:
    script = "sleep 5 & ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; echo"
    r = ok(run(spec.Spec(args=["/bin/sh", "-c", script], rootfs=str(rootfs))))
    pids = [int(p) for p in r.lines[0].split()]
    assert pids[0] == 1 and len(pids) <= 8 and max(pids) < 20, (
        f"/proc inside should list the container's few processes, not the host's: {pids}"
    )


def test_rootfs_leaves_the_host_untouched(run: Any, spec: Any, rootfs: Path) -> None:
    """The container's mounts stay in its mount namespace (the fixture also checks that none
    appears in the host's) and its /proc is not the host's."""
    r = ok(run(spec.Spec(args=["/bin/sh", "-c", "cat /proc/self/mountinfo"], rootfs=str(rootfs))))
    points = [line.split()[4] for line in r.lines]
    assert "/proc" in points, f"mount a fresh proc on /proc: {points}"
    assert not any(p.startswith("/.old") or p.startswith("/sys/fs/cgroup") for p in points), points


# --- task "cgroups" ----------------------------------------------------------------------


def test_cgroups_limits_are_written(
    rt: Any, spec: Any, host: Any, cgroup_version: int, run: Any
) -> None:
    s = spec.Spec(args=["/bin/true"], memory_limit=48 << 20, pids_limit=12, cgroup_name="written")
    cg = rt.create_cgroup(s)
    try:
        if cgroup_version == 2:
            d = Path(cg["unified"])
            assert (d / "memory.max").read_text().strip() == str(48 << 20)
            assert (d / "pids.max").read_text().strip() == "12"
        else:
            assert set(cg) >= {"memory", "pids"}, cg
            mem = Path(cg["memory"]) / "memory.limit_in_bytes"
            assert mem.read_text().strip() == str(48 << 20)
            assert (Path(cg["pids"]) / "pids.max").read_text().strip() == "12"
        assert all(
            Path(d).parent == host.cgroup_base(c if c != "unified" else "memory")
            for c, d in cg.items()
        )
    finally:
        rt.remove_cgroup(cg)
    assert not any(Path(d).exists() for d in cg.values()), "remove_cgroup left the cgroup"


def test_cgroups_the_container_is_inside(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int, host: Any
) -> None:
    s = spec.Spec(
        args=["/bin/cat", "/proc/self/cgroup"],
        rootfs=str(rootfs),
        memory_limit=64 << 20,
        pids_limit=16,
        cgroup_name="inside",
    )
    r = ok(run(s))
    paths = {line.split(":", 2)[1]: line.split(":", 2)[2] for line in r.lines}
    want = ("",) if cgroup_version == 2 else ("memory", "pids")
    for controller in want:
        top = host.CGROUP_ROOT / controller
        want_path = "/" + str(
            (host.cgroup_base(controller or "memory") / "inside").relative_to(top)
        )
        assert paths.get(controller) == want_path, (
            f"pid 1 is not in the container's {controller or 'v2'} cgroup: {r.lines}"
        )


def test_cgroups_memory_limit_bites(run: Any, spec: Any, rootfs: Path, cgroup_version: int) -> None:
    def dd(mib: int) -> Any:
        script = f"exec dd if=/dev/zero of=/dev/null bs={mib}M count=1"
        s = spec.Spec(
            args=["/bin/sh", "-c", script],
            rootfs=str(rootfs),
            memory_limit=32 << 20,
            cgroup_name=f"dd{mib}",
        )
        return run(s)

    small = ok(dd(8))
    assert "1+0 records out" in small.stderr
    big = dd(64)
    assert not big.timed_out
    assert big.exit_code != 0, "a 64 MiB buffer fitted under a 32 MiB memory limit"


def test_cgroups_fork_bomb_is_refused(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int
) -> None:
    script = "for i in $(seq 40); do sleep 1 & done 2>/dev/null; echo started; wait"
    s = spec.Spec(
        args=["/bin/sh", "-c", script], rootfs=str(rootfs), pids_limit=10, cgroup_name="bomb"
    )
    r = run(s, timeout=15)
    assert not r.timed_out
    assert r.counters.get("pids_refused", 0) > 0, (
        f"40 background processes under pids.max=10 and no fork was refused: {r.counters}"
    )


# --- task "devices" ----------------------------------------------------------------------


def test_devices_nodes_are_created(rt: Any, spec: Any, rootfs: Path) -> None:
    devs = [*spec.nvidia_devices((0,)), spec.Device("/dev/kgpu0", spec.KGPU_MAJOR, 0)]
    rt.create_device_nodes(spec.Spec(args=["/bin/true"], rootfs=str(rootfs), devices=devs))
    for d in devs:
        st = os.stat(rootfs / d.path.lstrip("/"))
        assert stat.S_ISCHR(st.st_mode), f"{d.path} is not a character device"
        assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (d.major, d.minor), d.path
        assert stat.S_IMODE(st.st_mode) == d.mode, f"{d.path}: mode {oct(st.st_mode)}"


def test_devices_allowed_node_reaches_the_driver(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int
) -> None:
    """No driver owns major 195 on this machine: an allowed open reaches the kernel's lookup of
    the driver and fails with ENXIO ("No such device or address"), as on a host where the
    nvidia module is not loaded."""
    devs = [*spec.nvidia_devices((0,)), spec.Device("/dev/kgpu0", spec.KGPU_MAJOR, 0)]
    script = "cat /dev/nvidia0; cat /dev/kgpu0; echo x > /dev/null && echo null-ok"
    s = spec.Spec(
        args=["/bin/sh", "-c", script],
        rootfs=str(rootfs),
        devices=devs,
        restrict_devices=True,
        cgroup_name="devs",
    )
    r = run(s)
    assert "null-ok" in r.lines, f"/dev/null must stay usable: {r.stderr}"
    for node in ("/dev/nvidia0", "/dev/kgpu0"):
        assert f"can't open '{node}': No such device or address" in r.stderr, r.stderr


def test_devices_ebpf_filter_on_cgroup2(
    run: Any, rt: Any, spec: Any, host: Any, rootfs: Path, cgroup_version: int
) -> None:
    """cgroup v2 has no devices files: restrict_devices gets {"unified": directory} and attaches
    a BPF_PROG_TYPE_CGROUP_DEVICE program there. A v1 host with systemd's "hybrid" layout
    mounts the v2 hierarchy at /sys/fs/cgroup/unified, where the program works the same: this
    test hands your function such a directory and opens the nodes from a process inside it."""
    import errno

    top = host.cgroup2_dir()
    if top is None:
        pytest.skip("no cgroup v2 hierarchy is mounted here (/sys/fs/cgroup or .../unified)")
    d = top / spec.CGROUP_PARENT / str(os.getpid()) / "ebpf"
    d.mkdir(parents=True)
    devs = [*spec.nvidia_devices((0,), hidden=(1,)), spec.Device("/dev/kgpu0", spec.KGPU_MAJOR, 0)]
    s = spec.Spec(args=["/bin/true"], rootfs=str(rootfs), devices=devs, restrict_devices=True)
    rt.create_device_nodes(s)
    rt.restrict_devices(s, {"unified": str(d)})
    names = ("null", "zero", "nvidia0", "nvidiactl", "nvidia-uvm", "kgpu0", "nvidia1", "urandom")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: joins the cgroup, opens, reports
        try:
            (d / "cgroup.procs").write_text(str(os.getpid()))
            got = []
            for name in names:
                try:
                    os.close(os.open(rootfs / "dev" / name, os.O_RDONLY))
                    got.append("ok")
                except OSError as e:
                    got.append(errno.errorcode.get(e.errno, str(e.errno)))
            os.write(w, " ".join(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    got = dict(zip(names, os.read(r, 4096).decode().split(), strict=True))
    os.close(r)
    want = {"null": "ok", "zero": "ok", "nvidia0": "ENXIO", "nvidiactl": "ENXIO"}
    want |= {"nvidia-uvm": "ENXIO", "kgpu0": "ENXIO", "nvidia1": "EPERM", "urandom": "ok"}
    assert got == want, f"opened from a process in {d}"


def test_devices_driver_libraries_are_bind_mounted(
    run: Any, spec: Any, rootfs: Path, tmp_path: Path
) -> None:
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_text("libcuda stand-in\n")
    s = spec.Spec(
        args=["/bin/cat", "/usr/lib/nvidia/libcuda.so.1"],
        rootfs=str(rootfs),
        mounts=[spec.Mount(str(driver), "/usr/lib/nvidia")],
    )
    r = ok(run(s))
    assert r.lines == ["libcuda stand-in"]


def test_cgroups_what_the_limits_did(
    run: Any, spec: Any, rootfs: Path, cgroup_version: int, kata: Any, kata_metrics: Any
) -> None:
    """The table in the README, from your runtime: what each limit did to a workload, and how
    long each step of a container's start took."""
    cases = [
        (
            "dd bs=8M (memory.limit 32 MiB)",
            "exec dd if=/dev/zero of=/dev/null bs=8M count=1",
            32,
            None,
        ),
        (
            "dd bs=64M (memory.limit 32 MiB)",
            "exec dd if=/dev/zero of=/dev/null bs=64M count=1",
            32,
            None,
        ),
        (
            "40 x sleep & (pids.max 10)",
            "for i in $(seq 40); do sleep 1 & done 2>/dev/null; wait",
            None,
            10,
        ),
    ]
    rows, steps = [], {}
    for i, (what, script, mib, pids) in enumerate(cases):
        s = spec.Spec(
            args=["/bin/sh", "-c", script],
            rootfs=str(rootfs),
            memory_limit=None if mib is None else mib << 20,
            pids_limit=pids,
            cgroup_name=f"table{i}",
        )
        r = run(s, timeout=15)
        assert not r.timed_out, what
        ended = f"signal {r.signal}" if r.signal else f"exit {r.exit_code}"
        peak = r.counters.get("memory_peak", 0) >> 20
        rows.append(
            [
                what,
                ended,
                str(r.counters.get("oom_kill", 0)),
                str(r.counters.get("pids_refused", 0)),
                f"{peak} MiB",
            ]
        )
        steps = r.steps
    assert rows[1][1] != "exit 0" and rows[0][1] == "exit 0", rows
    assert rows[2][3] != "0", rows
    header = ["workload", "pid 1 ended", "oom_kill", "forks refused", "peak memory"]
    kata_metrics["limits"] = {row[0]: row[1:] for row in rows}
    kata_metrics["start steps (ms)"] = {k: round(v * 1e3, 2) for k, v in steps.items()}
    kata_metrics["svg"] = kata.module("picture").table_svg(
        f"what the limits did (cgroup v{cgroup_version})", header, rows
    )
    kata_metrics["label"] = "your runtime: memory and pids limits biting"
