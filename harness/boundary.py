"""The type-exact boundary: values that cross from learner code into a test or given code are plain.

A learner function that returns an ``int`` subclass whose ``__eq__`` is always true, or
``unittest.mock.ANY``, passes every ``==`` and ``pytest.approx`` a test or a given checker makes.
So the loader (:meth:`harness.loader.KataContext.module`) calls :func:`guard_package` on every
kata implementation it loads, and every learner callable is reached through a wrapper that checks
what it returns, whoever asks: a test, a fixture, a given simulator, the budgets. No test can
forget it. What crosses may be:

- exact builtin values (``int``, ``float``, ``bool``, ``complex``, ``str``, ``bytes``, ``None``,
  ``range``) and exact ``list``/``tuple``/``dict``/``set``/``frozenset`` of such, recursively;
  the standard library's honest containers (``Counter``, ``OrderedDict``, ``defaultdict``,
  ``deque``) and value types (``Fraction``, ``Decimal``, paths, dates);
- exact ``numpy.ndarray`` of a plain dtype (not object) and numpy scalars;
- objects of the kata's classes (given or learner), their attributes checked by the same rules;
- any other object whose class cannot lie about its value: it defines none of the comparison,
  hashing, arithmetic, conversion or numpy-protocol methods (:data:`VALUE_METHODS`), so ``==``
  on it is identity (a lock, a thread, a grpc server).

Refused, with one sentence that names the function, what it returned and what to return instead:
a subclass of a builtin value type that is not the kata's (``class Liar(int)``), a class whose
value methods are learner code (a hand-written ``__eq__``; a dataclass's generated one is fine)
or come from a module outside the trusted standard library and numpy (``mock.ANY``,
``pytest.approx``), an ndarray subclass or an object-dtype array.

The function's return annotation is checked too (typeguard reads it): a forgotten ``return``
says "returned None; expected int (the stub says `-> int`)" instead of making the test's own
f-string raise ``TypeError`` -- a sentence that teaches, and never a gate (the plugin keeps a
boundary failure out of the gates).

Only calls from outside learner code are checked: learner code calling its own functions gets
its values unchanged (internal helpers may return anything): a per-thread flag says that learner
code entered through the boundary is running (a frame look-up would cost microseconds:
``sys._getframe`` is an audited event, and the fence's audit hook runs on each). A
learner function's exceptions (``todo()``'s KataTodo, a ValueError a test expects, an alarm)
pass through unchanged; ``__wrapped__``, the signature and ``inspect`` work as before. Returned
generators, iterators and learner callables are wrapped in turn; classes of learner objects that
cross are guarded when first seen. docs/integrity.md ("The type-exact boundary") says what is
not covered.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import sys
import threading
import types
from collections.abc import Callable, Iterator
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

__all__ = ["BoundaryError", "VALUE_METHODS", "check", "guard_package", "problem"]


class BoundaryError(AssertionError):
    """A value that crossed from learner code is not plain, or not of its annotated type."""


# Methods through which an object can pass for a value it is not: `==`, `<=`, hashing,
# `expected - actual` (pytest.approx), abs(), float(), numpy's protocols, truthiness.
_ARITH = "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and xor or".split()
VALUE_METHODS: frozenset[str] = frozenset(
    [f"__{n}__" for n in ("eq", "ne", "lt", "le", "gt", "ge", "hash", "bool")]
    + [f"__{p}{n}__" for n in _ARITH for p in ("", "r", "i")]
    + [
        f"__{n}__"
        for n in "neg pos abs invert int float complex index round trunc floor ceil".split()
    ]
    + [f"__array{n}__" for n in ("", "_ufunc", "_function", "_interface", "_struct", "_priority")]
    + ["__getattr__", "__getattribute__", "__class__", "__instancecheck__", "__subclasscheck__"]
)
_DATACLASS_MADE = {"__eq__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__"}

# Kinds of value, decided once per type.
_LEAF, _SEQ, _MAP, _OBJ, _ARRAY = "leaf", "seq", "map", "obj", "array"
_NONE = type(None)
_SCALARS = frozenset({int, float, bool, complex, str, bytes, _NONE})
_MAX_DEPTH = 40  # levels of nesting followed (a deep expression tree is ~20)
_MAX_ITEMS = 2_000_000  # elements looked at per value (C speed: ~20 ms)


# --------------------------------------------------------------------------- which types are whose
def _fence() -> Any:
    """harness.sandbox.fence, which knows the learner files (imported when first needed: the
    plugin imports this module before pytest loads the sandbox plugin; kept, since an import
    statement passes through the fence's own import hook)."""
    fence = _LATER.get("fence")
    if fence is None:
        from .sandbox import fence

        _LATER["fence"] = fence
    return fence


_LATER: dict[str, Any] = {}  # modules imported on first use


def _trusted_classes() -> dict[type, str]:
    import collections
    import datetime
    import decimal
    import fractions
    import pathlib
    import uuid

    kinds: dict[type, str] = {t: _LEAF for t in _SCALARS}
    kinds.update({range: _LEAF, bytearray: _LEAF, memoryview: _LEAF, slice: _LEAF})
    kinds.update({list: _SEQ, tuple: _SEQ, set: _SEQ, frozenset: _SEQ, dict: _MAP})
    kinds.update({collections.deque: _SEQ, collections.Counter: _MAP})
    kinds.update({collections.OrderedDict: _MAP, collections.defaultdict: _MAP})
    kinds.update({type({}.keys()): _SEQ, type({}.values()): _SEQ, type({}.items()): _SEQ})
    kinds.update({types.SimpleNamespace: _OBJ})
    for t in (fractions.Fraction, decimal.Decimal, uuid.UUID, *vars(datetime).values()):
        if isinstance(t, type):
            kinds[t] = _LEAF
    for t in vars(pathlib).values():
        if isinstance(t, type) and issubclass(t, pathlib.PurePath):
            kinds[t] = _LEAF
    for t in vars(enum).values():  # Enum, IntEnum, Flag, ...: their value methods are honest
        if isinstance(t, type):
            kinds[t] = _LEAF
    return kinds


_TRUSTED = _trusted_classes()
_KINDS: dict[type, str] = dict(_TRUSTED)  # type -> kind, or a refusal sentence (starts with "a")
_BASES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
_BASE_NAMES = {int: "int", float: "float", complex: "complex", str: "str", bytes: "bytes",
               bytearray: "bytearray", list: "list", tuple: "tuple", dict: "dict", set: "set",
               frozenset: "frozenset"}  # fmt: skip


def _module_file(t: type) -> str:
    module = sys.modules.get(getattr(t, "__module__", "") or "")
    return getattr(module, "__file__", None) or ""


def _is_learner_class(t: type) -> bool:
    return _module_file(t) in _fence().learner_files()


def _is_kata_class(t: type) -> bool:
    """A class of a loaded kata (given module, test or learner): its module is a kata's."""
    return str(getattr(t, "__module__", "")).startswith(_fence().KATA_PACKAGE_PREFIX)


def _where(t: type) -> str:
    """'defined in kv_math.py', 'from unittest.mock'."""
    if _is_kata_class(t):
        return f"defined in {Path(_module_file(t)).name or t.__module__}"
    return f"from {t.__module__}"


def _is_learner_code(obj: Any) -> bool:
    code = getattr(obj, "__code__", None)
    return code is not None and code.co_filename in _fence().learner_files()


_C_METHODS = (types.WrapperDescriptorType, types.MethodDescriptorType,
              types.ClassMethodDescriptorType, types.MethodWrapperType)  # fmt: skip


def _honest(cls: type, name: str, attr: Any) -> bool:
    """Whether `cls.__dict__[name]` (a value method) cannot lie about the value."""
    if attr is None:  # __hash__ = None: unhashable
        return True
    if isinstance(attr, _C_METHODS) and isinstance(getattr(attr, "__objclass__", None), type):
        return issubclass(cls, attr.__objclass__)  # a C base's own method (upb's Message.__eq__)
    if not cls.__flags__ & (1 << 9):  # not a heap type: implemented in C (int, ndarray, protobuf)
        return True
    if cls in _TRUSTED:
        return True
    if isinstance(attr, types.FunctionType):
        code = attr.__code__
        if code.co_filename in _fence().learner_files():
            return False
        if name in _DATACLASS_MADE and code.co_filename == "<string>":
            # made by @dataclass: `(self.a, self.b) == (other.a, other.b)` on the fields
            return (
                dataclasses.is_dataclass(cls) and attr.__qualname__ == f"{cls.__qualname__}.{name}"
            )
        # a given module's or a test's class, or the trusted standard library
        return _is_kata_class(cls) or cls.__module__.split(".")[0] in _TRUSTED_MODULES
    return False


_TRUSTED_MODULES = frozenset(
    "abc collections contextlib dataclasses datetime decimal enum fractions functools "
    "ipaddress numbers pathlib queue random re selectors socket subprocess threading types "
    "typing uuid weakref google grpc numpy cffi concurrent io".split()
)


def _kind(t: type) -> str:
    """What a value of type `t` is: a kind, or the sentence that refuses it."""
    kind = _KINDS.get(t)
    if kind is None:
        kind = _KINDS[t] = _decide(t)
    return kind


def _decide(t: type) -> str:
    np = sys.modules.get("numpy")
    if np is not None and issubclass(t, np.ndarray | np.generic):
        if t is np.ndarray:
            return _ARRAY
        if issubclass(t, np.generic) and t.__module__ == "numpy" and t is not np.object_:
            return _LEAF
        what = "ndarray" if issubclass(t, np.ndarray) else "numpy scalar"
        return f"{_a(what)} subclass ({t.__qualname__}, {_where(t)}); return a plain numpy array"
    if issubclass(t, type | types.FunctionType | types.BuiltinFunctionType | types.ModuleType):
        return _LEAF  # classes and functions are values by identity
    if issubclass(t, types.MethodType | types.GeneratorType | functools.partial):
        return _LEAF
    for base in _BASES:
        if issubclass(t, base) and not issubclass(t, enum.Enum):
            namedtuple = base is tuple and hasattr(t, "_fields")
            if not (namedtuple or _is_kata_class(t) and not _is_learner_class(t)):
                return (
                    f"{_a(_BASE_NAMES[base])} subclass ({t.__qualname__}, {_where(t)}); "
                    f"return a plain {_BASE_NAMES[base]}"
                )
    for cls in t.__mro__[:-1]:  # object's own methods are identity
        for name in sorted(VALUE_METHODS.intersection(cls.__dict__), key=_first_eq):
            if not _honest(cls, name, cls.__dict__[name]):
                whose = "" if cls is t else f" (its base {cls.__qualname__})"
                return (
                    f"{_a(t.__qualname__)} ({_where(t)}) whose class{whose} defines {name}; "
                    "values the tests compare are plain (int, float, str, a list or dict of them, "
                    "a numpy array, a dataclass with its generated __eq__)"
                )
    if _is_learner_class(t):
        _guard_class(t)  # its methods' results cross too
    if issubclass(t, enum.Enum):
        return _LEAF
    if issubclass(t, tuple):
        return _SEQ
    if issubclass(t, dict):
        return _MAP
    if issubclass(t, list | set | frozenset):
        return _SEQ
    if hasattr(t, "__dict__") or _slots(t):
        return _OBJ
    return _LEAF


def _first_eq(name: str) -> tuple[bool, str]:
    return name != "__eq__", name


def _slots(t: type) -> tuple[str, ...]:
    names: list[str] = []
    for cls in t.__mro__:
        s = cls.__dict__.get("__slots__", ())
        names.extend([s] if isinstance(s, str) else s)
    return tuple(n for n in names if n not in ("__dict__", "__weakref__"))


# --------------------------------------------------------------------------- checking a value
def problem(value: Any) -> str | None:
    """Why `value` may not cross the boundary ("an int subclass (Liar, defined in kv_math.py);
    return a plain int", with where it sits: "item [3] is ..."), or None when it is plain."""
    t = type(value)
    if t in _SCALARS:
        return None
    found = _scan(value)
    if found is None:
        return None
    bad, reason = found
    path = _path_to(value, bad)
    return reason if not path else f"{_container(value)} whose {_path_text(path)} is {reason}"


def _scan(value: Any) -> tuple[Any, str] | None:
    """Breadth first over the value's parts, a level at a time, C-speed where it can be
    (``set(map(type, group))``): the first part that is refused, and why. A level is a list of
    groups (a list's items, a dict's keys, its values, ...), each looked at alone: a group is
    mostly of one type, so no Python-speed filtering is needed."""
    level: list[Any] = [(value,)]
    seen: set[int] = set()  # objects whose attributes were followed (cycles)
    items = 0
    for _ in range(_MAX_DEPTH):
        if not level:
            return None
        nxt: list[Any] = []
        for group in level:
            items += len(group)
            if items > _MAX_ITEMS:
                return None
            present = set(map(type, group))
            if present <= _SCALARS:
                continue
            single = len(present) == 1
            for t in present:
                if t in _SCALARS:
                    continue
                kind = _kind(t)
                if kind is _LEAF:
                    continue
                members = group if single else [x for x in group if type(x) is t]
                found = _expand(t, kind, members, seen, nxt)
                if found is not None:
                    return found
        level = nxt
    return None


def _expand(
    t: type, kind: str, members: Any, seen: set[int], nxt: list[Any]
) -> tuple[Any, str] | None:
    """Add the parts of `members` (all of type `t`, of `kind`) to `nxt` as groups; or the first
    member refused, and why."""
    if kind is _SEQ:
        if len(members) == 1:
            one = members[0]
            nxt.append(one if type(one) in (list, tuple) else list(one))
        else:
            nxt.append(list(chain.from_iterable(members)))
    elif kind is _MAP:
        if len(members) == 1:
            nxt.append(list(members[0]))
            nxt.append(list(members[0].values()))
        else:
            nxt.append(list(chain.from_iterable(members)))
            nxt.append(list(chain.from_iterable(map(_values, members))))
    elif kind is _ARRAY:
        for dtype in set(map(attrgetter("dtype"), members)):
            if dtype.kind == "O":
                bad = next(x for x in members if x.dtype == dtype)
                return bad, "a numpy array of dtype object; return a numeric array"
    elif kind is _OBJ:
        fresh = [x for x in members if id(x) not in seen]
        seen.update(map(id, fresh))
        has_dict, names, iterable = _obj_info(t)
        if has_dict:
            nxt.append(list(chain.from_iterable(map(_values, map(_vars, fresh)))))
        if names:
            get = attrgetter(*names)
            nxt.append(list(chain.from_iterable(_slot_values(get, x, len(names)) for x in fresh)))
        if iterable:
            nxt.append(list(chain.from_iterable(fresh)))
    else:
        return members[0], kind
    return None


_OBJ_INFOS: dict[type, tuple[bool, tuple[str, ...], bool]] = {}


def _obj_info(t: type) -> tuple[bool, tuple[str, ...], bool]:
    """Whether instances of `t` have a __dict__, their slots, whether they hold items."""
    info = _OBJ_INFOS.get(t)
    if info is None:
        iterable = issubclass(t, tuple | list | set | frozenset)
        info = _OBJ_INFOS[t] = (t.__dictoffset__ != 0, _slots(t), iterable)
    return info


def _values(mapping: Any) -> Any:
    return mapping.values()


def _vars(obj: Any) -> dict[str, Any]:
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}


def _slot_values(get: Any, obj: Any, n: int) -> tuple[Any, ...]:
    try:
        got = get(obj)
    except AttributeError:  # an unset slot
        return ()
    return got if n > 1 else (got,)


def _path_to(root: Any, target: Any, depth: int = 0) -> list[str] | None:
    """The steps from `root` to `target` ("[3]", "key 'a'", ".total"), found again depth first
    once a part was refused ([] when it is `root` itself)."""
    if root is target:
        return []
    kind = _KINDS.get(type(root))
    if depth > _MAX_DEPTH or kind not in (_SEQ, _MAP, _OBJ):
        return None
    parts: Iterator[tuple[str, Any]]
    if kind is _MAP:
        parts = chain(((f"key {k!r}", k) for k in root), ((f"[{k!r}]", v) for k, v in root.items()))
    elif kind is _SEQ:
        parts = ((f"[{i}]", x) for i, x in enumerate(root))
    else:
        attrs = dict(_vars(root))
        for name in _slots(type(root)):
            if hasattr(root, name):
                attrs[name] = getattr(root, name)
        seq = enumerate(root) if isinstance(root, tuple | list) else ()
        parts = chain(((f".{k}", v) for k, v in attrs.items()), ((f"[{i}]", x) for i, x in seq))
    for step, part in parts:
        if type(part) in _SCALARS and part is not target:
            continue
        rest = _path_to(part, target, depth + 1)
        if rest is not None:
            return [step, *rest]
    return None


def _path_text(steps: list[str]) -> str:
    """ "item [3]['a']", "attribute .total[0]", "key 'x'"."""
    text = "".join(s if not s.startswith("key ") or i == 0 else f"[key {s[4:]}]"
                   for i, s in enumerate(steps))  # fmt: skip
    if text.startswith("key "):
        return text
    return ("item " if text.startswith("[") else "attribute ") + text


def _a(name: str) -> str:
    """ "an int", "a list", "an Outcome"."""
    return f"{'an' if name.lstrip('_')[:1].lower() in tuple('aeio') else 'a'} {name}"


def _container(value: Any) -> str:
    t = type(value)
    return _a(t.__qualname__ if t.__module__ == "builtins" else f"{t.__qualname__} object")


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    t = type(value)
    text = repr(value) if t in _SCALARS or t.__module__ == "numpy" else ""  # no learner __repr__
    shown = f" ({text})" if text and len(text) <= 40 else ""
    return _a(t.__qualname__ if t.__module__ == "builtins" else f"{t.__qualname__} object") + shown


def check(value: Any, label: str) -> None:
    """Raise BoundaryError unless `value`, returned by `label`, is plain."""
    __tracebackhide__ = True
    why = problem(value)
    if why is not None:
        raise BoundaryError(f"{label} returned {why}")


# --------------------------------------------------------------------------- annotations
_UNKNOWN = object()


class _Spec:
    """One guarded function: its label and its return annotation, resolved on first use."""

    __slots__ = ("fn", "label", "_hint", "text", "fast", "cls", "shallow")

    def __init__(self, fn: Any, label: str) -> None:
        self.fn, self.label = fn, label
        self._hint: Any = _UNKNOWN
        self.text = ""
        self.fast: frozenset[type] = frozenset()
        self.cls = False  # the hint is a plain class: isinstance() decides
        self.shallow: Callable[[Any], bool] | None = None  # list[int] & co: a first look

    def hint(self) -> Any:
        if self._hint is _UNKNOWN:
            self._hint = None
            raw = getattr(self.fn, "__annotations__", {}).get("return", inspect.Parameter.empty)
            if raw is inspect.Parameter.empty:
                return None
            self.text = raw if isinstance(raw, str) else inspect.formatannotation(raw)
            try:
                hint = (
                    eval(raw, getattr(self.fn, "__globals__", {})) if isinstance(raw, str) else raw
                )  # noqa: S307
            except Exception:  # a name imported under TYPE_CHECKING only: no typed check
                return None
            if hint is Any or hint is object:  # anything goes: nothing to check
                return None
            self._hint = type(None) if hint is None else hint
            self.fast = _fast_types(self._hint)
            self.cls = (
                isinstance(self._hint, type)
                and not self.fast
                and not getattr(self._hint, "__args__", None)
            )
            self.shallow = _shallow(self._hint)
        return self._hint


def _fast_types(hint: Any) -> frozenset[type]:
    """Exact types that satisfy `hint` with no further look (int for `float`, PEP 484)."""
    simple = {int: {int, bool}, float: {float, int}, complex: {complex, float, int},
              bool: {bool}, str: {str}, bytes: {bytes}, _NONE: {_NONE}}  # fmt: skip
    if hint in simple:
        return frozenset(simple[hint])
    if (
        isinstance(hint, types.UnionType)
        or getattr(hint, "__origin__", None) is __import__("typing").Union
    ):
        out: set[type] = set()
        for arg in hint.__args__:
            if arg not in simple:
                return frozenset()
            out |= simple[arg]
        return frozenset(out)
    return frozenset()


def _item_ok(arg: Any) -> Callable[[Any], bool] | None:
    """A quick test that a value is of type `arg` (int, float, str, a plain class, Any)."""
    if arg is Any:
        return lambda v: True
    fast = _fast_types(arg)
    if fast:
        return lambda v: type(v) in fast
    if isinstance(arg, type) and not getattr(arg, "__args__", None):
        return lambda v: isinstance(v, arg)
    return _shallow(arg)  # list[int] inside dict[str, list[int]]


def _shallow(hint: Any) -> Callable[[Any], bool] | None:
    """For list[X], set[X], frozenset[X], tuple[X, ...] and dict[K, V] of simple X, K, V: a
    test of the container's type and its first item (typeguard's default look), or None."""
    origin, args = getattr(hint, "__origin__", None), getattr(hint, "__args__", ())
    if (
        origin in (list, set, frozenset)
        and len(args) == 1
        or (origin is tuple and len(args) == 2 and args[1] is Ellipsis)
    ):
        item = _item_ok(args[0])
        if item is None:
            return None
        return lambda v: type(v) is origin and (not v or item(next(iter(v))))
    if origin is tuple and args and Ellipsis not in args:  # tuple[int, float]
        items = [_item_ok(a) for a in args]
        if any(i is None for i in items):
            return None
        n = len(items)
        return lambda v: (
            type(v) is tuple and len(v) == n and all(ok(x) for ok, x in zip(items, v, strict=True))
        )
    if origin is dict and len(args) == 2:
        key, val = _item_ok(args[0]), _item_ok(args[1])
        if key is None or val is None:
            return None
        return lambda v: (
            type(v) is dict and (not v or (lambda k: key(k) and val(v[k]))(next(iter(v))))
        )
    return None


def _typed_problem(value: Any, spec: _Spec) -> str | None:
    hint = spec.hint()
    if hint is None or type(value) in spec.fast:
        return None
    if spec.cls and isinstance(value, hint):
        return None
    if spec.shallow is not None and spec.shallow(value):
        return None  # as typeguard's first-item look would say, without its cost
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic) and hint in (int, float, complex, bool):
        ok = {int: "iub", float: "iubf", complex: "iubfc", bool: "b"}[hint]
        if value.dtype.kind in ok:
            return None
    typeguard = _LATER.get("typeguard")
    if typeguard is None:
        try:
            import typeguard
        except ImportError:  # pragma: no cover - a dependency of the project
            return None
        _LATER["typeguard"] = typeguard
    TypeCheckError = typeguard.TypeCheckError  # noqa: N806
    first_item = typeguard.CollectionCheckStrategy.FIRST_ITEM
    try:
        typeguard.check_type(value, hint, collection_check_strategy=first_item)
    except TypeCheckError as e:
        # typeguard's own wording for a float annotation ("is neither float or int").
        detail = str(e).replace("neither float or int", "neither a float nor an int")
        expected = spec.text
        head = f"{spec.label} returned {_describe(value)}; expected {expected} "
        head += f"(the stub says `-> {expected}`)"
        if value is None:
            return head + ": does it end without a `return`?"
        generic = detail.startswith(f"{type(value).__qualname__} is not")
        return head if generic or "is not an instance of" in detail[:60] else f"{head}: {detail}"
    except Exception:  # an annotation typeguard cannot check: no typed check
        return None
    return None


# --------------------------------------------------------------------------- the wrappers
def _cross(result: Any, spec: _Spec) -> Any:
    """`result` of spec's function, called from outside learner code: checked, or wrapped."""
    __tracebackhide__ = True
    t = type(result)
    if t in spec.fast:
        return result
    if t is types.GeneratorType and result.gi_code.co_filename in _fence().learner_files():
        return _checked_iterator(result, spec.label)
    if t in _ITERATORS or (t.__module__ == "itertools" and hasattr(t, "__next__")):
        return _checked_iterator(result, spec.label)
    if t is types.FunctionType and _is_learner_code(result):
        return _wrap_function(result, f"{result.__qualname__} (returned by {spec.label})", False)
    if t is types.MethodType and _is_learner_code(result.__func__):
        return _wrap_function(result, f"{result.__qualname__} (returned by {spec.label})", False)
    why = problem(result)
    if why is not None:
        raise BoundaryError(f"{spec.label} returned {why}")
    typed = _typed_problem(result, spec)
    if typed is not None:
        raise BoundaryError(typed)
    return result


_ITERATORS = frozenset(
    type(x)
    for x in (
        iter([]),
        iter(()),
        iter(range(0)),
        iter({}),
        iter(set()),
        iter({}.values()),
        iter({}.items()),
        iter(""),
        iter(b""),
        map(int, ()),
        filter(None, ()),
        zip(),
        enumerate(()),
        reversed([]),
    )  # fmt: skip
)


def _checked_iterator(it: Any, label: str) -> Iterator[Any]:
    """Each value `it` yields is checked; send, throw and close reach it as before."""
    send, throw, close = (getattr(it, n, None) for n in ("send", "throw", "close"))
    inside, ident = _INSIDE, threading.get_ident

    def step(how: Any, *arg: Any) -> Any:
        """`how(*arg)` with learner code marked as running (it runs the generator's body)."""
        me = ident()
        if me in inside:
            return how(*arg)
        try:
            inside.add(me)
            return how(*arg)
        finally:
            inside.discard(me)

    def checked() -> Any:
        __tracebackhide__ = True
        try:
            value = step(next, it)
        except StopIteration as stop:
            return stop.value
        while True:
            why = problem(value)
            if why is not None:
                raise BoundaryError(f"{label} yielded {why}")
            try:
                sent = yield value
            except GeneratorExit:
                if close is not None:
                    step(close)
                raise
            except BaseException as e:  # thrown in: the learner's generator gets it
                if throw is None:
                    raise
                try:
                    value = step(throw, e)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                value = step(next, it) if sent is None or send is None else step(send, sent)
            except StopIteration as stop:
                return stop.value

    return checked()


_GUARDED: dict[int, Any] = {}  # id(original) -> its wrapper (the original kept alive in it)
_GUARD_ATTR = "_kata_boundary"


# The threads in which learner code, entered through the boundary, is running (thread idents:
# a set and get_ident() cost a third of a threading.local's attribute on this hot path).
_INSIDE: set[int] = set()


def _wrap_function(fn: Any, label: str, keep: bool = True, check: bool = True) -> Any:
    """The guarded version of learner function `fn` (one per function; `keep`: remembered, so
    that every module naming `fn` gets the same wrapper; not for closures made per call).
    `check=False`: only marks learner code as running (``__init__``: nothing to check)."""
    known = _GUARDED.get(id(fn))
    if known is not None and known.__wrapped__ is fn:
        return known
    spec = _Spec(inspect.unwrap(fn) if hasattr(fn, "__wrapped__") else fn, label)
    # closure cells only, no globals: a copy of this code rebound elsewhere still works
    inside, ident, cross, checked_iterator = _INSIDE, threading.get_ident, _cross, _checked_iterator

    if inspect.isgeneratorfunction(fn):  # a generator function still: inspect says so

        def guarded_gen(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            gen = fn(*args, **kwargs)
            if ident() in inside:  # consumed by learner code
                return (yield from gen)
            return (yield from checked_iterator(gen, label))

        wrapper = functools.wraps(fn)(guarded_gen)
    else:

        def guarded(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            me = ident()
            if me in inside:  # learner code calling its own: its values are its business
                return fn(*args, **kwargs)
            try:  # an alarm may fire anywhere: the flag is never left set
                inside.add(me)
                result = fn(*args, **kwargs)
            finally:
                inside.discard(me)
            if type(result) in spec.fast or not check:  # a plain int for `-> int`, ...
                return result
            return cross(result, spec)

        wrapper = functools.wraps(fn)(guarded)
    for name in ("cache_info", "cache_clear", "cache_parameters"):  # functools.cache
        if hasattr(fn, name):
            setattr(wrapper, name, getattr(fn, name))
    setattr(wrapper, _GUARD_ATTR, True)
    if keep:
        _GUARDED[id(fn)] = wrapper
    return wrapper


def _is_guarded(obj: Any) -> bool:
    return getattr(obj, _GUARD_ATTR, False) is True


def _guardable(obj: Any) -> bool:
    """A learner function (or a functools.cache/wraps of one) not yet behind the boundary."""
    if _is_guarded(obj) or not callable(obj) or isinstance(obj, type):
        return False
    if isinstance(obj, types.FunctionType):
        return _is_learner_code(obj)
    inner = getattr(obj, "__wrapped__", None)
    return isinstance(inner, types.FunctionType) and _is_learner_code(inner)


_SKIP_METHODS = frozenset(
    {"__init__", "__new__", "__init_subclass__", "__post_init__", "__repr__", "__str__",
     "__format__", "__del__", "__setattr__", "__delattr__", "__set_name__", "__reduce__",
     "__reduce_ex__", "__getstate__", "__setstate__", "__class_getitem__", "__len__",
     "__contains__", "__exit__", "__copy__", "__deepcopy__", "__dir__", "__sizeof__"}
)  # fmt: skip
_ENTER_ONLY = frozenset({"__init__", "__post_init__", "__repr__", "__str__", "__len__",
                         "__contains__", "__exit__"})  # fmt: skip
_CLASSES: set[int] = set()  # ids of learner classes already guarded (kept alive by their module)


def _guard_class(cls: type) -> None:
    """Put the methods of learner class `cls` behind the boundary, in place (once)."""
    if id(cls) in _CLASSES:
        return
    _CLASSES.add(id(cls))
    owner = cls.__module__.rsplit(".", 1)[-1]
    for name, attr in list(cls.__dict__.items()):
        label = f"{owner}.{cls.__qualname__}.{name}"
        new: Any = None
        if name in _ENTER_ONLY and isinstance(attr, types.FunctionType) and _guardable(attr):
            new = _wrap_function(attr, label, check=False)  # learner code runs: no result
        elif name in _SKIP_METHODS or name in VALUE_METHODS:
            continue
        elif isinstance(attr, staticmethod | classmethod) and _guardable(attr.__func__):
            new = type(attr)(_wrap_function(attr.__func__, label))
        elif isinstance(attr, property) and attr.fget is not None and _guardable(attr.fget):
            new = attr.getter(_wrap_function(attr.fget, label))
        elif isinstance(attr, type) and _is_learner_class(attr):
            _guard_class(attr)
        elif _guardable(attr):
            new = _wrap_function(attr, label)
        if new is not None:
            try:
                setattr(cls, name, new)
            except (AttributeError, TypeError):  # a class that refuses: left as it is
                pass


_MODULES: dict[str, int] = {}  # module name -> id of the module object guarded
_SEEN_MODULES: dict[str, int] = {}  # package -> len(sys.modules) when it was last guarded


def guard_package(package: str) -> None:
    """Put every learner callable of kata package `package` (all its modules loaded so far)
    behind the boundary: functions and classes of learner modules, and the names given modules
    imported from them. Idempotent and cheap when no module was imported since; the loader
    calls it whenever a test asks for a module."""
    if _SEEN_MODULES.get(package) == len(sys.modules) or _fence().kata_files(package) is None:
        return
    _SEEN_MODULES[package] = len(sys.modules)
    prefix = package + "."
    modules = [m for n, m in list(sys.modules.items()) if n.startswith(prefix) and m is not None]
    learner_files = _fence().learner_files()
    for module in modules:  # given code first: the learner's modules may name its functions
        if _is_given(module, learner_files) and getattr(module, "__file__", None):
            _guard_given(module)
    for module in modules:
        if not _is_given(module, learner_files):
            _rebind_given(module)
        if _MODULES.get(module.__name__) == id(module) and not _is_given(module, learner_files):
            continue
        _MODULES[module.__name__] = id(module)
        for name, value in list(vars(module).items()):
            if name.startswith("__") and name.endswith("__"):
                continue
            if isinstance(value, type):
                if _is_learner_class(value):
                    _guard_class(value)
                continue
            if _guardable(value):
                owner = str(getattr(value, "__module__", module.__name__)).rsplit(".", 1)[-1]
                label = f"{owner}.{getattr(value, '__qualname__', name)}"
                setattr(module, name, _wrap_function(value, label))


# --------------------------------------------------------------------------- given code
# Learner code that calls a given simulator runs the simulator as learner code (the flag is set),
# so the learner callables the simulator then calls would go unchecked, and a lambda or closure
# handed to it is behind no wrapper at all. So given functions and the methods of given classes
# are wrapped too: called from learner code, the given code runs with the flag cleared, and every
# learner function or bound method among its arguments is handed over behind the boundary.
_GIVEN: dict[int, Any] = {}  # id(given function) -> its wrapper
_GIVEN_ATTR = "_kata_given"
_GIVEN_CLASSES: set[int] = set()
_GIVEN_DUNDERS = frozenset({"__init__", "__call__"})  # where callables are handed over


def _hand_over(arg: Any, to: str) -> Any:
    """`arg`, a value learner code passes to given code `to`: a learner function or bound
    method goes behind the boundary (a lambda, a closure, a method of an unguarded class)."""
    t = type(arg)
    if t is types.FunctionType:
        if _is_learner_code(arg) and not _is_guarded(arg):
            return _wrap_function(arg, f"{_owner(arg)}{arg.__qualname__} (passed to {to})", False)
    elif t is types.MethodType:
        fn = arg.__func__
        if isinstance(fn, types.FunctionType) and _is_learner_code(fn) and not _is_guarded(fn):
            label = f"{_owner(fn)}{fn.__qualname__} (passed to {to})"
            return types.MethodType(_wrap_function(fn, label, False), arg.__self__)
    return arg


def _owner(fn: Any) -> str:
    module = str(getattr(fn, "__module__", "") or "")
    return f"{module.rsplit('.', 1)[-1]}." if module else ""


def _wrap_given(fn: Any, label: str) -> Any:
    """The wrapper of given function `fn`: called from learner code, it runs as given code."""
    known = _GIVEN.get(id(fn))
    if known is not None and known.__wrapped__ is fn:
        return known
    inside, ident, hand_over = _INSIDE, threading.get_ident, _hand_over

    def given(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        me = ident()
        if me not in inside:  # a test, a fixture, given code: nothing to hand over
            return fn(*args, **kwargs)
        args = tuple(hand_over(a, label) for a in args)
        kwargs = {k: hand_over(v, label) for k, v in kwargs.items()}
        inside.discard(me)
        try:
            return fn(*args, **kwargs)
        finally:
            inside.add(me)

    wrapper = functools.wraps(fn)(given)
    setattr(wrapper, _GIVEN_ATTR, True)
    _GIVEN[id(fn)] = wrapper
    return wrapper


def _given_function(value: Any, module: Any) -> bool:
    """A plain function defined in given module `module` (not yet wrapped)."""
    return (
        type(value) is types.FunctionType
        and not getattr(value, _GIVEN_ATTR, False)
        and value.__code__.co_filename == getattr(module, "__file__", None)
        and not inspect.isgeneratorfunction(value)
    )


def _guard_given_class(cls: type, module: Any) -> None:
    """Wrap the methods of given class `cls` (in place, once) as given functions."""
    if id(cls) in _GIVEN_CLASSES:
        return
    _GIVEN_CLASSES.add(id(cls))
    owner = cls.__module__.rsplit(".", 1)[-1]
    for name, attr in list(cls.__dict__.items()):
        if name.startswith("__") and name not in _GIVEN_DUNDERS:
            continue
        label = f"{owner}.{cls.__qualname__}.{name}"
        new: Any = None
        if _given_function(attr, module):
            new = _wrap_given(attr, label)
        elif isinstance(attr, staticmethod | classmethod) and _given_function(
            attr.__func__, module
        ):
            new = type(attr)(_wrap_given(attr.__func__, label))
        if new is not None:
            try:
                setattr(cls, name, new)
            except (AttributeError, TypeError):
                pass


def _guard_given(module: Any) -> None:
    """Wrap the functions and classes given module `module` defines."""
    for name, value in list(vars(module).items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if isinstance(value, type) and value.__module__ == module.__name__:
            _guard_given_class(value, module)
        elif _given_function(value, module):
            owner = module.__name__.rsplit(".", 1)[-1]
            setattr(module, name, _wrap_given(value, f"{owner}.{value.__qualname__}"))


def _rebind_given(module: Any) -> None:
    """A learner module's names for given functions (`from .sim import run`) get the wrappers."""
    for name, value in list(vars(module).items()):
        wrapper = _GIVEN.get(id(value)) if type(value) is types.FunctionType else None
        if wrapper is not None and wrapper.__wrapped__ is value:
            setattr(module, name, wrapper)


def _is_given(module: Any, learner_files: dict[str, Any]) -> bool:
    return getattr(module, "__file__", None) not in learner_files


def guarded(fn: Callable[..., Any]) -> bool:
    """Whether `fn` (a function or bound method) is reached through the boundary."""
    return _is_guarded(getattr(fn, "__func__", fn))
