"""Notice learner code that rewires the harness: a snapshot of what decides a verdict.

Taken in the child right after ``fork()``, while the process is still the harness's own (the
parent never imports learner code), and checked after every test. What it covers: the attributes
of pytest's, pluggy's and the harness's modules and classes, ``builtins``, the clocks in ``time``,
the hook implementations registered for running and reporting a test, and each kata test's own
function and code object. A learner who swaps ``TestReport.from_item_and_call``, patches
``time.perf_counter`` or registers a plugin gets a failed test that says so.

It raises the bar, it is not a proof: code in the same process can in principle undo anything
(docs/integrity.md, "Threat model").
"""

from __future__ import annotations

import builtins
import sys
import time
import types
from typing import Any

import pytest

# Modules whose every attribute counts; plus the classes defined in them.
_PREFIXES = ("_pytest", "pytest", "pluggy", "harness", "xdist", "execnet")
_ALSO = ("builtins", "time", "os", "json", "math", "operator", "functools", "signal", "resource")
# Module attributes that legitimately change while a test runs.
_VOLATILE = {
    ("_pytest.assertion.util", "_reprcompare"),
    ("_pytest.assertion.util", "_assertion_pass"),
    ("_pytest.assertion.util", "_config"),
    ("os", "environ"),
}
_HOOKS = (
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_pyfunc_call",
    "pytest_report_to_serializable",
    "pytest_fixture_setup",
)


def _trusted(name: str) -> bool:
    if name in _ALSO:
        return True
    if name.startswith("_kata_"):  # the learner's and the reference's kata packages
        return False
    return any(name == p or name.startswith(p + ".") for p in _PREFIXES)


def _entries(obj: Any, label: str, out: dict[str, tuple[int, Any]]) -> None:
    for key, value in list(vars(obj).items()):
        if isinstance(value, types.FunctionType):
            out[f"{label}.{key}"] = (id(value), value.__code__)
        else:
            out[f"{label}.{key}"] = (id(value), None)


class Guard:
    """Snapshot of the harness-owned objects in this process; :meth:`changes` lists differences."""

    def __init__(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        self.config = config
        self.classes: set[str] = set()
        self.snapshot = self._take(items)
        self.keep = (builtins, time)  # referenced, so ids stay unique while we compare

    def _take(self, items: list[pytest.Item]) -> dict[str, tuple[int, Any]]:
        out: dict[str, tuple[int, Any]] = {}
        for name, mod in list(sys.modules.items()):
            if mod is None or not _trusted(name):
                continue
            out[f"sys.modules[{name}]"] = (id(mod), None)
            for key, value in list(vars(mod).items()):
                if (name, key) in _VOLATILE:
                    continue
                # Data (counters, caches made on first use) changes legitimately; what decides a
                # verdict is code: functions, classes, modules and other callables.
                if not (callable(value) or isinstance(value, types.ModuleType)):
                    continue
                label = f"{name}.{key}"
                code = value.__code__ if isinstance(value, types.FunctionType) else None
                out[label] = (id(value), code)
                if isinstance(value, type) and value.__module__ == name:
                    self.classes.add(label)
                    _entries(value, label, out)
        hook = self.config.pluginmanager.hook
        for name in _HOOKS:
            caller = getattr(hook, name, None)
            if caller is not None:
                impls = tuple((i.plugin_name, id(i.function)) for i in caller.get_hookimpls())
                out[f"hook {name}"] = (hash(impls), None)
        for item in items:
            obj = getattr(item, "obj", None)
            code = getattr(obj, "__code__", None)
            out[f"test {item.nodeid}"] = (id(obj), code)
            out[f"test {item.nodeid}.runtest"] = (id(vars(item).get("runtest")), None)
        return out

    def changes(self, items: list[pytest.Item]) -> list[str]:
        now = self._take(items)
        changed = [k for k, v in self.snapshot.items() if now.get(k, (None, None)) != v]
        # A new attribute on a trusted class or module is how a method gets shadowed.
        # New names in trusted modules appear legitimately (lazy imports, caches); new entries
        # in class namespaces (shadowing an inherited method) and in builtins do not.
        heads = self.classes | {"builtins"}
        changed += [k for k in now if k not in self.snapshot and k.rpartition(".")[0] in heads]
        return sorted(changed)


def describe(changes: list[str]) -> str:
    """A learner-facing sentence naming what was replaced (first few)."""
    shown = ", ".join(c.removeprefix("test ") for c in changes[:4])
    more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
    return f"your code tampered with the test harness: it replaced {shown}{more}"
