"""``kata publish --check``: no line of reference code or hidden test in the learner tree.

Every line of every file under a published kata's ``solutions/`` mirror is normalised (outer
and repeated whitespace collapsed, a trailing comment dropped) and fingerprinted, the way
nbgrader checksums its solution cells; trivial lines are left out (blank, comments, imports,
lines with fewer than 12 letters and digits). So are the lines the reference shares with its own
public skeleton, because the stub and the public tests are published on purpose: a reference
file's lines that are also in the stub of the same name (signatures, docstrings), and a hidden
test's lines that are also in the kata's public tests (fixtures such as ``kata.module(...)``),
and idioms the published harness itself uses (``@dataclass(frozen=True)``).
Every remaining fingerprint is a secret; any line of the learner tree that has one is a leak.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..hidden.integrity import BUNDLE_PATH
from ..loader import solution_dir
from ..manifest import Manifest

MIN_ALNUM = 12
_IMPORT = re.compile(r"^(import\s|from\s+\S+\s+import\s|#\s*include\s|using\s|package\s)")
_COMMENT_ONLY = re.compile(r"^(#|//|/\*|\*|--|;)")
_PY_TRAILING = re.compile(r"\s+#\s[^'\"]*$")  # "x = 1  # note", not a '#' inside a string
_C_TRAILING = re.compile(r"\s+//[^'\"]*$")
_QUOTES_ONLY = re.compile(r'^[rbuf]?("""|\'\'\')$')
_SKIP_FILES = {BUNDLE_PATH}


def normalise(line: str) -> str:
    text = " ".join(line.split())
    text = _PY_TRAILING.sub("", text)
    return _C_TRAILING.sub("", text).strip()


def trivial(norm: str) -> bool:
    if not norm or _COMMENT_ONLY.match(norm) or _IMPORT.match(norm) or _QUOTES_ONLY.match(norm):
        return True
    return sum(c.isalnum() for c in norm) < MIN_ALNUM


def fingerprint(norm: str) -> str:
    return hashlib.sha256(norm.encode()).hexdigest()[:20]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return []  # binary files hold no lines of source


def _norms(paths: list[Path]) -> set[str]:
    return {normalise(line) for p in paths for line in _lines(p)}


def secrets(root: Path, manifests: list[Manifest]) -> dict[str, str]:
    """Fingerprint -> where it comes from (``solutions/phase01/simt/simt.py:42``)."""
    out: dict[str, str] = {}
    common = _norms(
        [p for p in sorted((root / "harness").rglob("*.py"))
         if not {"tests", "benchmarks", "__pycache__"} & set(p.relative_to(root).parts)]
    )  # fmt: skip
    for m in manifests:
        mirror = solution_dir(m.dir)
        if mirror is None:
            continue
        public_tests = _norms(sorted((m.dir / "tests").rglob("*.py")))
        for p in sorted(mirror.rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            rel = p.relative_to(mirror)
            skeleton = public_tests if rel.parts[0] == "tests" else _norms([m.dir / rel])
            origin = p.relative_to(root).as_posix()
            for i, line in enumerate(_lines(p), 1):
                norm = normalise(line)
                if not trivial(norm) and norm not in skeleton and norm not in common:
                    out.setdefault(fingerprint(norm), f"{origin}:{i}")
    return out


@dataclass(frozen=True)
class Leak:
    file: str  # in the learner tree
    line: int
    origin: str  # the solutions/ line it repeats

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: repeats {self.origin}"


def scan(tree: Path, secret: dict[str, str]) -> list[Leak]:
    leaks = []
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree).as_posix()
        if not p.is_file() or rel in _SKIP_FILES or ".git" in p.relative_to(tree).parts:
            continue
        for i, line in enumerate(_lines(p), 1):
            fp = fingerprint(normalise(line))
            if fp in secret:
                leaks.append(Leak(rel, i, secret[fp]))
    return leaks
