"""Public test of kgpu-driver, task "kbuild": the same kgpu.c builds as a real kernel module."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

MODULE_FILES = ("kgpu.c", "kgpu_hw.c", "kgpu_hw.h", "kgpu_kernel.h", "kgpu_uapi.h", "Kbuild")


def test_kbuild_builds_a_real_module(kata: Any, tmp_path: Path) -> None:
    for name in MODULE_FILES:
        shutil.copy(kata.source(name), tmp_path / name)
    build = Path("/lib/modules") / os.uname().release / "build"
    proc = subprocess.run(
        ["make", "-C", str(build), f"M={tmp_path}", "modules"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "error" in ln]
    assert proc.returncode == 0, "Kbuild failed:\n" + "\n".join(
        errors[:15] or [proc.stderr[-2000:]]
    )
    module = tmp_path / "kgpu_drv.ko"
    assert module.exists(), f"no kgpu_drv.ko after make:\n{proc.stdout[-1000:]}"
    assert b"license=GPL" in module.read_bytes(), 'MODULE_LICENSE("GPL") is missing'
