"""Kernel names: demangling (cu++filt/c++filt) and KernelMap, a dict that also takes readable names."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from typing import Any

from harness.toolchain import find_tool

__all__ = ["KernelMap", "demangle", "demangle_one"]

_DEMANGLED: dict[str, str] = {}  # mutated, never rebound (harness.sandbox's guard)


def demangle_one(name: str) -> str:
    return demangle([name])[name]


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled -> readable names via cu++filt or c++filt (one process for all new names,
    remembered); identity when neither is installed or a name is not mangled (`extern "C"`)."""
    names = list(dict.fromkeys(names))
    todo = [n for n in names if n.startswith("_Z") and n not in _DEMANGLED]
    tool = find_tool("cu++filt") or find_tool("c++filt")
    if todo and tool is not None:
        proc = subprocess.run(
            [str(tool)], input="\n".join(todo) + "\n", capture_output=True, text=True
        )
        lines = proc.stdout.splitlines()
        if proc.returncode == 0 and len(lines) == len(todo):
            _DEMANGLED.update(zip(todo, lines, strict=True))
    return {n: _DEMANGLED.get(n, n) for n in names}


def _base_name(readable: str) -> str:
    """`void tk<3>(float*)` -> `tk`; `ns::scale(float*, int)` -> `ns::scale` and `scale`."""
    head = readable.split("(", 1)[0].strip()
    head = re.sub(r"<.*>$", "", head)  # template arguments
    return head.split()[-1] if head else readable


class KernelMap(dict):
    """kernel name -> value, keyed by the mangled name (as ptxas and cuobjdump print it).

    Lookups also accept the demangled signature ("scale(float*, int)") or the bare function name
    ("scale", "tk") when that is unambiguous, so katas need not spell `_Z5scalePfi`.
    """

    def _aliases(self) -> dict[str, list[str]]:
        readable = demangle(self.keys())
        aliases: dict[str, list[str]] = {}
        for key, full in readable.items():
            base = _base_name(full)
            for alias in {full, base, base.split("::")[-1]}:
                aliases.setdefault(alias, []).append(key)
        return aliases

    def __missing__(self, name: str) -> Any:
        keys = self._aliases().get(name, [])
        if len(keys) == 1:
            return self[keys[0]]
        if len(keys) > 1:
            raise KeyError(f"{name!r} is ambiguous: {', '.join(sorted(keys))}")
        raise KeyError(f"no kernel {name!r}; kernels: {', '.join(self.readable_names()) or '-'}")

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (
            isinstance(name, str) and len(self._aliases().get(name, [])) == 1
        )

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def readable_names(self) -> list[str]:
        return [demangle(self.keys())[k] for k in self]
