"""Test modules built from source held in memory: decrypted hidden tests, canonical public tests.

Each kata's test directory becomes a synthetic package served by :class:`MemoryImporter` (a
``sys.meta_path`` finder that answers only for its own names), so a test module may import its
siblings relatively (``from .helpers import program``). A module's source is parsed, its asserts
rewritten the way pytest rewrites them (so failures keep their explanations), compiled and
executed into a fresh module: no file, no ``__pycache__``, no ``.pyc`` is ever written.

Collected as :class:`MemoryDir` (one per directory; its ``conftest.py``, if any, contributes
fixtures visible to the modules below it) holding :class:`MemoryModule` nodes, whose node ids and
paths are those the files would have on disk, so results, tasks and reports are the same as for
the plaintext tree.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import linecache
import sys
import types
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from _pytest import nodes
from _pytest.assertion.rewrite import rewrite_asserts

from ..shared_fixtures import public_conftest, share

_PREFIX = "_kata_mem_"  # the guard in harness.sandbox treats _kata_* modules as learner-side


class MemoryLoadError(Exception):
    """A module of a bundle could not be built (syntax error, bad name)."""


@dataclass
class _Source:
    path: Path  # where the file would be on disk (its node path; never opened)
    text: str
    package: bool
    show_source: bool  # public tests: tracebacks show the canonical lines


class MemoryImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves modules from memory, for names this importer was given only."""

    def __init__(self) -> None:
        self.sources: dict[str, _Source] = {}
        self.config: pytest.Config | None = None

    def add(self, name: str, source: _Source) -> None:
        self.sources[name] = source

    # importlib protocol
    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        src = self.sources.get(fullname)
        if src is None:
            return None
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=str(src.path), is_package=src.package
        )
        if src.package:
            spec.submodule_search_locations = []  # children come from this importer only
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        src = self.sources[module.__name__]
        module.__file__ = str(src.path)
        exec(self.compile(src), module.__dict__)

    def compile(self, src: _Source) -> types.CodeType:
        filename = str(src.path)
        tree = ast.parse(src.text, filename=filename)
        config = self.config
        if config is None or config.getoption("assertmode", "rewrite") == "rewrite":
            rewrite_asserts(tree, src.text.encode(), filename, config)
        if src.show_source:
            # mtime None: linecache never re-reads this name from disk (where a learner's edited
            # copy may be), so tracebacks quote the canonical source.
            lines = src.text.splitlines(keepends=True)
            linecache.cache[filename] = (len(src.text), None, lines, filename)
        return compile(tree, filename, "exec", dont_inherit=True)


IMPORTER = MemoryImporter()


def install(config: pytest.Config) -> MemoryImporter:
    IMPORTER.config = config
    if IMPORTER not in sys.meta_path:
        sys.meta_path.insert(0, IMPORTER)
    return IMPORTER


def uninstall() -> None:
    if IMPORTER in sys.meta_path:
        sys.meta_path.remove(IMPORTER)
    for name in [n for n in sys.modules if n.startswith(_PREFIX)]:
        del sys.modules[name]
    for name in [n for n, s in IMPORTER.sources.items() if s.show_source]:
        linecache.cache.pop(str(IMPORTER.sources[name].path), None)
    IMPORTER.sources.clear()
    IMPORTER.config = None


def _module_name(rel: str) -> str:
    parts = list(PurePosixPath(rel).with_suffix("").parts)
    for p in parts:
        if not p.isidentifier():
            raise MemoryLoadError(f"{rel}: {p!r} is not a valid module name")
    return ".".join(parts)


def register_tree(base: Path, files: dict[str, str], tag: str, show_source: bool) -> str:
    """Add a directory's modules (``files``: path relative to `base` -> source) as a synthetic
    package; returns the package's name. Sub-directories become sub-packages."""
    digest = hashlib.sha1(f"{base}\0{tag}".encode()).hexdigest()[:10]
    package = f"{_PREFIX}{tag}_{digest}"
    IMPORTER.add(package, _Source(base / "__init__.py", "", True, False))
    for rel, text in files.items():
        if not rel.endswith(".py"):
            continue
        name = _module_name(rel)
        parents = name.split(".")[:-1]
        for i in range(1, len(parents) + 1):
            sub = ".".join(parents[:i])
            key = f"{package}.{sub}"
            if key not in IMPORTER.sources:
                IMPORTER.add(
                    key, _Source(base.joinpath(*parents[:i], "__init__.py"), "", True, False)
                )
        if name.endswith("__init__"):
            key = f"{package}.{name.removesuffix('__init__').rstrip('.')}".rstrip(".")
            IMPORTER.add(key, _Source(base / rel, text, True, show_source))
        else:
            IMPORTER.add(f"{package}.{name}", _Source(base / rel, text, False, show_source))
    return package


# --------------------------------------------------------------------------- collection
class MemoryModule(pytest.Module):
    """A test module whose object is built from memory, never imported from its path."""

    fullname: str = ""

    def _getobj(self) -> types.ModuleType:
        try:
            return importlib.import_module(self.fullname)
        except SyntaxError as e:
            raise self.CollectError(
                f"{self.path.name}, line {e.lineno}: SyntaxError: {e.msg}"
            ) from None
        except ImportError as e:
            raise self.CollectError(f"{self.path.name} could not import: {e}") from None


class MemoryDir(nodes.FSCollector):
    """A directory of test modules held in memory (public or hidden tests of one kata)."""

    files: dict[str, str]
    package: str
    # hidden tests: where the public tests/conftest.py comes from (the public MemoryDir, or the
    # kata directory on disk), so its fixtures are theirs too
    shared_from: MemoryDir | Path | None = None

    @classmethod
    def create(cls, parent: nodes.Node, path: Path, files: dict[str, str], tag: str,
               show_source: bool, shared_from: MemoryDir | Path | None = None) -> MemoryDir:  # fmt: skip
        node = cls.from_parent(parent, path=path)
        node.files = dict(files)
        node.package = register_tree(path, files, tag, show_source)
        node.shared_from = shared_from
        return node

    def top_conftest(self) -> types.ModuleType | None:
        """This directory's own conftest.py module (not a sub-directory's), if it has one."""
        if "conftest.py" not in self.files:
            return None
        return importlib.import_module(f"{self.package}.conftest")

    def collect(self):
        patterns = self.config.getini("python_files")
        fm = self.session._fixturemanager
        if isinstance(self.shared_from, MemoryDir):
            public = self.shared_from.top_conftest()
        elif isinstance(self.shared_from, Path):
            public = public_conftest(self.config, self.shared_from)
        else:
            public = None
        share(self, [public] if public is not None else [])
        for rel in sorted(r for r in self.files if PurePosixPath(r).name == "conftest.py"):
            module = importlib.import_module(f"{self.package}.{_module_name(rel)}")
            _refuse_hooks(module, self.path / rel)
            fm.parsefactories(holder=module, node=self)  # fixtures for the tests below
        for rel in sorted(self.files):
            name = PurePosixPath(rel).name
            if name == "conftest.py" or not any(fnmatch.fnmatch(name, p) for p in patterns):
                continue
            mod = MemoryModule.from_parent(self, path=self.path / rel)
            mod.fullname = f"{self.package}.{_module_name(rel)}"
            yield mod


def _refuse_hooks(module: types.ModuleType, path: Path) -> None:
    hooks = sorted(n for n, v in vars(module).items() if n.startswith("pytest_") and callable(v))
    if hooks:
        raise MemoryLoadError(
            f"{path}: defines {', '.join(hooks)}: conftest files of kata tests may hold fixtures "
            "and helpers only (grade mode and bundles load them in memory, without hooks)"
        )
