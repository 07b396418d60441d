"""Public test of kgpu-driver, task "kbuild": the same kgpu.c builds as a real kernel module."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness import todo
from harness.tiers import kernel_build_dir

MODULE_FILES = ("kgpu.c", "kgpu_hw.c", "kgpu_hw.h", "kgpu_kernel.h", "kgpu_uapi.h", "Kbuild")


def test_kbuild_builds_a_real_module(kata: Any, tmp_path: Path) -> None:
    if "KGPU_TODO;" in kata.source("kgpu.c").read_text():
        todo("kgpu.c: a function still returns KGPU_TODO (build the module once it is written)")
    for name in MODULE_FILES:
        shutil.copy(kata.source(name), tmp_path / name)
    build = kernel_build_dir()
    assert build is not None, "the kbuild capability was probed, but no kernel headers are left"
    proc = subprocess.run(
        ["make", "-C", str(build), f"M={tmp_path}", "modules"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    log = proc.stdout.splitlines() + proc.stderr.splitlines()
    problems = [ln for ln in log if "error" in ln or "warning" in ln]
    assert proc.returncode == 0, f"Kbuild ({build}) failed:\n" + "\n".join(
        problems[:15] or log[-15:]
    )
    module = tmp_path / "kgpu_drv.ko"
    assert module.exists(), "no kgpu_drv.ko after make:\n" + "\n".join(log[-10:])
    assert b"license=GPL" in module.read_bytes(), 'MODULE_LICENSE("GPL") is missing'
    assert not [ln for ln in problems if "warning" in ln], (
        "the kernel build warns (kernels build with -Werror more and more):\n" + "\n".join(problems)
    )
