"""A bpftrace program for a release's regression hunt (task `ebpf`)."""

from __future__ import annotations

import re

_SYSCALL = re.compile(r"[a-z][a-z0-9_]*")


def count_syscall_program(syscall: str, pid: int) -> str:
    """A bpftrace program that counts how often process `pid` enters system call `syscall`
    (the tracepoint syscalls:sys_enter_<syscall>, filtered on pid) and, when bpftrace is
    stopped (SIGINT), prints exactly one line to stdout: "<syscall> <count>" (0 when it made
    none), and no map dump. ValueError for a syscall name that is not [a-z][a-z0-9_]* or a pid
    that is not a positive int (the text goes into a program: nothing else may get in)."""
    if not isinstance(syscall, str) or _SYSCALL.fullmatch(syscall) is None:
        raise ValueError(f"not a system call name: {syscall!r}")
    if type(pid) is not int or pid <= 0:
        raise ValueError(f"not a process id: {pid!r}")
    return (
        "BEGIN { @n = 0; }\n"
        f"tracepoint:syscalls:sys_enter_{syscall} /pid == {pid}/ {{ @n = @n + 1; }}\n"
        f'END {{ printf("{syscall} %d\\n", @n); clear(@n); }}\n'
    )
