"""The cpu runtime's C launch interface as Python sees it: kata_launch.h, read by cffi.

The header is the one description of a launch, its result, a traced event and the launch
server's messages; runtime.cpp includes it and :func:`ffi` declares its CDEF section to cffi.
The few numbers Python needs before any C is built (the schedule names) are mirrored here and
checked against the header by harness/tests/test_cuda_interface.py.
"""

from __future__ import annotations

import functools
from pathlib import Path

import cffi

__all__ = ["HEADER", "SCHEDULES", "cdef_text", "enum", "ffi"]

HEADER = Path(__file__).resolve().parent / "kata_launch.h"
BEGIN, END = "// BEGIN CDEF", "// END CDEF"
# kata_schedule_t in its order: the index is the number a launch carries.
SCHEDULES = ("forward", "reverse", "random", "preempt")


def cdef_text(header: Path = HEADER) -> str:
    """The declarations between the CDEF markers of `header` (no preprocessor lines there)."""
    text = header.read_text(encoding="utf-8")
    try:
        body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    except IndexError:
        raise ValueError(f"{header}: no {BEGIN!r} ... {END!r} section") from None
    directives = [line for line in body.splitlines() if line.lstrip().startswith("#")]
    if directives:  # cffi would reject them with a less helpful message
        raise ValueError(f"{header}: preprocessor lines inside the CDEF section: {directives}")
    return body


@functools.cache
def ffi() -> cffi.FFI:
    """One FFI per process with the launch interface declared (parsed on first use)."""
    declared = cffi.FFI()
    declared.cdef(cdef_text())
    return declared


def enum(name: str) -> dict[str, int]:
    """The constants of the header's enum type `name`: {"KATA_OK": 0, ...}."""
    return dict(ffi().typeof(name).relements)
