"""The oracle fence: learner modules cannot import the grader's modules.

The harness holds what the tests check a submission against: an occupancy calculator, a ptxas
parser, a SASS classifier and a demangler (``harness.cuda.static``), the hidden-test machinery,
the budgets, the test helpers, the reference solutions. A learner module that imports one of them
gets an :class:`ImportError` that names the import and says what to use instead. What learner
code may import from the harness is the explicit :data:`ALLOWED` list (docs/kata-layout.md,
"What learner code may import"), plus any module of its own kata; another implementation (the
reference, loaded for budgets) and ``solutions`` are refused.

Learner code is every module of the kata implementation being run (the learner's directory, or a
shortcut's or a patch's files over the reference: their directory materialised by
:mod:`harness.patches`, which the audit hook guards as it guards ``solutions/``) except its tests and the modules the manifest lists in ``given``;
a helper module the learner adds is learner code too. A manifest without ``given`` fences its
``files`` only.

Who is importing: the module whose code runs the import. For an ``import`` statement (and a
direct ``__import__`` call) that is the caller's frame; for ``importlib.import_module`` too. Its
code's file and its ``__name__`` are each checked against the learner files of the katas loaded
in this process (:func:`register`, called by the loader), so a learner module that renames
itself is still known by its file. Given modules and tests import freely: a given module may
wrap an oracle on purpose (nvcc-pipeline's ``toolchain.py`` runs the real tools).

Learner code may not read the grader's files either (the audit hook): `solutions/`, the
harness's own files, the repositories' ``.kata/`` (results, the build cache) and the katas' given
Python modules, so a copy of the grader's calculator or a given simulator cannot be compiled
under another name. Harness code reading them on the learner's behalf (a build in the cache) and
the import system loading a module from its own file are fine.

Not covered, by design of a fence and not a wall (docs/integrity.md): ``sys.modules`` lookups
and attribute walks from an allowed module, and importlib's private entry points. Gates that watch calls
(``harness.testing.watch_calls``) catch a submission that reaches an oracle anyway.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KATA_PACKAGE_PREFIX = "_kata_"  # the loader's synthetic packages: _kata_p01_simt_learner_<hash>

# What learner code may import from the harness (a module and everything it re-exports).
ALLOWED: dict[str, str] = {
    "harness": "todo() and KataTodo, for stubs",
    "harness.cuda": "SourceModule, In/Out/InOut, zeros/empty/to_device and the CUDA errors: "
    "launching your kernels",
    "harness.cuda.args": "In/Out/InOut (also in harness.cuda)",
    "harness.cuda.errors": "the CUDA errors (also in harness.cuda)",
    "harness.toolchain": "find_tool/require_tool: where nvcc, ptxas and friends are",
}

# Refused modules (by prefix), with what to use instead; the first matching prefix wins.
INSTEAD: tuple[tuple[str, str], ...] = (
    (
        "harness.cuda.static",
        "it is the grader's oracle (occupancy calculator, ptxas and SASS parsers, demangler): "
        "compute the answer yourself as the README explains, with the kata's given modules",
    ),
    ("harness.hidden", "hidden tests run at grading; the public tests and `kata hint` are yours"),
    ("harness.budgets", "budgets are measured by the tests against the reference, not by you"),
    ("harness.testing", "test helpers belong to tests; learner code computes its own answers"),
    ("harness.ptx", "the PTX interpreter is how the tests run your PTX; generate it yourself"),
    ("harness.sandbox", "the sandbox runs your code; it is not for your code to use"),
    ("solutions", "the reference solution is not part of the kata"),
    ("harness", "it is part of the grader"),
)


@dataclass(frozen=True)
class KataFiles:
    """One loaded kata implementation: whose modules count as learner code, and what is given."""

    package: str
    kata: str
    dirs: tuple[Path, ...]  # the search path: shortcut, solutions, kata (as the loader has it)
    files: frozenset[str]  # the manifest's learner files (kata-relative)
    given: frozenset[str] | None  # the manifest's `given` (kata-relative), None if not declared

    def relative(self, path: Path) -> str | None:
        for d in self.dirs:
            try:
                return path.relative_to(d).as_posix()
            except ValueError:
                continue
        return None

    def is_learner_file(self, path: Path) -> bool:
        rel = self.relative(path)
        if rel is None or rel.split("/", 1)[0] == "tests":
            return False
        if self.given is None:  # no `given` declared: only the learner files are learner code
            return rel in self.files
        return rel not in self.given


_KATAS: dict[str, KataFiles] = {}  # package name -> kata
# learner file (as compiled: the loader's path or a resolved one) -> the implementations that load
# it: a reference file a shortcut does not replace is loaded by the shortcut's and the reference's
_LEARNER_FILES: dict[str, list[KataFiles]] = {}
_original: dict[str, Any] = {}
# the `solutions/` trees of the repositories whose katas are loaded, and where patched
# implementations are materialised (harness.patches): resolved, with a trailing /
_SOLUTION_ROOTS: set[str] = set()
# What learner code may not read either (it may import what it is allowed to): the harness's own
# files, the repositories' .kata/ (results, the build cache), and the katas' given Python modules.
# Resolved, with a trailing / for directories.
_HARNESS_ROOT = os.path.realpath(Path(__file__).parent.parent) + os.sep
_GRADER_ROOTS: set[str] = {_HARNESS_ROOT}
_GIVEN_SOURCES: set[str] = set()


def register(package: str, kata: str, dirs: list[Path], files: tuple[str, ...],
             given: tuple[str, ...] | None) -> None:  # fmt: skip
    """Fence the learner files of one loaded kata implementation (the loader calls this)."""
    both = tuple(dict.fromkeys([*dirs, *(d.resolve() for d in dirs)]))
    entry = KataFiles(
        package, kata, both, frozenset(files), None if given is None else frozenset(given)
    )
    _KATAS[package] = entry
    from ..patches import patched_root  # materialised patches are mostly the reference

    _SOLUTION_ROOTS.add(os.path.realpath(patched_root()) + os.sep)
    for d in both:
        parts = d.parts
        for top in ("solutions", "katas"):
            if top in parts:
                root = Path(*parts[: parts.index(top)], "solutions")
                _SOLUTION_ROOTS.add(os.path.realpath(root) + os.sep)
                _GRADER_ROOTS.add(os.path.realpath(root.parent / ".kata") + os.sep)
        for rel in given or ():
            if rel.endswith(".py") and (d / rel).is_file():
                _GIVEN_SOURCES.add(os.path.realpath(d / rel))
    seen: set[str] = set()
    for d in dirs:  # search-path order: a file shadowed by an earlier directory is not loaded
        for path in sorted(d.rglob("*.py")) if d.is_dir() else ():
            rel = path.relative_to(d).as_posix()
            if "__pycache__" in path.parts or rel in seen:
                continue
            seen.add(rel)
            if entry.is_learner_file(path):
                for spelling in dict.fromkeys([str(path), str(path.resolve())]):
                    _LEARNER_FILES.setdefault(spelling, []).append(entry)
    install()


def learner_files() -> dict[str, list[KataFiles]]:
    """The learner files of every loaded kata implementation, by file name as compiled (the live
    registry, not a copy: `harness.boundary` tests a caller's ``co_filename`` against it)."""
    return _LEARNER_FILES


def kata_files(package: str) -> KataFiles | None:
    """The kata implementation loaded as synthetic package `package`, or None."""
    return _KATAS.get(package)


def another_implementation_loaded() -> bool:
    """Whether two implementations of one kata are loaded in this process (a learner's and the
    reference the budgets time): learner code could reach the other through sys.modules or gc."""
    katas = [k.dirs[-1] for k in _KATAS.values()]  # the kata's own directory, resolved
    return len(katas) != len(set(katas))


def reference_calls(package: str, fn: Any, *args: Any) -> tuple[Any, list[str]]:
    """Call ``fn(*args)`` and name the functions of another implementation of the same kata
    (the reference a budget loaded) that ran during it: learner code that found the reference in
    sys.modules or gc and runs it (even rebound to its own globals) instead of its own code."""
    mine = _KATAS.get(package)
    if mine is None:
        return fn(*args), []
    suspects = {
        f
        for f, owners in _LEARNER_FILES.items()
        if any(k.dirs[-1] == mine.dirs[-1] and k.package != package for k in owners)
        and not _loads(mine, Path(os.path.realpath(f)))
    }
    seen: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in suspects:
            seen.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")

    import threading

    previous = sys.getprofile()
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(previous)
        threading.setprofile(None)  # type: ignore[arg-type]
    return result, list(dict.fromkeys(seen))


def install() -> None:
    """Wrap the import entry points once per process (idempotent)."""
    if _original:
        return
    _original["__import__"] = builtins.__import__
    _original["import_module"] = importlib.import_module
    builtins.__import__ = _fenced_import
    importlib.import_module = _fenced_import_module
    importlib.__import__ = _fenced_import
    sys.addaudithook(_audit_open)  # permanent by design: learner code cannot remove it


def _fenced_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                   level: int = 0) -> Any:  # fmt: skip
    caller = sys._getframe(1)
    kata = _learner(caller, globals)
    if kata is not None:
        g = globals if isinstance(globals, dict) else caller.f_globals
        target = _absolute(name, g, level)
        _check(kata, target, caller)
        for item in fromlist or ():
            if isinstance(item, str) and item != "*":
                _check(kata, f"{target}.{item}", caller, only_modules=True)
    return _original["__import__"](name, globals, locals, fromlist, level)


def _fenced_import_module(name: str, package: str | None = None) -> Any:
    caller = sys._getframe(1)
    kata = _learner(caller, None)
    if kata is not None:
        target = importlib.util.resolve_name(name, package) if name.startswith(".") else name
        _check(kata, target, caller)
    return _original["import_module"](name, package)


def _learner(frame: Any, globals: Any) -> KataFiles | None:
    """The kata whose learner code runs in `frame`, or None when it is not learner code."""
    g = globals if isinstance(globals, dict) else frame.f_globals
    name = g.get("__name__") if isinstance(g, dict) else None
    package = name.split(".", 1)[0] if isinstance(name, str) else ""
    owners = _LEARNER_FILES.get(frame.f_code.co_filename)
    if owners:  # known by its file: as the implementation it runs in, if that one loads it
        return next((k for k in owners if k.package == package), owners[0])
    if not package.startswith(KATA_PACKAGE_PREFIX):
        return None
    file = g.get("__file__")
    owners = _LEARNER_FILES.get(file) if isinstance(file, str) else None
    return next((k for k in owners or () if k.package == package), None)


def _audit_open(event: str, args: tuple[Any, ...]) -> None:
    """Refuse learner code's opening of files under `solutions/` that its implementation does not
    load: the reference's copy of a file it replaces, another shortcut, the hidden tests. Reading
    the reference from disk and running it is the import of `solutions` by another spelling.
    Likewise the grader's files (:func:`_grader_file`), read by learner code itself."""
    if event != "open" or not _SOLUTION_ROOTS:
        return
    path = args[0] if args else None
    if path is None or isinstance(path, int):
        return
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return
    if not any(real.startswith(root) for root in _SOLUTION_ROOTS):
        what = _grader_file(real)
        if what is not None:
            kata = _reader(sys._getframe(1))
            if kata is not None:
                raise PermissionError(
                    f"learner code may not read {real}: {what} (docs/kata-layout.md, 'What "
                    "learner code may import')"
                )
        return
    frame = sys._getframe(1)
    while frame is not None:
        kata = _learner(frame, None)
        if kata is not None:
            if not _loads(kata, Path(real)):
                raise PermissionError(
                    f"learner code may not read {real}: the reference solution and the hidden "
                    "tests are not part of the kata (docs/kata-layout.md, 'What learner code "
                    "may import')"
                )
            return
        frame = frame.f_back


def _grader_file(real: str) -> str | None:
    """What `real` (resolved) is when learner code may not read it, else None."""
    if real in _GIVEN_SOURCES:
        return "it is a given module of the kata: import it, its source is not yours to compile"
    roots = set(_GRADER_ROOTS)
    env = os.environ.get("KATA_BUILD_CACHE")
    if env:
        roots.add(os.path.realpath(env) + os.sep)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    roots.add(os.path.realpath(os.path.join(cache, "gpu-katas")) + os.sep)
    if any(real.startswith(root) for root in roots):
        return "it belongs to the grader (the harness's files, results and build cache)"
    return None


def _library_paths() -> tuple[str, ...]:
    if "library" not in _original:
        import sysconfig

        paths = sysconfig.get_paths()
        _original["library"] = tuple(
            os.path.realpath(paths[k]) + os.sep
            for k in ("stdlib", "platstdlib", "purelib", "platlib")
            if k in paths
        )
    return _original["library"]  # type: ignore[no-any-return]


def _reader(frame: Any) -> KataFiles | None:
    """The kata whose learner code reads a file that `frame` opens, or None. The nearest frame
    outside the standard library and installed packages decides: genuine module code that is
    not learner code (the harness, a given module, a test) reads for itself; learner code, or
    code compiled at run time with learner code further up, reads for the learner. The import
    system compiling a module under its own file name (get_code) is fine: an import is fenced
    by the import hooks, and code from that file runs under its true name."""
    libraries = _library_paths()
    harness = _HARNESS_ROOT
    while frame is not None:
        file = frame.f_code.co_filename
        if file.startswith("<frozen importlib") and frame.f_code.co_name == "get_code":
            return None
        real = os.path.realpath(file)
        # The harness is no library even where it is installed in site-packages.
        if real.startswith(harness) or not (
            file.startswith("<frozen") or real.startswith(libraries)
        ):
            break
        frame = frame.f_back
    if frame is None:
        return None
    kata = _learner(frame, None)
    if kata is not None or _genuine(frame):
        return kata
    while frame is not None:  # code compiled at run time: who runs it
        kata = _learner(frame, None)
        if kata is not None:
            return kata
        frame = frame.f_back
    return None


def _genuine(frame: Any) -> bool:
    """Whether `frame` runs the code of a loaded module from its own file, in its own globals."""
    name = frame.f_globals.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    file = getattr(module, "__file__", None)
    return (
        module is not None
        and module.__dict__ is frame.f_globals
        and isinstance(file, str)
        and os.path.realpath(file) == os.path.realpath(frame.f_code.co_filename)
    )


def _loads(kata: KataFiles, path: Path) -> bool:
    """Whether `path` (resolved) is a file `kata`'s implementation loads: the first match of its
    kata-relative name on the search path (or that file's bytecode), never a test."""
    if path.parent.name == "__pycache__":  # calc.cpython-312.pyc -> calc.py
        path = path.parent.parent / (path.name.split(".", 1)[0] + ".py")
    dirs = list(dict.fromkeys(Path(os.path.realpath(d)) for d in kata.dirs))
    for d in dirs:
        try:
            rel = path.relative_to(d)
        except ValueError:
            continue
        if rel.parts[:1] == ("tests",):
            return False
        return next((e for e in dirs if (e / rel).exists()), None) == d
    return False


def _absolute(name: str, globals: dict[str, Any], level: int) -> str:
    if level == 0:
        return name
    package = globals.get("__package__") or globals.get("__name__", "").rpartition(".")[0]
    try:
        return importlib.util.resolve_name("." * level + name, package)
    except (ImportError, ValueError):
        return name  # the real import reports it


def _check(kata: KataFiles, target: str, frame: Any, only_modules: bool = False) -> None:
    reason = _refusal(kata, target)
    if reason is None:
        return
    if only_modules and not _is_module(target):
        return  # `from harness import todo`: a name, not a module
    where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
    raise ImportError(
        f"import of {_shown(kata, target)!r} refused ({where}): {reason}. Learner code may import "
        f"{_allowed_text(kata)} (docs/kata-layout.md, 'What learner code may import')",
        name=target,
    )


def _refusal(kata: KataFiles, target: str) -> str | None:
    """Why learner code of `kata` may not import `target`; None when it may."""
    top = target.split(".", 1)[0]
    if top.startswith(KATA_PACKAGE_PREFIX):
        if top != kata.package:
            return "it is another implementation of a kata (the reference, or another kata's)"
        return None
    if target in ALLOWED or top not in ("harness", "solutions"):
        return None
    for prefix, instead in INSTEAD:
        if target == prefix or target.startswith(prefix + "."):
            return instead
    return None


def _shown(kata: KataFiles, target: str) -> str:
    return (
        "." + target[len(kata.package) + 1 :] if target.startswith(kata.package + ".") else target
    )


def _allowed_text(kata: KataFiles) -> str:
    own = "the modules of this kata"
    if kata.given:
        own += " (given: " + ", ".join(sorted(kata.given)) + ")"
    return ", ".join(f"{m} ({what})" for m, what in ALLOWED.items()) + " and " + own


def _is_module(name: str) -> bool:
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):
        return False
