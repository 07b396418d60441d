"""A minimal root file system: a static busybox, its applets as symlinks, and the default
device nodes (what `docker export` of a busybox image plus runc's default /dev would give).
Given code."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .spec import DEFAULT_DEVICES

DIRS = ("bin", "dev", "etc", "proc", "sys", "tmp", "root", "usr/lib")


def build(root: Path, busybox: str) -> Path:
    """Fill `root` (created if missing) and return it. Needs root for the device nodes."""
    root.mkdir(parents=True, exist_ok=True)
    for d in DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = subprocess.run(
        [busybox, "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    for name in applets:
        link = root / "bin" / name
        if name != "busybox" and not link.exists():
            link.symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "hostname").write_text("rootfs\n")
    for dev in DEFAULT_DEVICES:
        path = root / dev.path.lstrip("/")
        if not path.exists():
            os.mknod(path, dev.file_type | dev.mode, os.makedev(dev.major, dev.minor))
            path.chmod(dev.mode)
    return root
