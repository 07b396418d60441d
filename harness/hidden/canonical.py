"""Where a run's canonical tests come from: the hidden-test bundle or the instructor tree.

:func:`resolve` turns the options (``--kata-hidden``, ``--kata-grade``) and the key into a
:class:`Source`; bad combinations and unusable bundles become one clear sentence
(:class:`SourceError`), which the plugin reports as a usage error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..layout import SOLUTIONS
from ..layout import rel as _rel
from .bundle import BundleError, Header, KataTests, open_bundle, read_header
from .integrity import BUNDLE_PATH
from .keys import KEY_ENV, KEY_FILE_ENV, Key, KeyProblem, load_key

TREE, BUNDLE, NONE = "tree", "bundle", "none"


class SourceError(Exception):
    """The options and files do not give a usable source of tests; the message says why."""


@dataclass
class Source:
    root: Path
    kind: str  # TREE (solutions/ on disk), BUNDLE (decrypted), NONE
    bundle_path: Path | None = None
    header: Header | None = None  # also set for a locked bundle (no key)
    key: Key | None = None
    katas: dict[str, KataTests] = field(default_factory=dict)  # bundle: by kata path
    locked: bool = False  # a bundle is there, but no key: hidden tests run at grading

    def rel(self, kata_dir: Path) -> str:
        """The kata's key in :attr:`katas`: its directory relative to the root, POSIX."""
        return _rel(kata_dir, self.root)

    def tests_for(self, kata_dir: Path) -> KataTests | None:
        """The canonical tests of the kata at `kata_dir`, or None when the source has none."""
        rel = self.rel(kata_dir)
        if self.kind == BUNDLE:
            return self.katas.get(rel)
        if self.kind == TREE:
            return tree_tests(self.root, kata_dir)
        return None

    def secret_paths(self, grade: bool) -> list[str]:
        """Files learner code must not read: the bundle, the key file, and in grade mode the
        instructor tree's plaintext hidden tests (already loaded when learner code runs)."""
        out = [str(self.bundle_path.resolve())] if self.bundle_path else []
        if self.key is not None and self.key.path is not None:
            out.append(str(self.key.path))
        if grade and self.kind == TREE:
            out += sorted(
                str(p.resolve())
                for p in (self.root / SOLUTIONS).glob("*/*/tests/**/*.py")
                if "__pycache__" not in p.parts
            )
        return out


def read_py_tree(base: Path) -> dict[str, str]:
    """The .py files under `base` (relative POSIX path -> source), caches left out."""
    if not base.is_dir():
        return {}
    out = {}
    for p in sorted(base.rglob("*.py")):
        if "__pycache__" not in p.parts and p.is_file():
            out[p.relative_to(base).as_posix()] = p.read_text(encoding="utf-8")
    return out


def tree_tests(root: Path, kata_dir: Path) -> KataTests:
    """A kata's tests from the instructor tree: public from katas/, hidden from solutions/."""
    from ..layout import solution_dir
    from ..manifest import load_manifest

    mirror = solution_dir(kata_dir)
    return KataTests(
        _rel(kata_dir, root),
        load_manifest(kata_dir).id,
        read_py_tree(kata_dir / "tests"),
        read_py_tree(mirror / "tests") if mirror is not None else {},
    )


def _no_key(what: str) -> str:
    return f"{what} needs the hidden-test key: set {KEY_ENV} (the key) or {KEY_FILE_ENV} (a file)"


def resolve(root: Path, hidden: str, grade: bool, invocation_dir: Path) -> Source:
    """The source of hidden (and, in grade mode, public) tests for this run."""
    try:
        key = load_key()
    except KeyProblem as e:
        raise SourceError(str(e)) from None
    if hidden == "off":
        if grade:
            raise SourceError("--kata-grade runs the hidden tests: it cannot be combined "
                              "with --kata-hidden=off")  # fmt: skip
        return Source(root, NONE)
    explicit = hidden != "auto"
    if explicit:
        path = Path(hidden)
        path = path if path.is_absolute() else invocation_dir / path
        if not path.is_file():
            raise SourceError(f"--kata-hidden={hidden}: no such bundle file ({path})")
    else:
        path = root / BUNDLE_PATH
        if not path.is_file():
            path = None
    instructor_tree = (root / SOLUTIONS).is_dir()
    if grade and not explicit and instructor_tree:
        return Source(root, TREE)
    if path is None:
        if grade:
            raise SourceError(
                "--kata-grade needs the canonical tests: a hidden-test bundle "
                f"({BUNDLE_PATH}, or --kata-hidden=PATH) with its key, or the instructor "
                "tree (solutions/)"
            )
        return Source(root, TREE if instructor_tree else NONE)
    try:
        if key is None:
            if explicit or grade:
                what = f"--kata-hidden={hidden}" if explicit else f"--kata-grade with {BUNDLE_PATH}"
                raise SourceError(_no_key(what))
            return Source(root, BUNDLE, path, read_header(path), None, {}, locked=True)
        header, katas = open_bundle(path, key)
    except BundleError as e:
        raise SourceError(str(e)) from None
    return Source(root, BUNDLE, path, header, key, {k.path: k for k in katas})
