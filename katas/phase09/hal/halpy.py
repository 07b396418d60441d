"""GIVEN: the HAL from Python through cffi (ABI mode: ffi.dlopen of libhal.so). Do not edit.

    hal = Hal("/path/to/libhal.so")     # the declarations come from hal.h's CDEF section
    hal.init()                           # -> a status (int); 0 is HAL_SUCCESS
    st, n = hal.device_count()
    st, m = hal.mem_alloc(0, 1024)
    hal.memcpy_htod(m, 0, b"...")
    st, data = hal.memcpy_dtoh(m, 0, 16)
    hal.launch(f, (4, 1, 1), (64, 1, 1), [("mem", a), ("mem", b), ("i32", n)])

Every method returns the status first (a plain int) and then what the call wrote. A status of
HAL_ERROR_TODO (a stub) raises KataTodo: not started.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import cffi

HERE = Path(__file__).resolve().parent
TODO = 99
SUCCESS = 0


def cdef_of(header: Path) -> str:
    text = header.read_text()
    return text.split("// BEGIN CDEF", 1)[1].split("// END CDEF", 1)[0]


def status_names(header: Path | None = None) -> dict[str, int]:
    """HAL_SUCCESS ... HAL_ERROR_TODO -> their values, read from hal.h."""
    ffi = cffi.FFI()
    ffi.cdef(cdef_of(header or HERE / "hal.h"))
    return {k: v for k, v in ffi.typeof("hal_status").relements.items()}


_PACK = {"i8": "<b", "u8": "<B", "i16": "<h", "u16": "<H", "i32": "<i", "u32": "<I",
         "i64": "<q", "u64": "<Q", "f32": "<f", "f64": "<d"}  # fmt: skip


class Todo(Exception):
    """A stub answered HAL_ERROR_TODO."""


def require_started(backend: str | Path, what: str) -> None:
    """Todo when the backend's init still answers HAL_ERROR_TODO (a stub): call its entry and
    init directly, without the core."""
    ffi = cffi.FFI()
    ffi.cdef(cdef_of(HERE / "hal.h"))
    ffi.cdef(cdef_of(HERE / "hal_backend.h"))
    ffi.cdef("const hal_backend_ops* hal_backend_entry(uint32_t, uint32_t);")
    lib = ffi.dlopen(str(backend))
    ops = lib.hal_backend_entry(1, 2)
    if ops == ffi.NULL or ops.init == ffi.NULL:
        return
    if int(ops.init()) == TODO:
        raise Todo(f"{what}: init")
    if ops.shutdown != ffi.NULL:
        ops.shutdown()


class Hal:
    def __init__(self, library: str | Path, header: Path | None = None) -> None:
        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef_of(header or HERE / "hal.h"))
        self.lib = self.ffi.dlopen(str(library))

    def _st(self, st: int, what: str) -> int:
        st = int(st)
        if st == TODO:
            raise Todo(what)
        return st

    # ---------------------------------------------------------------- errors
    def _text(self, p: Any, what: str) -> str:
        if p == self.ffi.NULL:
            return "<NULL>"
        text = self.ffi.string(p).decode(errors="replace")
        if text.startswith("TODO:"):  # the stubs' answer
            raise Todo(what)
        return text

    def error_name(self, st: int) -> str:
        return self._text(self.lib.hal_error_name(st), "hal_error_name")

    def error_string(self, st: int) -> str:
        return self._text(self.lib.hal_error_string(st), "hal_error_string")

    def last_error(self) -> str:
        return self._text(self.lib.hal_last_error(), "hal_last_error")

    # ---------------------------------------------------------------- lifetime
    def init(self) -> int:
        return self._st(self.lib.hal_init(), "hal_init")

    def shutdown(self) -> int:
        return self._st(self.lib.hal_shutdown(), "hal_shutdown")

    def _count(self, fn: Any, what: str) -> tuple[int, int]:
        n = self.ffi.new("int*", -1)
        st = self._st(fn(n), what)
        return st, int(n[0])

    def backend_count(self) -> tuple[int, int]:
        return self._count(self.lib.hal_backend_count, "hal_backend_count")

    def device_count(self) -> tuple[int, int]:
        return self._count(self.lib.hal_device_count, "hal_device_count")

    def backend_info(self, i: int) -> tuple[int, dict[str, Any]]:
        p = self.ffi.new("hal_backend_props*")
        st = self._st(self.lib.hal_backend_info(i, p), "hal_backend_info")
        s = self.ffi.string
        return st, {
            "path": s(p.path).decode(errors="replace"), "name": s(p.name).decode(errors="replace"),
            "abi_major": int(p.abi_major), "abi_minor": int(p.abi_minor),
            "struct_size": int(p.struct_size), "priority": int(p.priority),
            "status": int(p.status), "ndevices": int(p.ndevices),
            "message": s(p.message).decode(errors="replace"),
        }  # fmt: skip

    def device_info(self, d: int) -> tuple[int, dict[str, Any]]:
        p = self.ffi.new("hal_device_props*")
        st = self._st(self.lib.hal_device_info(d, p), "hal_device_info")
        s = self.ffi.string
        return st, {
            "name": s(p.name).decode(errors="replace"), "backend": s(p.backend).decode(errors="replace"),
            "priority": int(p.priority), "caps": int(p.caps), "total_mem": int(p.total_mem),
            "backend_index": int(p.backend_index), "backend_device": int(p.backend_device),
        }  # fmt: skip

    def backends(self) -> list[dict[str, Any]]:
        """Every backend hal_init found (raises AssertionError when a call fails)."""
        st, n = self.backend_count()
        assert st == SUCCESS, f"hal_backend_count returned {self.error_name(st)}"
        out = []
        for i in range(n):
            st, info = self.backend_info(i)
            assert st == SUCCESS, f"hal_backend_info({i}) returned {self.error_name(st)}"
            out.append(info)
        return out

    def devices(self) -> list[dict[str, Any]]:
        st, n = self.device_count()
        assert st == SUCCESS, f"hal_device_count returned {self.error_name(st)}"
        out = []
        for i in range(n):
            st, info = self.device_info(i)
            assert st == SUCCESS, f"hal_device_info({i}) returned {self.error_name(st)}"
            out.append(info)
        return out

    # ---------------------------------------------------------------- memory
    def _handle(self, fn: Any, what: str, *args: Any) -> tuple[int, int]:
        h = self.ffi.new("uint64_t*", 0)
        st = self._st(fn(*args, h), what)
        return st, int(h[0])

    def mem_alloc(self, dev: int, n: int) -> tuple[int, int]:
        return self._handle(self.lib.hal_mem_alloc, "hal_mem_alloc", dev, n)

    def mem_free(self, m: int) -> int:
        return self._st(self.lib.hal_mem_free(m), "hal_mem_free")

    def mem_size(self, m: int) -> tuple[int, int]:
        n = self.ffi.new("size_t*", 0)
        st = self._st(self.lib.hal_mem_size(m, n), "hal_mem_size")
        return st, int(n[0])

    def memcpy_htod(self, m: int, offset: int, data: bytes) -> int:
        buf = self.ffi.from_buffer(bytes(data)) if data else self.ffi.NULL
        return self._st(self.lib.hal_memcpy_htod(m, offset, buf, len(data)), "hal_memcpy_htod")

    def memcpy_dtoh(self, m: int, offset: int, n: int) -> tuple[int, bytes]:
        buf = self.ffi.new("char[]", max(n, 1))
        st = self._st(self.lib.hal_memcpy_dtoh(buf, m, offset, n), "hal_memcpy_dtoh")
        return st, bytes(self.ffi.buffer(buf, n))

    def memset(self, m: int, offset: int, value: int, n: int) -> int:
        return self._st(self.lib.hal_memset(m, offset, value, n), "hal_memset")

    # ---------------------------------------------------------------- modules
    def module_load(self, dev: int, path: str | Path) -> tuple[int, int]:
        return self._handle(self.lib.hal_module_load, "hal_module_load", dev, str(path).encode())

    def module_unload(self, m: int) -> int:
        return self._st(self.lib.hal_module_unload(m), "hal_module_unload")

    def module_function(self, m: int, name: str) -> tuple[int, int]:
        return self._handle(self.lib.hal_module_function, "hal_module_function", m, name.encode())

    def launch(self, f: int, grid: tuple[int, int, int], block: tuple[int, int, int],
               args: list[tuple[str, Any]], stream: int = 0) -> int:  # fmt: skip
        """args: ("mem", handle) or (type, value) with type i8 u8 i16 u16 i32 u32 i64 u64 f32 f64."""
        arr = self.ffi.new("hal_arg[]", len(args)) if args else self.ffi.NULL
        for i, (kind, v) in enumerate(args):
            if kind == "mem":
                arr[i].kind, arr[i].size, arr[i].value = 0, 8, v
            else:
                raw = struct.pack(_PACK[kind], v)
                arr[i].kind, arr[i].size = 1, len(raw)
                arr[i].value = int.from_bytes(raw.ljust(8, b"\0"), "little")
        g = self.ffi.new("hal_dim3*", grid)[0]
        b = self.ffi.new("hal_dim3*", block)[0]
        return self._st(self.lib.hal_launch(f, g, b, arr, len(args), stream), "hal_launch")

    # ---------------------------------------------------------------- streams and events
    def stream_create(self, dev: int) -> tuple[int, int]:
        return self._handle(self.lib.hal_stream_create, "hal_stream_create", dev)

    def stream_destroy(self, s: int) -> int:
        return self._st(self.lib.hal_stream_destroy(s), "hal_stream_destroy")

    def stream_synchronize(self, s: int) -> int:
        return self._st(self.lib.hal_stream_synchronize(s), "hal_stream_synchronize")

    def event_create(self, dev: int) -> tuple[int, int]:
        return self._handle(self.lib.hal_event_create, "hal_event_create", dev)

    def event_destroy(self, e: int) -> int:
        return self._st(self.lib.hal_event_destroy(e), "hal_event_destroy")

    def event_record(self, e: int, s: int) -> int:
        return self._st(self.lib.hal_event_record(e, s), "hal_event_record")

    def event_query(self, e: int) -> int:
        return self._st(self.lib.hal_event_query(e), "hal_event_query")

    def event_synchronize(self, e: int) -> int:
        return self._st(self.lib.hal_event_synchronize(e), "hal_event_synchronize")
