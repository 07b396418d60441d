"""gpu-katas harness: the pytest plugin, the `kata` CLI and the build/CUDA/tier/report machinery."""

from __future__ import annotations

from .faults import NativeFault


class KataTodo(NotImplementedError):
    """Raised by learner stubs that are not written yet; shown as "not started", not as a failure."""


def todo(what: str = "") -> None:
    """Mark a stub as not implemented yet: ``def step(self): todo("Warp.step")``."""
    raise KataTodo(what or "not implemented yet")


__all__ = ["KataTodo", "NativeFault", "todo"]
