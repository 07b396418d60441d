"""A content-addressed artefact cache shared by processes (xdist workers, CI shards).

Each entry is a directory named by a sha256 key. Producers build into a private temporary
directory and `os.replace` it into place while holding a per-key `filelock`, so readers see an
entry either complete or not at all and two workers never build the same key twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from harness._lazy import lazy_module
from harness.layout import results_dir

filelock = lazy_module("filelock")  # imported by the first build, not at start-up

__all__ = ["ArtefactCache", "Entry", "cache_root", "hash_parts"]

ENV_VAR = "KATA_BUILD_CACHE"
LOG_NAME = "compiles.log"


def _repo_root(start: Path) -> Path | None:
    for parent in (start, *start.parents):
        if (parent / "pyproject.toml").is_file():
            return parent
    return None


def cache_root() -> Path:
    """$KATA_BUILD_CACHE, else <repo>/.kata/build-cache, else the user cache dir."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        root = _repo_root(start)
        if root is not None and os.access(root, os.W_OK):
            return results_dir(root) / "build-cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-katas" / "build-cache"


def hash_parts(parts: Iterable[bytes | str]) -> str:
    """sha256 over length-prefixed parts, so ("ab", "c") and ("a", "bc") differ."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


@dataclass(frozen=True)
class Entry:
    path: Path  # the entry directory, read-only by convention
    created: bool  # True when this call ran the producer


class ArtefactCache:
    """Entries live at <root>/<key[:2]>/<key>/; locks at <root>/locks/<key>.lock."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root()
        self.created_here = 0  # producers run by this process (in-process counter)

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lookup(self, key: str) -> Path | None:
        d = self.entry_dir(key)
        return d if d.is_dir() else None

    def get_or_create(self, key: str, produce: Callable[[Path], None], *, label: str = "") -> Entry:
        """Return the entry for `key`, running `produce(tmpdir)` to fill it if it is missing.

        `produce` writes its files into the directory it is given; if it raises, nothing is cached.
        """
        final = self.entry_dir(key)
        if final.is_dir():  # fast path: no lock, no subprocess
            return Entry(final, created=False)
        (self.root / "locks").mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(self.root / "locks" / f"{key}.lock")):
            if final.is_dir():  # another process built it while we waited
                return Entry(final, created=False)
            tmp_parent = self.root / "tmp"
            tmp_parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=key[:12] + "-", dir=tmp_parent))
            try:
                produce(tmp)
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, final)  # atomic: readers never see a half-built entry
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            self.created_here += 1
            self._log(key, label)
        return Entry(final, created=True)

    def _log(self, key: str, label: str) -> None:
        # One line per real build; O_APPEND writes this small are not interleaved.
        line = f"{time.time():.3f}\t{os.getpid()}\t{key}\t{label}\n"
        with open(self.root / LOG_NAME, "a", encoding="utf-8") as fh:
            fh.write(line)

    def logged_builds(self) -> list[str]:
        """Lines of compiles.log: every real build by any process using this root."""
        try:
            return (self.root / LOG_NAME).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
