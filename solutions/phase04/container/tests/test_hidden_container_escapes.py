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
def test_namespaces_every_asked_namespace_is_new(run: Any, spec: Any, host: Any) -> None:
    script = "; ".join(f"readlink /proc/self/ns/{n}" for n in HOST_NS)
    r = run(spec.Spec(args=[host.busybox(), "sh", "-c", script]))
    assert not r.timed_out and r.exit_code == 0, (r.exit_code, r.signal, r.stderr[-800:])
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
    assert not r.timed_out and r.exit_code == 0, (r.exit_code, r.signal, r.stderr[-800:])
    mountinfo, listed = r.stdout.split("---\n", 1)
    host_only = set(os.listdir("/")) - set(os.listdir(rootfs)) - {".", ".."}
    assert host_only, "the host's / has nothing the rootfs lacks: this test cannot tell"
    seen = set(listed.split()) & host_only
    points = [line.split()[4] for line in mountinfo.splitlines()]
    assert not seen, (
        f"a mount inside the container holds the host's root directory ({sorted(seen)} are "
        f"listed; mount points {points}): detach the old root after pivot_root"
    )
