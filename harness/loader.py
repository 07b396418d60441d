"""Load a kata's sources for a test: the learner's files or the reference solution.

Each (kata, implementation) pair becomes a synthetic package whose ``__path__`` lists the
directories to search, solution first: ``solutions/phase01/simt`` then ``katas/phase01/simt``.
Kata modules import their siblings relatively (``from .isa import parse``), so two katas that both
have ``allocator.py`` never collide, in one process or under xdist, and ``sys.path`` is untouched.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from . import hangs, patches
from .layout import shortcut_dir, solution_dir  # noqa: F401 (solution_dir: older importers)
from .manifest import Manifest, load_manifest

IMPLS = ("learner", "solution")
SHORTCUT_PREFIX = "shortcut:"  # --kata-impl=shortcut:<name>: solutions/<kata>/shortcuts/<name>
PATCH_PREFIX = "patch:"  # --kata-impl=patch:<file>: the reference with a unified diff applied
SHORTCUT_PATCH = "shortcut.patch"  # a shortcut's diff against the reference (harness.patches)


class KataLoadError(Exception):
    """A kata module could not be imported (syntax error, missing file, import error).

    `key` names a problem of the sources themselves ("simt.py, line 12: SyntaxError"), which
    every test that imports them would repeat: the results show it in full once per kata.
    """

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class KataImportHang(KataLoadError, hangs.Overrun):
    """A learner module did not finish importing within the test's limit."""


def check_impl(value: str) -> str:
    """`--kata-impl`'s value: learner, solution, shortcut:<name> or patch:<file>; ValueError
    otherwise. A patch file is made absolute (pytest subprocesses may start elsewhere)."""
    if value in IMPLS:
        return value
    patch = patch_file(value)
    if patch is not None:
        if not patch.is_file():
            raise ValueError(f"{value!r}: {patch} is not a file (a unified diff against the "
                             "reference, paths relative to solutions/phaseNN/<kata>)")  # fmt: skip
        return f"{PATCH_PREFIX}{patch.resolve()}"
    name = shortcut_name(value)
    if name is None:
        raise ValueError(
            f"expected learner, solution, shortcut:<name> or patch:<file>; got {value!r}"
        )
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"{value!r}: a shortcut is named by its directory, e.g. shortcut:naive")
    return value


def shortcut_name(impl: str) -> str | None:
    """ "naive" for "shortcut:naive"; None for learner and solution."""
    return impl[len(SHORTCUT_PREFIX) :] if impl.startswith(SHORTCUT_PREFIX) else None


def patch_file(impl: str) -> Path | None:
    """The file of "patch:<file>"; None for the other implementations."""
    return Path(impl[len(PATCH_PREFIX) :]) if impl.startswith(PATCH_PREFIX) else None


def _package_name(manifest: Manifest, impl: str) -> str:
    # The directory's hash keeps two checkouts of one kata apart in one process (pytester runs).
    tag = hashlib.sha1(str(manifest.dir).encode()).hexdigest()[:8]
    if impl.startswith(PATCH_PREFIX):  # a path: its hash, not its spelling
        impl = f"patch_{hashlib.sha1(impl.encode()).hexdigest()[:12]}"
    kata, impl_tag = (re.sub(r"[^a-z0-9]", "_", x.lower()) for x in (manifest.id, impl))
    return f"_kata_p{manifest.phase:02d}_{kata}_{impl_tag}_{tag}"


@dataclass
class KataContext:
    """What the ``kata`` fixture gives a test: the kata, its manifest and its sources for `impl`."""

    dir: Path
    manifest: Manifest
    impl: str  # "learner", "solution", "shortcut:<name>" or "patch:<file>"
    _paths: list[Path] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def search_path(self) -> list[Path]:
        if self._paths is None:
            self._paths = self._search_path()
        return list(self._paths)

    def _search_path(self) -> list[Path]:
        if self.impl == "learner":
            return [self.dir]
        sol = solution_dir(self.dir)
        if sol is None:
            raise KataLoadError(f"--kata-impl={self.impl}: no solutions/ mirror for {self.dir}")
        patch = patch_file(self.impl)
        name = shortcut_name(self.impl)
        if patch is None and name is None:
            return [sol, self.dir]
        if name is not None:
            short = shortcut_dir(self.dir, name)
            if not short.is_dir():
                raise KataLoadError(missing_shortcut(self.dir, name))
            if not (short / SHORTCUT_PATCH).is_file():
                # A whole-copy shortcut (until `kata shortcut convert`): the files it replaces.
                return [short, sol, self.dir]
            patch = short / SHORTCUT_PATCH
        # The files the patch changes or adds, patched; the rest come from the reference.
        try:
            text = patch.read_text(encoding="utf-8")
            return [patches.materialise(sol, text), sol, self.dir]
        except (OSError, UnicodeDecodeError, patches.PatchError) as e:
            where = f"{patch}: " if name is not None else ""
            raise KataLoadError(f"--kata-impl={self.impl}: {where}{e}") from None

    def source(self, name: str) -> Path:
        """The file `name` (e.g. "allocator.c") of this implementation: solution first, then kata."""
        for d in self.search_path:
            if (d / name).exists():
                return d / name
        raise KataLoadError(f"{name} not found in {', '.join(str(d) for d in self.search_path)}")

    def module(self, name: str) -> types.ModuleType:
        """Import kata module `name` ("simt" for simt.py) of this implementation."""
        __tracebackhide__ = True
        from . import boundary  # here, as the fence: the loader is where learner code enters

        package = self._package()
        full = f"{package}.{name}"
        if full in sys.modules:
            boundary.guard_package(package)  # a module learner code imported since
            return sys.modules[full]
        try:
            with hangs.running(hangs.IMPORT, self._import_key(name), f"{name}.py"):
                try:
                    module = importlib.import_module(full)
                    hangs.fence_module(module)  # its functions that hung in earlier tests
                    boundary.guard_package(package)  # what it returns is checked (boundary.py)
                    return module
                except hangs.Overrun as e:
                    seconds = getattr(e, "seconds", None)
                    raise KataImportHang(
                        hangs.import_hang_sentence(f"{name}.py", seconds)
                        if seconds
                        else f"{name}.py did not finish importing: {e}"
                    ) from None
        except hangs.KnownHang as e:
            raise KataLoadError(str(e)) from None
        except ModuleNotFoundError as e:
            if e.name == f"{package}.{name}":
                raise KataLoadError(
                    f"no module {name!r} in {', '.join(str(d) for d in self.search_path)}"
                ) from None
            raise KataLoadError(f"{name}.py could not import {e.name!r}: {e}") from None
        except SyntaxError as e:
            where = f"{Path(e.filename or '?').name}, line {e.lineno}"
            head = f"{where}: {type(e).__name__}: {e.msg}"
            raise KataLoadError(f"{head}\n{_caret(e)}", key=head) from None

    def _import_key(self, name: str) -> str:
        """The build of module `name`: its file's contents (any edit is new code)."""
        for d in self.search_path:
            path = d / f"{name}.py"
            if path.is_file():
                # The package names the kata: another kata's identical file is not this one.
                return f"import:{self._package()}:{hashlib.sha1(path.read_bytes()).hexdigest()}"
        return f"import:{self.dir}:{name}"

    def _package(self) -> str:
        name = _package_name(self.manifest, self.impl)
        if name not in sys.modules:
            paths = [str(p) for p in self.search_path]
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = paths
            package = importlib.util.module_from_spec(spec)
            package.__path__ = paths
            sys.modules[name] = package
            from .sandbox import fence  # here: the loader is where learner code enters

            m = self.manifest
            given = m.given if "given" in m.raw else None
            fence.register(name, m.id, self.search_path, m.files, given)
        return name


def missing_shortcut(kata_dir: Path, name: str) -> str:
    """The sentence for a --kata-impl=shortcut:<name> that this kata does not have."""
    where = shortcut_dir(kata_dir, name)
    there = shortcuts_of(kata_dir)
    have = f"its shortcuts: {', '.join(there)}" if there else "it has no shortcuts"
    return (
        f"--kata-impl=shortcut:{name}: kata {kata_dir.name} has no shortcut {name!r} "
        f"({where} does not exist; {have})"
    )


def shortcuts_of(kata_dir: Path) -> list[str]:
    """The names of a kata's shortcut directories, sorted."""
    base = shortcut_dir(kata_dir, "_").parent
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def _caret(e: SyntaxError) -> str:
    """The offending line with a caret under the column, as Python prints it."""
    text = (e.text or "").rstrip("\n")
    if not text.strip():
        return ""
    stripped = text.lstrip()
    col = max(0, (e.offset or 1) - 1 - (len(text) - len(stripped)))
    return f"    {stripped}\n    {' ' * min(col, len(stripped))}^"


def context_for(path: Path, impl: str) -> KataContext:
    """The kata context of a test file at `path` (public under katas/, or hidden under solutions/)."""
    from .manifest import find_kata_dir

    kata_dir = find_kata_dir(path)
    if kata_dir is None:
        raise KataLoadError(f"{path} is not inside a kata (no kata.toml above it)")
    return KataContext(kata_dir, load_manifest(kata_dir), impl)
