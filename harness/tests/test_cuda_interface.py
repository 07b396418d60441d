"""kata_launch.h is the cpu runtime's one launch interface: what Python mirrors of it must agree.

runtime.cpp includes the header and cffi declares it, so those two cannot drift; the launch
server's `struct` formats, the trace's event dtype and the schedule names are Python copies of
numbers in it, checked here field by field (no C is built: cffi only parses the header).
"""

from __future__ import annotations

import re
import struct

import pytest

from harness.cuda.cpu import interface, server, trace

FFI = interface.ffi()


def _offsets(fields: tuple[tuple[str, str], ...]) -> dict[str, int]:
    """Offset of each field in the unpadded little-endian layout `struct` packs."""
    out, at = {}, 0
    for name, code in fields:
        out[name] = at
        at += struct.calcsize("<" + code)
    return out


@pytest.mark.parametrize("ctype", sorted(server.WIRE_FIELDS))
def test_server_messages_match_the_header(ctype: str) -> None:
    fields = server.WIRE_FIELDS[ctype]
    declared = [name for name, _ in FFI.typeof(ctype).fields]
    assert [name for name, _ in fields] == declared
    for name, offset in _offsets(fields).items():
        assert FFI.offsetof(ctype, name) == offset, f"{ctype}.{name}"
        size = struct.calcsize("<" + dict(fields)[name])
        assert FFI.sizeof(FFI.typeof(ctype).fields[declared.index(name)][1].type) == size, name
    assert server.wire_struct(ctype).size == FFI.sizeof(ctype)


def test_server_message_types_match_the_header() -> None:
    assert server.MESSAGES == interface.enum("kata_msg_t")


def test_schedule_names_match_the_header() -> None:
    declared = sorted(interface.enum("kata_schedule_t").items(), key=lambda kv: kv[1])
    assert [
        (f"KATA_SCHEDULE_{s.upper()}", i) for i, s in enumerate(interface.SCHEDULES)
    ] == declared


def test_trace_events_match_the_header() -> None:
    import numpy as np

    dtype = np.dtype(trace.EVENT_FIELDS)
    assert dtype.itemsize == FFI.sizeof("kata_event") == trace.EVENT_SIZE
    assert list(dtype.names) == [name for name, _ in FFI.typeof("kata_event").fields]
    for name in dtype.names:
        assert dtype.fields[name][1] == FFI.offsetof("kata_event", name), name
        assert dtype.fields[name][0].itemsize == FFI.sizeof(
            FFI.typeof("kata_event").fields[list(dtype.names).index(name)][1].type
        ), name
    kinds = {"STORE": trace.EV_STORE, "SHARED": trace.EV_SHARED, "ATOMIC": trace.EV_ATOMIC}
    kinds |= {"BARRIER": trace.EV_BARRIER, "WARP": trace.EV_WARP}
    assert {f"KATA_EV_{k}": v for k, v in kinds.items()} == interface.enum("kata_event_kind_t")


def test_runtime_includes_the_header_and_declares_none_of_it_again() -> None:
    source = (interface.HEADER.parent / "runtime.cpp").read_text(encoding="utf-8")
    assert '#include "kata_launch.h"' in source
    names = re.findall(r"}\s*(kata_\w+)\s*;", interface.cdef_text())
    assert {"kata_launch_t", "kata_result_t", "kata_wire_launch"} <= set(names)
    again = [n for n in names if re.search(rf"}}\s*{n}\s*;|struct\s+{n}\b", source)]
    assert not again, f"runtime.cpp declares {again} itself; kata_launch.h has them"


def test_cdef_section_refuses_preprocessor_lines(tmp_path) -> None:
    header = tmp_path / "h.h"
    header.write_text(f"{interface.BEGIN}\n#define X 1\nint f(void);\n{interface.END}\n")
    with pytest.raises(ValueError, match="preprocessor lines"):
        interface.cdef_text(header)
    header.write_text("int f(void);\n")
    with pytest.raises(ValueError, match="no '// BEGIN CDEF'"):
        interface.cdef_text(header)
