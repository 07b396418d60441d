"""harness.toolchain: finding compilers and CUDA tools without running them."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from harness import toolchain


@pytest.fixture(autouse=True)
def fresh_caches():
    toolchain.clear_caches()
    yield
    toolchain.clear_caches()


def _fake_tool(directory: Path, name: str, version: str = "fake 1.0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{version}'\necho 'second line'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _isolate_env(monkeypatch: pytest.MonkeyPatch, path_dirs: list[Path]) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join(str(d) for d in path_dirs))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(toolchain, "_site_dirs", lambda: [])
    monkeypatch.setattr(toolchain, "_cuda_dirs", lambda: _cuda_dirs_without_system())


def _cuda_dirs_without_system() -> list[Path]:
    return [Path(os.environ[v]) / "bin" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]


def test_finds_a_tool_on_path(tmp_path, monkeypatch):
    fake = _fake_tool(tmp_path / "bin", "valgrind")
    _isolate_env(monkeypatch, [tmp_path / "bin"])
    assert toolchain.find_tool("valgrind") == fake


def test_missing_tool_is_none_and_require_explains(tmp_path, monkeypatch):
    _isolate_env(monkeypatch, [tmp_path])
    assert toolchain.find_tool("valgrind") is None
    with pytest.raises(toolchain.ToolNotFoundError, match="apt-get install -y valgrind"):
        toolchain.require_tool("valgrind")


def test_logical_names_fall_back_to_gcc_and_versioned_clang(tmp_path, monkeypatch):
    gcc = _fake_tool(tmp_path / "bin", "gcc")
    clang = _fake_tool(tmp_path / "bin", "clang-14")
    _isolate_env(monkeypatch, [tmp_path / "bin"])
    assert toolchain.find_tool("cc") == gcc  # no `cc` on PATH: gcc by name
    assert toolchain.find_tool("clang") == clang


def test_cuda_tools_are_found_in_cuda_home_but_compilers_are_not(tmp_path, monkeypatch):
    nvcc = _fake_tool(tmp_path / "cuda" / "bin", "nvcc")
    _fake_tool(tmp_path / "cuda" / "bin", "gcc")
    _isolate_env(monkeypatch, [tmp_path / "empty"])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert toolchain.find_tool("nvcc") == nvcc
    assert toolchain.find_tool("gcc") is None  # CUDA_HOME/bin is searched for CUDA tools only


def test_cuda_tools_are_found_in_the_pypi_wheels(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    cuobjdump = _fake_tool(site / "nvidia" / "cu13" / "bin", "cuobjdump")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolchain, "_site_dirs", lambda: [site])
    dirs = toolchain._cuda_dirs()
    assert site / "nvidia" / "cu13" / "bin" in dirs
    monkeypatch.setattr(
        toolchain, "_cuda_dirs", lambda: [d for d in dirs if str(d).startswith(str(tmp_path))]
    )
    assert toolchain.find_tool("cuobjdump") == cuobjdump


def test_env_override_wins(tmp_path, monkeypatch):
    on_path = _fake_tool(tmp_path / "bin", "nvcc")
    pinned = _fake_tool(tmp_path / "pinned", "my-nvcc")
    _isolate_env(monkeypatch, [tmp_path / "bin"])
    assert toolchain.find_tool("nvcc") == on_path
    toolchain.clear_caches()
    monkeypatch.setenv("KATA_TOOL_NVCC", str(pinned))
    assert toolchain.find_tool("nvcc") == pinned


def test_find_tool_is_memoised_and_runs_no_subprocess(tmp_path, monkeypatch):
    _fake_tool(tmp_path / "bin", "valgrind")
    _isolate_env(monkeypatch, [tmp_path / "bin"])

    def no_subprocess(*a, **k):
        raise AssertionError("find_tool must not start processes")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    first = toolchain.find_tool("valgrind")
    start = time.perf_counter()
    for _ in range(1000):
        assert toolchain.find_tool("valgrind") == first
    assert time.perf_counter() - start < 0.05


def test_tool_version_is_the_first_line_and_memoised(tmp_path, monkeypatch):
    _fake_tool(tmp_path / "bin", "valgrind", "valgrind-9.9.9")
    _isolate_env(monkeypatch, [tmp_path / "bin"])
    assert toolchain.tool_version("valgrind") == "valgrind-9.9.9"
    assert "second line" in toolchain.tool_version_text("valgrind")
    (tmp_path / "bin" / "valgrind").unlink()
    assert toolchain.tool_version("valgrind") == "valgrind-9.9.9"  # memoised


def test_nvidia_versions_report_the_release_line(tmp_path, monkeypatch):
    path = tmp_path / "bin" / "nvcc"
    path.parent.mkdir()
    path.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Copyright'\n"
        "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n"
    )
    path.chmod(0o755)
    _isolate_env(monkeypatch, [tmp_path / "bin"])
    assert toolchain.tool_version("nvcc") == "Cuda compilation tools, release 13.0, V13.0.88"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("nvcc", "pip install -e '.[cuda]'"),
        ("cuobjdump", "nvidia-cuda-cuobjdump"),
        ("clang", "apt-get install -y clang-14"),
        ("valgrind", "apt-get install -y valgrind"),
        ("something-else", "something-else"),
    ],
)
def test_install_advice(name, fragment):
    assert fragment in toolchain.install_advice(name)


def test_real_compiler_if_present():
    cc = toolchain.find_tool("cc")
    if cc is None:
        pytest.skip("no C compiler here: " + toolchain.install_advice("cc"))
    assert cc.is_absolute()
    assert toolchain.tool_version("cc")
