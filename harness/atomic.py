"""Writing a file so that a reader sees the old content or the new, never half of it.

The content goes to a temporary file in the same directory, which then replaces the target
(``os.replace`` is atomic on one filesystem). Results, progress, hints and bundles use it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, creating its directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The pid keeps two writers (xdist workers, two runs) off one temporary file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    """Write `data` as JSON to `path` atomically."""
    write_text(path, json.dumps(data, indent=indent))


__all__ = ["write_bytes", "write_json", "write_text"]
