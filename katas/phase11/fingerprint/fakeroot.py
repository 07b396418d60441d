"""GIVEN: fake machines as directory trees, for `collect(root)`. Do not edit.

    m = random_machine(random.Random(7))
    root = write(m, tmp_path / "host")     # tmp_path/host/etc/machine-id, .../sys/class/net/...

A tree holds what a real machine shows in those places (and nothing else): /etc/machine-id,
/var/lib/dbus/machine-id, /sys/class/dmi/id/{product_uuid,board_serial,product_name},
/proc/cpuinfo, /sys/class/net/<if>/{address,addr_assign_type,device,bridge/},
/sys/block/<dev>/device/{serial,wwid}, /proc/driver/nvidia/gpus/<bus>/information.
A file the machine does not let you read (DMI serials are mode 0400 on Linux) is written with
mode 0400 and, when the tests run as root (who reads anything), as a directory: reading it
fails either way.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

__all__ = [
    "Cpu",
    "Disk",
    "Gpu",
    "Machine",
    "Nic",
    "random_disk",
    "random_gpu",
    "random_machine",
    "random_mac",
    "random_nic",
    "replace",
    "write",
]

FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid fsrm md_clear arch_capabilities".split()
MODELS = [
    "Intel(R) Xeon(R) Platinum 8480+",
    "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
    "AMD EPYC 9654 96-Core Processor",
    "AMD EPYC 7763 64-Core Processor",
    "Intel(R) Core(TM) i9-13900K",
]
PRODUCTS = ["PowerEdge R760xa", "ProLiant DL380 Gen11", "DGX H100", "ThinkSystem SR670 V2", "KVM"]
GPU_MODELS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"]


@dataclass
class Cpu:
    model: str | None  # the "model name" line (None: no such line, e.g. some ARM kernels)
    flags: list[str]
    cores: int = 4
    mhz: float = 2000.0  # changes from one read to the next on a real machine


@dataclass
class Nic:
    name: str
    address: str  # what /sys/class/net/<name>/address reads
    device: bool = True  # a `device` link: a physical card (virtual ones have none)
    bridge: bool = False  # a `bridge/` directory: a Linux bridge
    assign_type: str | None = "0"  # addr_assign_type: 0 permanent, 1 random, 2 stolen, 3 set


@dataclass
class Disk:
    name: str  # sda, nvme0n1, loop0, dm-0 ...
    serial: str | None = None  # /sys/block/<name>/device/serial
    wwid: str | None = None  # /sys/block/<name>/device/wwid
    device: bool = True  # a `device` directory (virtual block devices have none)
    removable: bool = False  # /sys/block/<name>/removable reads 1: a USB stick, an SD card


@dataclass
class Gpu:
    bus: str  # 0000:18:00.0
    uuid: str  # GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
    model: str = "NVIDIA H100 80GB HBM3"


@dataclass
class Machine:
    machine_id: str | None  # /etc/machine-id's content (None: no file)
    dbus_machine_id: str | None = None  # /var/lib/dbus/machine-id's content
    product_uuid: str | None = None
    board_serial: str | None = None
    product_name: str | None = None
    unreadable: set[str] = field(default_factory=set)  # DMI files reading fails on
    cpu: Cpu | None = None
    nics: list[Nic] = field(default_factory=list)
    disks: list[Disk] = field(default_factory=list)
    gpus: list[Gpu] = field(default_factory=list)


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def random_uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_mac(rng: random.Random) -> str:
    """A globally administered unicast MAC (first octet's two low bits clear)."""
    first = rng.randrange(0, 256) & 0xFC
    return ":".join([f"{first:02x}"] + [f"{rng.randrange(256):02x}" for _ in range(5)])


def random_serial(rng: random.Random) -> str:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(8, 16)))


def random_nic(rng: random.Random, name: str) -> Nic:
    return Nic(name, random_mac(rng))


def random_disk(rng: random.Random, name: str) -> Disk:
    if name.startswith("nvme"):
        return Disk(name, serial=random_serial(rng), wwid=f"eui.{_hex(rng, 16)}")
    if rng.random() < 0.3:  # some SCSI disks only give a WWID
        return Disk(name, serial=None, wwid=f"naa.{_hex(rng, 16)}")
    return Disk(name, serial=random_serial(rng))


def random_gpu(rng: random.Random, index: int) -> Gpu:
    return Gpu(
        f"0000:{0x18 + 0x10 * index:02x}:00.0", "GPU-" + random_uuid(rng), rng.choice(GPU_MODELS)
    )


def random_machine(rng: random.Random, *, gpus: int | None = None) -> Machine:
    """A server: 1-3 NICs, 1-4 disks, 0-4 GPUs, readable DMI, a few virtual devices."""
    n_gpus = rng.choice([0, 1, 2, 4]) if gpus is None else gpus
    nics = [random_nic(rng, f"eno{i + 1}") for i in range(rng.randint(1, 3))]
    nics += [
        Nic("lo", "00:00:00:00:00:00", device=False, assign_type=None),
        Nic(
            "docker0",
            "02:42:" + ":".join(f"{rng.randrange(256):02x}" for _ in range(4)),
            device=False,
            bridge=True,
            assign_type="3",
        ),
    ]
    disks = [random_disk(rng, f"nvme{i}n1") for i in range(rng.randint(1, 2))]
    disks += [random_disk(rng, f"sd{chr(ord('a') + i)}") for i in range(rng.randint(0, 2))]
    disks += [Disk("loop0", device=False), Disk("dm-0", device=False)]
    return Machine(
        machine_id=_hex(rng, 32) + "\n",
        product_uuid=random_uuid(rng) + "\n",
        board_serial=random_serial(rng) + "\n",
        product_name=rng.choice(PRODUCTS) + "\n",
        cpu=Cpu(
            rng.choice(MODELS),
            sorted(rng.sample(FLAGS, rng.randint(20, len(FLAGS))), key=FLAGS.index),
        ),
        nics=nics,
        disks=disks,
        gpus=[random_gpu(rng, i) for i in range(n_gpus)],
    )


def _put(path: Path, text: str | None, *, readable: bool = True) -> None:
    if text is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if not readable and os.geteuid() == 0:
        path.mkdir()  # root reads a mode-0400 file: a directory fails to read for anyone
        return
    path.write_text(text)
    if not readable:
        path.chmod(0o000)  # a mode-0400 file of root's, as a user sees it


def _cpuinfo(cpu: Cpu) -> str:
    blocks = []
    for i in range(cpu.cores):
        lines = [f"processor\t: {i}", "vendor_id\t: GenuineIntel", "cpu family\t: 6"]
        if cpu.model is not None:
            lines.append(f"model name\t: {cpu.model}")
        lines += [f"cpu MHz\t\t: {cpu.mhz + 37.1 * i:.3f}", "cache size\t: 107520 KB"]
        lines += [f"flags\t\t: {' '.join(cpu.flags)}", f"bogomips\t: {cpu.mhz * 2:.2f}", ""]
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + "\n"


def write(m: Machine, root: Path) -> Path:
    """Write machine `m` as a tree under `root` (emptied first); returns `root`."""
    root = Path(root)
    if root.exists():
        for p in root.rglob(
            "*"
        ):  # a mode-0000 file is still removable, its directory must be writable
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(root)
    root.mkdir(parents=True)
    _put(root / "etc/machine-id", m.machine_id)
    _put(root / "var/lib/dbus/machine-id", m.dbus_machine_id)
    dmi = root / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    for name in ("product_uuid", "board_serial", "product_name"):
        _put(dmi / name, getattr(m, name), readable=name not in m.unreadable)
    if m.cpu is not None:
        _put(root / "proc/cpuinfo", _cpuinfo(m.cpu))
    net = root / "sys/class/net"
    net.mkdir(parents=True)
    for i, nic in enumerate(m.nics):
        d = net / nic.name
        d.mkdir()
        _put(d / "address", nic.address + "\n")
        _put(d / "addr_assign_type", None if nic.assign_type is None else nic.assign_type + "\n")
        if nic.device:
            pci = f"devices/pci0000:00/0000:00:{i + 1:02x}.0"
            (root / "sys" / pci).mkdir(parents=True)
            (d / "device").symlink_to(f"../../../{pci}")
        if nic.bridge:
            (d / "bridge").mkdir()
    block = root / "sys/block"
    block.mkdir(parents=True)
    for disk in m.disks:
        d = block / disk.name
        d.mkdir()
        _put(d / "removable", "1\n" if disk.removable else "0\n")
        if disk.device:
            (d / "device").mkdir()
            _put(d / "device/serial", None if disk.serial is None else disk.serial + "\n")
            _put(d / "device/wwid", None if disk.wwid is None else disk.wwid + "\n")
    for gpu in m.gpus:
        info = (
            f"Model: \t\t {gpu.model}\nIRQ:   \t\t 156\nGPU UUID: \t {gpu.uuid}\nVideo BIOS: \t 96.00.74.00.01\n"
            f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nBus Location: \t {gpu.bus}\n"
        )
        _put(root / "proc/driver/nvidia/gpus" / gpu.bus / "information", info)
    return root
