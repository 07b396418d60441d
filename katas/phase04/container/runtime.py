"""Your container runtime, in the shape of runc. The given runner (runner.py) calls these
functions in order; read its docstring for which process calls what. Python 3.11's `os` has no
unshare, mount or pivot_root (os.unshare arrives in 3.12), so call libc through ctypes:

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno(); raise OSError(err, os.strerror(err))
"""

from __future__ import annotations

from harness import todo

from .spec import Spec

# --- task "namespaces" -------------------------------------------------------------------


def clone_flags(spec: Spec) -> int:
    """The CLONE_NEW* flags for spec.namespaces, or-ed together (spec.NAMESPACES maps names)."""
    todo("clone_flags: or together the flag of each namespace in spec.namespaces")


def enter_namespaces(spec: Spec) -> None:
    """In the runtime's child: unshare(2) every namespace the spec asks for."""
    todo("enter_namespaces: unshare(clone_flags(spec)) through ctypes")


def write_id_maps(pid: int, spec: Spec) -> None:
    """In the parent, after the child's unshare: write /proc/PID/uid_map and gid_map so that
    root in the container's user namespace is a mapped id (root on the host)."""
    todo("write_id_maps: write /proc/{pid}/uid_map and gid_map")


def set_hostname(spec: Spec) -> None:
    """In pid 1: set the hostname, only when the container has its own UTS namespace (the
    host's hostname must never change)."""
    todo("set_hostname: sethostname(2) with spec.hostname")


# --- task "rootfs" -----------------------------------------------------------------------


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """mount(2); raise OSError with errno on failure."""
    todo("mount: libc.mount(source, target, fstype, flags, data)")


def pivot_root(new_root: str, put_old: str) -> None:
    """pivot_root(2): glibc has no wrapper; libc.syscall(spec.SYS_pivot_root, ...)."""
    todo("pivot_root: syscall(SYS_pivot_root, new_root, put_old)")


def setup_rootfs(spec: Spec) -> None:
    """In pid 1 (called only when spec.rootfs is set): make spec.rootfs the root of the
    container's mount namespace with pivot_root, mount a fresh /proc, and leave nothing of the
    host's tree mounted. Call bind_mounts(spec, rootfs) for spec.mounts before pivoting."""
    todo("setup_rootfs: private /, bind the rootfs on itself, pivot_root, /proc, drop old root")


# --- task "cgroups" ----------------------------------------------------------------------


def create_cgroup(spec: Spec) -> dict[str, str]:
    """Make the container's cgroup (host.cgroup_base(controller) / spec.cgroup_name, parents
    included) and write spec.memory_limit and spec.pids_limit into it. Return
    {controller: directory}: on cgroup v1 "memory", "pids" and "devices"; on v2 one entry,
    "unified"."""
    todo("create_cgroup: mkdir the cgroup(s) and write the limits")


def join_cgroup(cgroup: dict[str, str], pid: int) -> None:
    """Move `pid` (the runtime's child: pid 1 and all it starts inherit) into the cgroup."""
    todo("join_cgroup: write the pid into cgroup.procs")


def remove_cgroup(cgroup: dict[str, str]) -> None:
    """After the container has exited: remove its cgroup directories."""
    todo("remove_cgroup: rmdir each directory")


# --- task "devices" ----------------------------------------------------------------------


def create_device_nodes(spec: Spec) -> None:
    """In the parent, before the container starts: create each of spec.devices inside
    spec.rootfs (a character device node: mknod(2) with its major and minor, then its mode)."""
    todo("create_device_nodes: os.mknod each device into the rootfs")


def restrict_devices(spec: Spec, cgroup: dict[str, str]) -> None:
    """The devices controller: deny every device, then allow spec.DEFAULT_DEVICES and the
    spec's devices whose `allow` is set. cgroup v1 ({"devices": dir, ...}): devices.deny and
    devices.allow (Device.rule() is a rule's text). cgroup v2 ({"unified": dir}): load a
    BPF_PROG_TYPE_CGROUP_DEVICE program that returns 1 for those and 0 otherwise, and attach it
    to dir (bpf(2) BPF_PROG_LOAD, then BPF_PROG_ATTACH with BPF_CGROUP_DEVICE; spec.py has the
    numbers)."""
    todo("restrict_devices: devices.deny then devices.allow (v1), an eBPF program (v2)")


def bind_mounts(spec: Spec, root: str) -> None:
    """Called by your setup_rootfs before pivot_root: bind-mount each of spec.mounts into the
    rootfs at root + destination, read-only when m.readonly."""
    todo("bind_mounts: a bind mount per entry, remounted read-only")
