"""The container's description: a small subset of the OCI runtime spec's config.json.

runc reads `config.json` (https://github.com/opencontainers/runtime-spec/blob/main/config.md);
the fields here keep its names where one exists: `process.args`, `hostname`, `root.path`,
`root.readonly`, `linux.namespaces`, `linux.resources.memory.limit`, `linux.resources.pids.limit`,
`linux.devices` and `linux.resources.devices`, `mounts`. Given code: read it, do not edit it.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field

# clone(2)/unshare(2) flags (linux/sched.h): one per namespace.
CLONE_NEWNS = 0x00020000  # mount
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000  # hostname
CLONE_NEWIPC = 0x08000000  # System V IPC, POSIX message queues
CLONE_NEWUSER = 0x10000000  # uids, gids, capabilities
CLONE_NEWPID = 0x20000000  # process ids (the first child becomes pid 1)
CLONE_NEWNET = 0x40000000  # network devices, ports, routes

# mount(2) flags (linux/mount.h).
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

MNT_DETACH = 2  # umount2(2): lazy unmount

SYS_pivot_root = 155  # x86_64; glibc has no wrapper, call it through syscall(2)

# cgroup v2's devices controller: a BPF_PROG_TYPE_CGROUP_DEVICE program attached to the
# cgroup. It runs on every open/mknod of a device node with a context
#     struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }   (r1 points to it)
# where access_type = (access << 16) | type, and returns 1 (allow) or 0 (deny: EPERM).
SYS_bpf = 321  # x86_64
BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6  # the attach type
BPF_DEVCG_DEV_BLOCK, BPF_DEVCG_DEV_CHAR = 1, 2
BPF_DEVCG_ACC_MKNOD, BPF_DEVCG_ACC_READ, BPF_DEVCG_ACC_WRITE = 1, 2, 4

# OCI linux.namespaces[].type -> the flag that creates it.
NAMESPACES = {
    "mount": CLONE_NEWNS,
    "uts": CLONE_NEWUTS,
    "ipc": CLONE_NEWIPC,
    "user": CLONE_NEWUSER,
    "pid": CLONE_NEWPID,
    "network": CLONE_NEWNET,
}


@dataclass(frozen=True)
class Device:
    """One entry of OCI `linux.devices` (a node to create in the rootfs) and, with `allow`, of
    `linux.resources.devices` (the devices controller's rule for it)."""

    path: str  # inside the container: "/dev/nvidia0"
    major: int
    minor: int
    kind: str = "c"  # "c" character, "b" block
    access: str = "rw"  # what the devices controller allows: r(ead) w(rite) m(knod)
    allow: bool = True  # False: the node exists but opening it must be refused (EPERM)
    mode: int = 0o666

    @property
    def file_type(self) -> int:
        return stat.S_IFCHR if self.kind == "c" else stat.S_IFBLK

    def rule(self) -> str:
        """The devices controller's rule: "c 195:0 rw"."""
        return f"{self.kind} {self.major}:{self.minor} {self.access}"


# What every OCI runtime gives every container (runtime-spec "Default Devices"), allowed rwm.
DEFAULT_DEVICES = (
    Device("/dev/null", 1, 3, access="rwm"),
    Device("/dev/zero", 1, 5, access="rwm"),
    Device("/dev/full", 1, 7, access="rwm"),
    Device("/dev/random", 1, 8, access="rwm"),
    Device("/dev/urandom", 1, 9, access="rwm"),
    Device("/dev/tty", 5, 0, access="rwm"),
)

# What nvidia-container-toolkit adds for one GPU (NVIDIA_VISIBLE_DEVICES=0): the GPU's node,
# the control node every CUDA process opens, and the unified-memory node. nvidia.ko owns major
# 195 (0..254 are GPUs, 255 is nvidiactl); nvidia-uvm.ko gets a dynamic major (often 510 or
# 235; here a fixed one since no driver is loaded).
NVIDIA_MAJOR = 195
NVIDIA_UVM_MAJOR = 235
# The phase's kgpu device: major 240 is in the range Linux reserves for local/experimental
# character drivers (240-254, Documentation/admin-guide/devices.txt), free on these machines.
KGPU_MAJOR = 240


def nvidia_devices(visible: tuple[int, ...] = (0,), hidden: tuple[int, ...] = ()) -> list[Device]:
    """The nodes for GPUs `visible` (allowed) and `hidden` (present but refused), plus
    /dev/nvidiactl and /dev/nvidia-uvm."""
    out = [Device(f"/dev/nvidia{i}", NVIDIA_MAJOR, i) for i in visible]
    out += [Device(f"/dev/nvidia{i}", NVIDIA_MAJOR, i, allow=False) for i in hidden]
    out.append(Device("/dev/nvidiactl", NVIDIA_MAJOR, 255))
    out.append(Device("/dev/nvidia-uvm", NVIDIA_UVM_MAJOR, 0))
    return out


@dataclass(frozen=True)
class Mount:
    """One entry of OCI `mounts`: a bind mount of a host path into the rootfs."""

    source: str  # on the host
    destination: str  # inside the container ("/usr/lib/x86_64-linux-gnu/nvidia")
    readonly: bool = True


@dataclass
class Spec:
    """What to run and how to isolate it."""

    args: list[str]  # process.args: argv of the container's first process (its pid 1)
    hostname: str = "kata"
    rootfs: str | None = None  # root.path: a directory; None: stay in the host's file system
    namespaces: tuple[str, ...] = ("pid", "mount", "uts", "ipc", "network", "user")
    memory_limit: int | None = None  # bytes: linux.resources.memory.limit
    pids_limit: int | None = None  # linux.resources.pids.limit
    devices: list[Device] = field(default_factory=list)  # besides DEFAULT_DEVICES
    restrict_devices: bool = False  # apply the devices controller (deny all, allow the list)
    mounts: list[Mount] = field(default_factory=list)
    cgroup_name: str = "c0"  # the container's cgroup: <cgroup root>/<CGROUP_PARENT>/<name>
    env: dict[str, str] = field(default_factory=lambda: {"PATH": "/bin:/sbin:/usr/bin"})

    @property
    def needs_cgroup(self) -> bool:
        return self.memory_limit is not None or self.pids_limit is not None or self.restrict_devices


# Every cgroup a container of this kata gets lives under this one (per controller on v1), so
# the tests can remove whatever a run left behind.
CGROUP_PARENT = "gpu-katas-container"
