"""GIVEN: kgpu_uapi.h for Python user programs, with the plain system calls. Do not edit.

A Python program that drives /dev/kgpu0 the way a C program does (run it with the preload, see
kernel.py):

    import kgpu
    dev = kgpu.Device()                       # os.open("/dev/kgpu0", os.O_RDWR)
    dev.info()                                # fcntl.ioctl(fd, KGPU_IOC_INFO, buffer)
    dev.map()                                 # mmap.mmap(fd, ring + vram, MAP_SHARED)
    dev.push(kgpu.FILL, a=0, length=4096, b=0x5A)
    fence = dev.submit()                      # KGPU_IOC_SUBMIT (the doorbell)
    dev.wait(fence, timeout_ns=10**9)         # KGPU_IOC_WAIT; OSError(ETIME) on timeout
    dev.vram[0]                               # 0x5A
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import select
import struct

VERSION = 1
RING_ENTRIES = 256
CMD_BYTES = 32
RING_BYTES = RING_ENTRIES * CMD_BYTES
VRAM_BYTES = 64 * 1024
MMAP_RING = 0
MMAP_VRAM = RING_BYTES

NOP, FILL, DELAY, INC, HANG = 0, 1, 2, 3, 4
PARAM_PRIORITY, PARAM_SUBMITTED, PARAM_COMPLETED = 0, 1, 2

CMD = struct.Struct("=IIQQQ")  # struct kgpu_cmd
INFO = struct.Struct("=IIII")  # struct kgpu_info
PARAM = struct.Struct("=IIQ")  # struct kgpu_param
SUBMIT = struct.Struct("=IIQ")  # struct kgpu_submit
WAIT = struct.Struct("=QQ")  # struct kgpu_wait

# <asm-generic/ioctl.h>: dir << 30 | size << 16 | type << 8 | nr
_NONE, _WRITE, _READ = 0, 1, 2


def ioc(direction: int, nr: int, size: int, kind: str = "G") -> int:
    """_IOC(dir, type, nr, size) as the kernel's headers compute it."""
    return direction << 30 | size << 16 | ord(kind) << 8 | nr


def io(nr: int, kind: str = "G") -> int:
    return ioc(_NONE, nr, 0, kind)


def ior(nr: int, size: int, kind: str = "G") -> int:
    return ioc(_READ, nr, size, kind)


def iow(nr: int, size: int, kind: str = "G") -> int:
    return ioc(_WRITE, nr, size, kind)


def iowr(nr: int, size: int, kind: str = "G") -> int:
    return ioc(_READ | _WRITE, nr, size, kind)


IOC_INFO = ior(0x00, INFO.size)
IOC_SET_PARAM = iow(0x01, PARAM.size)
IOC_GET_PARAM = iowr(0x02, PARAM.size)
IOC_SUBMIT = iowr(0x03, SUBMIT.size)
IOC_WAIT = iow(0x04, WAIT.size)


class Device:
    """One open of /dev/kgpu0: a context. Errors are OSError with the driver's errno."""

    def __init__(self, path: str = "/dev/kgpu0") -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self.mem: mmap.mmap | None = None
        self.put = 0  # where the next command goes
        self.pending = 0  # commands written since the last submit

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
            self.mem = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ioctl(self, cmd: int, buf: bytes | bytearray) -> bytearray:
        out = bytearray(buf)
        fcntl.ioctl(self.fd, cmd, out, True)
        return out

    def info(self) -> dict[str, int]:
        v = INFO.unpack(self.ioctl(IOC_INFO, bytes(INFO.size)))
        return dict(zip(("version", "ring_entries", "vram_bytes", "ctx_id"), v, strict=True))

    def set_param(self, param: int, value: int) -> None:
        self.ioctl(IOC_SET_PARAM, PARAM.pack(param, 0, value))

    def get_param(self, param: int) -> int:
        return PARAM.unpack(self.ioctl(IOC_GET_PARAM, PARAM.pack(param, 0, 0)))[2]

    def map(self) -> mmap.mmap:
        self.mem = mmap.mmap(self.fd, RING_BYTES + VRAM_BYTES, mmap.MAP_SHARED)
        return self.mem

    @property
    def vram(self) -> memoryview:
        assert self.mem is not None, "map() first"
        return memoryview(self.mem)[MMAP_VRAM : MMAP_VRAM + VRAM_BYTES]

    def push(self, op: int, a: int = 0, b: int = 0, length: int = 0) -> None:
        """Write a command at the ring's put (the doorbell is submit())."""
        assert self.mem is not None, "map() first"
        CMD.pack_into(self.mem, self.put * CMD_BYTES, op, length, a, b, 0)
        self.put = (self.put + 1) % RING_ENTRIES
        self.pending += 1

    def submit(self, count: int | None = None) -> int:
        """The doorbell for the commands pushed since the last submit (or `count`)."""
        n = self.pending if count is None else count
        fence = SUBMIT.unpack(self.ioctl(IOC_SUBMIT, SUBMIT.pack(n, 0, 0)))[2]
        self.pending = 0
        return fence

    def wait(self, fence: int, timeout_ns: int = 10**9) -> None:
        self.ioctl(IOC_WAIT, WAIT.pack(fence, timeout_ns))

    def try_wait(self, fence: int, timeout_ns: int) -> bool:
        """True when the fence completed, False on ETIME."""
        try:
            self.wait(fence, timeout_ns)
        except OSError as e:
            if e.errno == errno.ETIME:
                return False
            raise
        return True

    def poll(self, events: int = select.POLLIN, timeout_ms: int = 0) -> int:
        p = select.poll()
        p.register(self.fd, events)
        got = p.poll(timeout_ms)
        return got[0][1] if got else 0
