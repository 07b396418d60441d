"""Hidden tests of the container kata (redteam): the ways out to the host that the other tests
let through. No mount inside the container shows the host's tree (the nsenter gate catches
chroot; this one a pivot_root whose old root stays mounted elsewhere: shortcut keep-old-root),
and every namespace asked for is new, the user namespace included (shortcut no-user-ns)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

HOST_NS = ("pid", "mnt", "uts", "ipc", "net", "user")


@pytest.mark.kata_gate(
    "a namespace the spec asks for is shared with the host: without the user namespace, root "
    "in the container is root on the host with every capability"
)
def test_namespaces_every_asked_namespace_is_new(run: Any, rt: Any, spec: Any, host: Any) -> None:
    script = "; ".join(f"readlink /proc/self/ns/{n}" for n in HOST_NS)
    s = spec.Spec(args=[host.busybox(), "sh", "-c", script])
    flags = rt.clone_flags(s)
    want = sum(spec.NAMESPACES.values())
    assert type(flags) is int and flags == want, (
        f"clone_flags of a spec with every namespace: {flags!r}, expected {want:#x}"
    )
    r = run(s)
    assert not r.timed_out and r.exit_code == 0, (
        f"the namespaces probe did not run: exit {r.exit_code}, signal {r.signal}: "
        f"{r.stderr[-800:]}"
    )
    shared = [
        n
        for n, link in zip(HOST_NS, r.lines, strict=True)
        if link == os.readlink(f"/proc/self/ns/{n}")
    ]
    assert not shared, f"the container shares the host's {shared} namespace(s)"


@pytest.mark.kata_gate(
    "the host's tree is still mounted inside the container: pivot_root's old root must be "
    "detached (umount2 MNT_DETACH), wherever it was put"
)
def test_rootfs_no_mount_shows_the_hosts_tree(run: Any, spec: Any, rootfs: Path) -> None:
    """List every mount point the container has: none may hold the host's root directory
    (the names the host's / has and the rootfs has not: boot, home, var, ...)."""
    script = (
        "cat /proc/self/mountinfo; echo ---; "
        "for m in $(cut -d' ' -f5 /proc/self/mountinfo); do ls -a \"$m\"; done"
    )
    r = run(spec.Spec(args=["/bin/sh", "-c", script], rootfs=str(rootfs)))
    assert not r.timed_out and r.exit_code == 0, (
        f"the mounts probe did not run: exit {r.exit_code}, signal {r.signal}: {r.stderr[-800:]}"
    )
    mountinfo, listed = r.stdout.split("---\n", 1)
    host_only = set(os.listdir("/")) - set(os.listdir(rootfs)) - {".", ".."}
    assert host_only, "the host's / has nothing the rootfs lacks: this test cannot tell"
    seen = set(listed.split()) & host_only
    points = [line.split()[4] for line in mountinfo.splitlines()]
    assert not seen, (
        f"a mount inside the container holds the host's root directory ({sorted(seen)} are "
        f"listed; mount points {points}): detach the old root after pivot_root"
    )


# Leaky Vessels (runc CVE-2024-21626): pid 1's working directory and its open descriptors are
# ways out too. From the cwd and from every directory descriptor of pid 1 the probe walks up
# (`..` forty times) and lists what it reaches; it lists pid 1's descriptors from a child (ls)
# so that the shell opens none of its own while they are listed.
PROBE = (
    "ls -l /proc/$$/fd; echo ---; "
    "(cd " + "/".join([".."] * 40) + " && stat -c %d:%i . && ls -a); echo ---; "
    "stat -c %d:%i /; echo ---; "
    "for n in $(ls /proc/$$/fd); do "
    "(cd /proc/$$/fd/$n 2>/dev/null && cd " + "/".join([".."] * 40) + " && echo fd $n "
    "&& stat -c %d:%i . && ls -a); done; true"
)


def _probe_spec(spec: Any, rootfs: Path, tmp_path: Path, kind: str) -> Any:
    """A spec of each kind a runtime builds differently: the rootfs alone; with limits (a
    cgroup), bind mounts and GPU device nodes with the devices controller; every namespace
    but the user namespace."""
    args = ["/bin/sh", "-c", PROBE]
    if kind == "rootfs":
        return spec.Spec(args=args, rootfs=str(rootfs))
    if kind == "gpu":
        data = tmp_path / "driver"
        data.mkdir(exist_ok=True)
        (data / "libcuda.so.1").write_text("x\n")
        return spec.Spec(
            args=args,
            rootfs=str(rootfs),
            memory_limit=256 << 20,
            pids_limit=64,
            devices=[
                *spec.nvidia_devices((0,), hidden=(1,)),
                spec.Device("/dev/kgpu0", spec.KGPU_MAJOR, 0),
            ],
            restrict_devices=True,
            cgroup_name="probe",
            mounts=[spec.Mount(str(data), "/usr/lib/nvidia")],
        )
    return spec.Spec(
        args=args, rootfs=str(rootfs), namespaces=("pid", "mount", "uts", "ipc", "network")
    )


@pytest.mark.kata_gate(
    "pid 1 starts with a working directory or an open descriptor outside the container's "
    "root (walking up with .. from it reaches the host's /), or with descriptors beyond 0, 1, "
    "2: the rootfs alone, with cgroups, devices and bind mounts, and without a user namespace"
)
@pytest.mark.parametrize("kind", ["rootfs", "gpu", "no-user-ns"])
def test_rootfs_cwd_and_descriptors_stay_inside(
    run: Any, spec: Any, rootfs: Path, tmp_path: Path, kind: str
) -> None:
    """After pivot_root, a cwd left elsewhere in the old tree is in the detached host tree
    (`cd ../../..; ls` lists the host's /), and so is a directory descriptor of it handed to
    pid 1 (runc leaked one of /sys/fs/cgroup: CVE-2024-21626). chdir("/") after pivot_root;
    every descriptor but 0, 1, 2 closed or O_CLOEXEC at execve."""
    r = run(_probe_spec(spec, rootfs, tmp_path, kind))
    assert not r.timed_out and r.exit_code == 0, (
        f"setup_rootfs, spec {kind}: the probe did not run: exit {r.exit_code}, signal "
        f"{r.signal}: {r.stderr[-800:]}"
    )
    fds, cwd, root, *by_fd = r.stdout.split("---\n")
    assert len(by_fd) == 1, f"the probe's output is not what it prints: {r.stdout[-800:]}"
    root_id = root.strip()
    host_only = set(os.listdir("/")) - set(os.listdir(rootfs)) - {".", ".."}
    assert host_only, "the host's / has nothing the rootfs lacks: this test cannot tell"
    top, *names = cwd.split("\n")
    reached = set(names) & host_only
    assert top == root_id and not reached, (
        f"setup_rootfs, spec {kind}: walking up from pid 1's working directory reaches "
        f"{top} (the container's / is {root_id}) and lists {sorted(reached)} of the host's /: "
        "the cwd is still in the host's tree after pivot_root (chdir to the new root)"
    )
    numbers = {line.split()[-3]: line.split()[-1] for line in fds.splitlines() if " -> " in line}
    extra = {n: t for n, t in numbers.items() if n not in ("0", "1", "2")}
    assert not extra, (
        f"setup_rootfs, spec {kind}: pid 1 runs with descriptors beyond 0, 1, 2 open "
        f"({extra}): the runtime's descriptors must be closed or O_CLOEXEC before execve"
    )
    for block in by_fd[0].split("fd ")[1:]:
        n, top, *names = block.split("\n")
        reached = set(names) & host_only
        assert top == root_id and not reached, (
            f"setup_rootfs, spec {kind}: walking up from pid 1's descriptor {n} reaches "
            f"{sorted(reached)} of the host's /: a directory of the host's tree is open in "
            "the container"
        )
