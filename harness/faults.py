"""The learner's native code failed: the exception that says so (no imports: given code and
the native engines raise it, the plugin reads it by name)."""

from __future__ import annotations


class NativeFault(Exception):
    """The learner's native code failed where Python sees none of its frames: a Rust panic that a
    given wrapper turned into a status code, a native call or a C program killed by a signal.
    Given code and the harness's helpers raise it (a subclass names what failed); it fails its
    test with its message and, like an exception of the learner's Python code, never trips a
    gate: a crash is an honest mistake, not a dodged property."""
