"""harness/benchmarks/gpu_check.sh, the one command for a GPU machine (issue 22), without one: its
dry run lists every step with its time limit and writes the archive; shellcheck, where installed,
finds nothing. (GPU_CHECK_FAKE=1 runs the steps that need no GPU; too slow for CI, see
docs/cuda.md.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "harness" / "benchmarks" / "gpu_check.sh"
STEPS = [
    "environment", "install", "peaks", "demanglers", "references", "sanitizer", "sanitize-vector-add",
    "differential", "nvcc-pipeline", "stubs", "bench-cuda",
]  # fmt: skip


def test_the_dry_run_lists_bounded_steps_and_writes_the_archive(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_BUDGET_S": "270"}
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = re.findall(r"^([\w-]+): would run \(limit (\d+)s\): (.*)$", proc.stdout, re.M)
    assert [s[0] for s in steps] == STEPS
    assert all(0 < int(limit) <= 110 for _, limit, _ in steps), "every step has a time limit"
    commands = {name: command for name, _, command in steps}
    assert "--kata-impl=solution" in commands["references"] and "-n 14" in commands["references"]
    assert "--kata-cuda-sanitize=memcheck" in commands["sanitize-vector-add"]
    assert "test_cuda_differential.py" in commands["differential"]
    with tarfile.open(tmp_path / "gpu-check.tar.gz") as tar:
        names = tar.getnames()
    assert "gpu-check/summary.txt" in names


def test_the_installs_are_offline_and_the_wheels_carried() -> None:
    text = SCRIPT.read_text()
    installs = [line for line in text.splitlines() if "pip install" in line]
    assert installs and all("--no-index" in line for line in installs), installs
    assert 'carry=[".whl"]' in text, "the device tool's invocation names the wheels' folder"
    assert "/.whl/" in (ROOT / ".gitignore").read_text().split(), "the wheels are never committed"
    # What --fetch-wheels downloads: the project's dependencies, read from pyproject.toml when
    # it runs (a dependency added later is fetched too), and EXTRA_WHEELS.
    assert '["project"]["dependencies"]' in text and '"$ROOT/pyproject.toml"' in text
    extra = re.search(r"^EXTRA_WHEELS=\((.*)\)$", text, re.M)
    assert extra is not None
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    fetched = {re.split(r"[<>=; ]", d.strip('"'))[0] for d in [*deps, *extra.group(1).split()]}
    for wheel in ("cffi", "pycparser", "cryptography", "grpcio", "grpcio-tools", "protobuf"):
        assert wheel in fetched, wheel


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck_finds_nothing() -> None:
    proc = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
