"""Hidden tests see the public ``tests/conftest.py`` fixtures (docs/kata-layout.md, "Loading").

Hidden tests live in ``solutions/<kata>/tests/``, outside the public ``katas/<kata>/tests/``
directory whose conftest pytest would show them, so a fixture both need used to be copied into
every hidden file. :class:`HiddenTests` collects a kata's hidden test files under one node (their
directory) and registers the public conftest's fixtures for that node: the plaintext instructor
tree here, the in-memory bundle trees in :mod:`harness.hidden.memload` through :func:`share`.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from pathlib import Path

import pytest
from _pytest import nodes

from .layout import TESTS

CONFTEST = "conftest.py"


def public_conftest(config: pytest.Config, kata_dir: Path) -> types.ModuleType | None:
    """The kata's public ``tests/conftest.py`` as pytest imported it (importing it if pytest
    has not yet); None when there is none or conftests are off (grade mode)."""
    tests = kata_dir / TESTS
    if not (tests / CONFTEST).is_file():
        return None
    pm = config.pluginmanager
    # Private pytest API, in this one place: the same module object pytest uses for the public
    # tests, so a fixture is defined once and its module-level state is shared.
    pm._loadconftestmodules(
        tests,
        config.getoption("importmode"),
        rootpath=config.rootpath,
        consider_namespace_packages=config.getini("consider_namespace_packages"),
    )
    for mod in pm._getconftestmodules(tests):
        if Path(str(mod.__file__)).resolve() == (tests / CONFTEST).resolve():
            return mod
    return None


def share(node: nodes.Node, modules: Iterable[types.ModuleType]) -> None:
    """Make the fixtures of `modules` visible to `node` and everything below it."""
    fm = node.session._fixturemanager
    for module in modules:
        fm.parsefactories(holder=module, node=node)


class HiddenTests(nodes.FSCollector):
    """A kata's hidden test directory in the instructor tree; its modules keep their node ids."""

    kata_dir: Path
    files: list[Path]

    @classmethod
    def create(cls, parent: nodes.Node, path: Path, kata_dir: Path, files: list[Path]):
        node = cls.from_parent(parent, path=path)
        node.kata_dir, node.files = kata_dir, files
        return node

    def collect(self):
        conftest = public_conftest(self.config, self.kata_dir)
        share(self, [conftest] if conftest is not None else [])
        for path in self.files:
            ihook = self.session.gethookproxy(path)
            yield from ihook.pytest_collect_file(file_path=path, parent=self)


__all__ = ["HiddenTests", "public_conftest", "share"]
