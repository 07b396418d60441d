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
import itertools
import operator
import sys
import time
import types
from typing import Any

import pytest

# Modules whose every attribute counts; plus the classes defined in them.
# (Not xdist/execnet: the child reports through the harness's own pipe, never through them.)
_PREFIXES = ("_pytest", "pytest", "pluggy", "harness")
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


_CODE = operator.attrgetter("__code__")
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: setattr on the class raises TypeError


def _mutable(cls: type) -> bool:
    return not cls.__flags__ & _IMMUTABLE_TYPE


class _Watched:
    """One namespace (a module's or a class's dict), held by reference and compared by identity.

    Holding the values keeps every id unique while we compare; every step of :meth:`same` runs
    in C (``map``, ``id``, tuple equality of ints), so no learner-defined ``__eq__`` is called.
    """

    __slots__ = (
        "label",
        "ns",
        "keys",
        "values",
        "ids",
        "funcs",
        "saved",
        "codes",
        "whole",
        "whole_ids",
    )

    def __init__(self, label: str, ns: Any, keys: list[str], whole: bool) -> None:
        self.label, self.ns, self.keys = label, ns, keys
        self.values = [ns[k] for k in keys]
        self.ids = tuple(map(id, self.values))
        self.funcs = [v for v in self.values if isinstance(v, types.FunctionType)]
        self.saved = {id(f): f.__code__ for f in self.funcs}  # a swapped __code__ shows too
        self.codes = tuple(map(id, map(_CODE, self.funcs)))
        # New names count too (classes, builtins): the key objects, compared by identity.
        self.whole = tuple(ns) if whole else None
        self.whole_ids = tuple(map(id, self.whole)) if whole else ()

    def same(self) -> bool:
        try:
            if tuple(map(id, map(self.ns.__getitem__, self.keys))) != self.ids:
                return False
        except KeyError:
            return False
        if tuple(map(id, map(_CODE, self.funcs))) != self.codes:
            return False
        whole = self.whole
        return whole is None or tuple(map(id, self.ns)) == self.whole_ids

    def entries(self, out: dict[str, tuple[int, Any]], now: bool) -> None:
        """The labelled form (``harness.x.f`` -> (id, code)) the report names, then or now."""
        if not now:
            pairs = zip(self.keys, self.values, strict=True)
        else:
            keys = set(self.keys)
            pairs = ((k, v) for k, v in list(self.ns.items()) if self.whole is not None
                     or k in keys)  # fmt: skip
        for key, value in pairs:
            code = None
            if isinstance(value, types.FunctionType):
                code = value.__code__ if now else self.saved[id(value)]
            out[f"{self.label}.{key}"] = (id(value), code)


class Guard:
    """Snapshot of the harness-owned objects in this process; :meth:`changes` lists differences."""

    def __init__(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        self.config = config
        self.keep = (builtins, time)  # referenced, so ids stay unique while we compare
        self.modules: list[tuple[str, Any]] = []
        self.watched: list[_Watched] = []
        for name, mod in list(sys.modules.items()):
            if mod is None or not _trusted(name):
                continue
            self.modules.append((name, mod))
            ns = vars(mod)
            # Data (counters, caches made on first use) changes legitimately; what decides a
            # verdict is code: functions, classes, modules and other callables.
            keys = [k for k, v in list(ns.items()) if (name, k) not in _VOLATILE
                    and (callable(v) or isinstance(v, types.ModuleType))]  # fmt: skip
            self.watched.append(_Watched(name, ns, keys, whole=name == "builtins"))
            for key in keys:
                value = ns[key]
                # Static types (int, the C parts of os) cannot be patched: nothing to watch.
                if isinstance(value, type) and value.__module__ == name and _mutable(value):
                    cls_ns = vars(value)
                    # Methods, properties, slots: what runs. Docstrings and constants do not;
                    # a new name (a shadowing method) is caught by the whole-namespace check.
                    code = [
                        k for k, v in cls_ns.items() if callable(v) or hasattr(type(v), "__get__")
                    ]
                    self.watched.append(_Watched(f"{name}.{key}", cls_ns, code, True))
        self.module_ids = tuple(id(m) for _, m in self.modules)
        # Every namespace at once, for the check after each test: a few C-level passes.
        # Compared with operator.is_ against the held objects: identity, in C, no allocation of
        # an id per entry, and never a (possibly learner-defined) __eq__.
        self._nss = [w.ns for w in self.watched for _ in w.keys]
        self._keys = [k for w in self.watched for k in w.keys]
        self._values = [v for w in self.watched for v in w.values]
        self._funcs = [f for w in self.watched for f in w.funcs]
        self._codes = [w.saved[id(f)] for w in self.watched for f in w.funcs]
        self._wholes = [w.ns for w in self.watched if w.whole is not None]
        self._whole_keys = [k for w in self.watched if w.whole is not None for k in w.whole]
        self.small = self._small(items)
        self._hook_sig = self._hooks()
        self._item_refs = self._refs(items)

    def _all_same(self) -> bool:
        is_ = operator.is_
        try:
            if not all(map(is_, map(operator.getitem, self._nss, self._keys), self._values)):
                return False
        except KeyError:
            return False
        if not all(map(is_, map(_CODE, self._funcs), self._codes)):
            return False
        now = list(itertools.chain.from_iterable(self._wholes))  # a new name shows as a shift
        return len(now) == len(self._whole_keys) and all(map(is_, now, self._whole_keys))

    def _hooks(self) -> dict[str, tuple[int, Any]]:
        out: dict[str, tuple[int, Any]] = {}
        hook = self.config.pluginmanager.hook
        for name in _HOOKS:
            caller = getattr(hook, name, None)
            if caller is not None:
                impls = tuple((i.plugin_name, id(i.function)) for i in caller.get_hookimpls())
                out[f"hook {name}"] = (hash(impls), None)
        return out

    @staticmethod
    def _refs(items: list[pytest.Item]) -> list[Any]:
        """The kata tests' functions, code objects and runtest overrides, for an identity check."""
        out: list[Any] = []
        for item in items:
            obj = getattr(item, "obj", None)
            out += (obj, getattr(obj, "__code__", None), vars(item).get("runtest"))
        return out

    def _small(self, items: list[pytest.Item]) -> dict[str, tuple[int, Any]]:
        """The hook implementations and the kata's test functions, labelled for the report."""
        out = self._hooks()
        for item in items:
            obj = getattr(item, "obj", None)
            code = getattr(obj, "__code__", None)
            out[f"test {item.nodeid}"] = (id(obj), code)
            out[f"test {item.nodeid}.runtest"] = (id(vars(item).get("runtest")), None)
        return out

    def changes(self, items: list[pytest.Item]) -> list[str]:
        changed: list[str] = []
        refs = self._refs(items)
        if (
            self._hooks() != self._hook_sig
            or len(refs) != len(self._item_refs)
            or not all(map(operator.is_, refs, self._item_refs))
        ):  # something differs: name it
            small = self._small(items)
            changed += [k for k, v in self.small.items() if small.get(k, (None, None)) != v]
        names = [n for n, _ in self.modules]
        if tuple(map(id, map(sys.modules.get, names))) != self.module_ids:
            changed += [f"sys.modules[{n}]" for n, m in self.modules if sys.modules.get(n) is not m]
        suspects = [] if self._all_same() else [w for w in self.watched if not w.same()]
        for w in suspects:
            then: dict[str, tuple[int, Any]] = {}
            now: dict[str, tuple[int, Any]] = {}
            w.entries(then, now=False)
            w.entries(now, now=True)
            changed += [k for k, v in then.items() if now.get(k, (None, None)) != v]
            # A new name in a class namespace (shadowing an inherited method) or in builtins is
            # how a method gets replaced; new module globals (lazy imports, caches) are not.
            if w.whole is not None:
                changed += [k for k in now if k not in then and (w.label != "builtins"
                            or callable(self._value(w, k)))]  # fmt: skip
        return sorted(set(changed))

    @staticmethod
    def _value(w: _Watched, label: str) -> Any:
        return w.ns.get(label.rpartition(".")[2])


def describe(changes: list[str]) -> str:
    """A learner-facing sentence naming what was replaced (first few)."""
    shown = ", ".join(c.removeprefix("test ") for c in changes[:4])
    more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
    return f"your code tampered with the test harness: it replaced {shown}{more}"
