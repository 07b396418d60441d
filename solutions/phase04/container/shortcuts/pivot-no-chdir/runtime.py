"""A container runtime in the shape of runc: namespaces, a pivot_root'ed rootfs, cgroup limits
and device passthrough the way nvidia-container-toolkit does it.

SHORTCUT pivot-no-chdir: runc's pivot_root(".", ".") with the old root held open, detached, and no chdir("/") at the end: pid 1's working directory stays in the detached host tree."""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

from . import host
from .spec import (
    BPF_CGROUP_DEVICE,
    BPF_DEVCG_ACC_MKNOD,
    BPF_DEVCG_ACC_READ,
    BPF_DEVCG_ACC_WRITE,
    BPF_DEVCG_DEV_BLOCK,
    BPF_DEVCG_DEV_CHAR,
    BPF_PROG_ATTACH,
    BPF_PROG_LOAD,
    BPF_PROG_TYPE_CGROUP_DEVICE,
    DEFAULT_DEVICES,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    NAMESPACES,
    Device,
    Spec,
    SYS_bpf,
    SYS_pivot_root,
)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# --- task "namespaces" -------------------------------------------------------------------


def clone_flags(spec: Spec) -> int:
    """The CLONE_NEW* flags for spec.namespaces, or-ed together."""
    flags = 0
    for name in spec.namespaces:
        flags |= NAMESPACES[name]
    return flags


def enter_namespaces(spec: Spec) -> None:
    """In the runtime's child: unshare(2) every namespace the spec asks for."""
    _check(_libc.unshare(clone_flags(spec)), "unshare")


def write_id_maps(pid: int, spec: Spec) -> None:
    """In the parent, once the child has a new user namespace: map ids 0.. to the host's 0..,
    so root inside is root outside, but with capabilities only over its own namespaces."""
    for name in ("uid_map", "gid_map"):
        Path(f"/proc/{pid}/{name}").write_text("0 0 4294967295\n")


def set_hostname(spec: Spec) -> None:
    """In pid 1: the hostname, in its own UTS namespace (without one, leave the host's: runc
    refuses a hostname then)."""
    if "uts" not in spec.namespaces:
        return
    name = spec.hostname.encode()
    _check(_libc.sethostname(name, len(name)), "sethostname")


# --- task "rootfs" -----------------------------------------------------------------------


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(SYS_pivot_root, new_root.encode(), put_old.encode()), "pivot_root")


def setup_rootfs(spec: Spec) -> None:
    """In pid 1: make the rootfs the root of the container's mount namespace and mount /proc."""
    if spec.rootfs is None:
        return
    root = os.path.realpath(spec.rootfs)
    # Nothing below propagates back to the host's mounts (systemd makes / shared).
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # pivot_root needs the new root to be a mount point: bind it onto itself.
    mount(root, root, None, MS_BIND | MS_REC)
    if spec.mounts:
        bind_mounts(spec, root)
    # runc's stacked pivot_root: the old root stays under the new one, held by an fd.
    oldroot = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    os.chdir(root)
    pivot_root(".", ".")
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.fchdir(oldroot)  # the old root, to detach it
    mount(None, ".", None, MS_REC | MS_PRIVATE)
    _check(_libc.umount2(b".", MNT_DETACH), "umount2 the old root")
    os.close(oldroot)


# --- task "cgroups" ----------------------------------------------------------------------


def create_cgroup(spec: Spec) -> dict[str, str]:
    """Make the container's cgroup and write its limits; returns {controller: directory}
    (v1: "memory", "pids", "devices"; v2: "unified")."""
    if host.cgroup_version() == 2:
        base = host.cgroup_base()
        base.mkdir(parents=True, exist_ok=True)
        # v2 controllers must be enabled top-down in cgroup.subtree_control, from the root.
        for parent in (
            *reversed(base.relative_to(host.CGROUP_ROOT).parents),
            base.relative_to(host.CGROUP_ROOT),
        ):
            (host.CGROUP_ROOT / parent / "cgroup.subtree_control").write_text("+memory +pids")
        d = base / spec.cgroup_name
        d.mkdir()
        if spec.memory_limit is not None:
            (d / "memory.max").write_text(str(spec.memory_limit))
            (d / "memory.swap.max").write_text("0")
        if spec.pids_limit is not None:
            (d / "pids.max").write_text(str(spec.pids_limit))
        return {"unified": str(d)}
    out = {}
    for controller in host.V1_CONTROLLERS:
        d = host.cgroup_base(controller) / spec.cgroup_name
        d.mkdir(parents=True)
        out[controller] = str(d)
    mem = Path(out["memory"])
    if spec.memory_limit is not None:
        (mem / "memory.limit_in_bytes").write_text(str(spec.memory_limit))
        # No swap on these machines; where there is, the limit must cover it too.
        swap = mem / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(spec.memory_limit))
    if spec.pids_limit is not None:
        (Path(out["pids"]) / "pids.max").write_text(str(spec.pids_limit))
    return out


def join_cgroup(cgroup: dict[str, str], pid: int) -> None:
    """Move `pid` (the runtime's child; pid 1 and everything it starts follow) into the cgroup."""
    for d in cgroup.values():
        (Path(d) / "cgroup.procs").write_text(str(pid))


def remove_cgroup(cgroup: dict[str, str]) -> None:
    """After the container has exited: rmdir its cgroup (only empty cgroups can go)."""
    for d in cgroup.values():
        try:
            os.rmdir(d)
        except FileNotFoundError:
            pass


# --- task "devices" ----------------------------------------------------------------------


def create_device_nodes(spec: Spec) -> None:
    """In the parent, before the container starts: mknod(2) each of spec.devices inside the
    rootfs, as nvidia-container-cli does for /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm."""
    assert spec.rootfs is not None
    for dev in spec.devices:
        path = os.path.join(spec.rootfs, dev.path.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        os.mknod(path, dev.file_type | dev.mode, os.makedev(dev.major, dev.minor))
        os.chmod(path, dev.mode)  # mknod's mode goes through the umask


def restrict_devices(spec: Spec, cgroup: dict[str, str]) -> None:
    """The devices controller: deny everything, then allow the default devices and the spec's
    allowed ones (v1: devices.deny / devices.allow; v2 needs a BPF_CGROUP_DEVICE program)."""
    allowed = [dev for dev in (*DEFAULT_DEVICES, *spec.devices) if dev.allow]
    if "devices" not in cgroup:  # v2: no files, an eBPF program (runc's devicefilter.go)
        _attach_device_filter(cgroup["unified"], allowed)
        return
    d = Path(cgroup["devices"])
    (d / "devices.deny").write_text("a")
    for dev in allowed:
        (d / "devices.allow").write_text(dev.rule())


# eBPF instruction encodings (include/uapi/linux/bpf.h): class | size/op | source.
_LDXW, _MOV32_K, _MOV32_X, _AND32_K, _RSH32_K, _JNE_K, _EXIT = (
    0x61,
    0xB4,
    0xBC,
    0x54,
    0x74,
    0x55,
    0x95,
)


def device_filter(allowed: list[Device]) -> list[tuple[int, int, int, int, int]]:
    """The BPF_PROG_TYPE_CGROUP_DEVICE program allowing `allowed` and nothing else, as
    (opcode, dst, src, offset, imm) instructions. r1 points to {access_type, major, minor}."""
    out = [
        (_LDXW, 2, 1, 0, 0), (_AND32_K, 2, 0, 0, 0xFFFF),  # r2 = type
        (_LDXW, 3, 1, 0, 0), (_RSH32_K, 3, 0, 0, 16),  # r3 = access
        (_LDXW, 4, 1, 4, 0), (_LDXW, 5, 1, 8, 0),  # r4 = major, r5 = minor
    ]  # fmt: skip
    for dev in allowed:
        kind = BPF_DEVCG_DEV_CHAR if dev.kind == "c" else BPF_DEVCG_DEV_BLOCK
        acc = sum(
            {"m": BPF_DEVCG_ACC_MKNOD, "r": BPF_DEVCG_ACC_READ, "w": BPF_DEVCG_ACC_WRITE}[c]
            for c in dev.access
        )
        # Each comparison jumps past this rule's remaining instructions when it fails.
        rule = [(_JNE_K, 2, 0, kind), (_JNE_K, 4, 0, dev.major), (_JNE_K, 5, 0, dev.minor)]
        rule += [(_MOV32_X, 1, 3, 0), (_AND32_K, 1, 0, ~acc & 0xFFFFFFFF), (_JNE_K, 1, 0, 0)]
        rule += [(_MOV32_K, 0, 0, 1), (_EXIT, 0, 0, 0)]
        for i, (op, dst, src, imm) in enumerate(rule):
            skip = len(rule) - i - 1 if op == _JNE_K else 0
            out.append((op, dst, src, skip, imm))
    return [*out, (_MOV32_K, 0, 0, 0, 0), (_EXIT, 0, 0, 0, 0)]


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint8),
        ("regs", ctypes.c_uint8),
        ("off", ctypes.c_int16),
        ("imm", ctypes.c_int32),
    ]


def _attach_device_filter(cgroup_dir: str, allowed: list[Device]) -> None:
    prog = device_filter(allowed)
    insns = (_Insn * len(prog))(
        *[
            _Insn(op, src << 4 | dst, off, ctypes.c_int32(imm).value)
            for op, dst, src, off, imm in prog
        ]
    )
    license = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(1 << 16)
    attr = (ctypes.c_uint8 * 128)()  # union bpf_attr, BPF_PROG_LOAD's fields first
    struct.pack_into(
        "=IIQQIIQ", attr, 0, BPF_PROG_TYPE_CGROUP_DEVICE, len(prog), ctypes.addressof(insns),
        ctypes.addressof(license), 1, len(log), ctypes.addressof(log),
    )  # fmt: skip
    prog_fd = _libc.syscall(SYS_bpf, BPF_PROG_LOAD, attr, ctypes.sizeof(attr))
    if prog_fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"BPF_PROG_LOAD: {os.strerror(err)}: {log.value.decode()[-500:]}")
    cg_fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        attr = (ctypes.c_uint8 * 128)()  # target_fd, attach_bpf_fd, attach_type, attach_flags
        struct.pack_into("=IIII", attr, 0, cg_fd, prog_fd, BPF_CGROUP_DEVICE, 0)
        _check(
            _libc.syscall(SYS_bpf, BPF_PROG_ATTACH, attr, ctypes.sizeof(attr)), "BPF_PROG_ATTACH"
        )
    finally:  # the attachment holds the program: both fds can go
        os.close(cg_fd)
        os.close(prog_fd)


def bind_mounts(spec: Spec, root: str) -> None:
    """Called by setup_rootfs before pivot_root: bind each of spec.mounts into the rootfs,
    read-only when asked (a bind mount ignores MS_RDONLY: it takes a remount)."""
    for m in spec.mounts:
        target = os.path.join(root, m.destination.lstrip("/"))
        if os.path.isdir(m.source):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.exists(target):
                open(target, "a").close()
        mount(m.source, target, None, MS_BIND)
        if m.readonly:
            mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
