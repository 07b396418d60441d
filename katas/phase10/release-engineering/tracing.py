"""A bpftrace program for a release's regression hunt (task `ebpf`)."""

from __future__ import annotations

from harness import todo


def count_syscall_program(syscall: str, pid: int) -> str:
    """A bpftrace program that counts how often process `pid` enters system call `syscall`
    (the tracepoint syscalls:sys_enter_<syscall>, filtered on pid) and, when bpftrace is
    stopped (SIGINT), prints exactly one line to stdout: "<syscall> <count>" (0 when it made
    none), and no map dump. ValueError for a syscall name that is not [a-z][a-z0-9_]* or a pid
    that is not a positive int (the text goes into a program: nothing else may get in)."""
    todo("count_syscall_program")
