"""Heavy third-party modules imported on first use, so a run that never needs them is not slowed.

    np = lazy_module("numpy")  # nothing imported yet; ``np.zeros`` imports numpy, once

The stand-in is a module object that is never rebound, so ``harness.sandbox``'s tamper guard
(which snapshots harness modules' globals) sees the same object before and after first use.
Each attribute fetched is kept on the stand-in, so later look-ups cost what a module's do.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class LazyModule(types.ModuleType):
    """Stands in for the module `name` until an attribute is asked for."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and self.__name__ not in sys.modules:
            # A probe (inspect's __wrapped__, a finder's __path__) must not import numpy.
            raise AttributeError(f"{self.__name__!r} is not imported yet (no {attr!r})")
        value = getattr(importlib.import_module(self.__name__), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self.__name__!r}>"


def lazy_module(name: str) -> Any:
    """A stand-in for module `name` that imports it on first attribute access."""
    return LazyModule(name)


__all__ = ["LazyModule", "lazy_module"]
