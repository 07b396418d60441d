"""Find the external tools the harness drives: C/C++ compilers, the CUDA toolchain, valgrind.

`find_tool` only looks at the file system (no subprocess), so the tier logic can call it for every
capability at start-up for free. `tool_version` runs `TOOL --version` once per process.
"""

from __future__ import annotations

import functools
import json
import os
import site
import subprocess
import sys
from pathlib import Path

__all__ = [
    "TOOLS",
    "ToolNotFoundError",
    "clear_caches",
    "find_tool",
    "install_advice",
    "require_tool",
    "tool_version",
    "tool_version_text",
    "typescript_version",
]

# Logical name -> executable names tried in order. "cc"/"cxx" prefer the system default compiler,
# then gcc/g++ by name; clang also accepts Debian's versioned binaries (clang-14 ...).
_CLANG_VERSIONS = tuple(range(20, 13, -1))
TOOLS: dict[str, tuple[str, ...]] = {
    "cc": ("cc", "gcc"),
    "gcc": ("gcc", "cc"),
    "cxx": ("c++", "g++"),
    "g++": ("g++", "c++"),
    "clang": ("clang", *(f"clang-{v}" for v in _CLANG_VERSIONS)),
    "clang++": ("clang++", *(f"clang++-{v}" for v in _CLANG_VERSIONS)),
    "nvcc": ("nvcc",),
    "ptxas": ("ptxas",),
    "cuobjdump": ("cuobjdump",),
    "nvdisasm": ("nvdisasm",),
    "cu++filt": ("cu++filt",),
    "c++filt": ("c++filt",),
    "valgrind": ("valgrind",),
    "cargo": ("cargo",),
    "promtool": ("promtool",),
    "gdb": ("gdb",),
    "strace": ("strace",),
    "bpftrace": ("bpftrace",),
    "node": ("node", "nodejs"),  # Debian and Ubuntu once named it nodejs
    "tsc": ("tsc",),  # the TypeScript compiler of the `typescript` npm package
}

# Tools that may live outside PATH, in a CUDA toolkit or in the nvidia-cuda-* PyPI wheels.
_CUDA_TOOLS = frozenset({"nvcc", "ptxas", "cuobjdump", "nvdisasm", "cu++filt"})

_CUDA_ADVICE = "install the CUDA toolkit (or set CUDA_HOME), or `pip install -e '.[cuda]'`"
_ADVICE: dict[str, str] = {
    "cc": "install a C compiler: `apt-get install -y gcc`",
    "gcc": "install gcc: `apt-get install -y gcc`",
    "cxx": "install a C++ compiler: `apt-get install -y g++`",
    "g++": "install g++: `apt-get install -y g++`",
    "clang": "install clang: `apt-get install -y clang-14`",
    "clang++": "install clang: `apt-get install -y clang-14`",
    "nvcc": _CUDA_ADVICE,
    "ptxas": _CUDA_ADVICE,
    "cuobjdump": "install the CUDA toolkit, or `pip install nvidia-cuda-cuobjdump` "
    "(part of `pip install -e '.[cuda]'`)",
    "nvdisasm": "install the CUDA toolkit, or `pip install nvidia-cuda-nvdisasm` "
    "(part of `pip install -e '.[cuda]'`)",
    "cu++filt": _CUDA_ADVICE,
    "c++filt": "install binutils: `apt-get install -y binutils`",
    "valgrind": "install valgrind: `apt-get install -y valgrind`",
    "promtool": "install Prometheus' promtool: `apt-get install -y prometheus` "
    "(or the promtool binary from a Prometheus release tarball, on PATH)",
    "gdb": "install gdb: `apt-get install -y gdb`",
    "strace": "install strace: `apt-get install -y strace`",
    "bpftrace": "install bpftrace: `apt-get install -y bpftrace` (it also needs root, or CAP_BPF "
    "and CAP_PERFMON, and tracefs: a container usually refuses it)",
    "node": "install Node.js >= 20.15: `apt-get install -y nodejs npm` (Debian 13 has 20.19; "
    "Debian 12 and Ubuntu 24.04 have 18: take NodeSource's or a release from https://nodejs.org)",
    "tsc": "install TypeScript from npm: `npm ci` in the repository root (the pinned typescript "
    "of its package.json, into ./node_modules), or `npm install -g typescript@5`",
    "cargo": "install Rust with rustup (https://rustup.rs: `curl --proto '=https' --tlsv1.2 "
    "-sSf https://sh.rustup.rs | sh`) or `apt-get install -y cargo`",
}


class ToolNotFoundError(LookupError):
    """A required tool is missing; the message says how to install it."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"{name} not found: {install_advice(name)}")


def _env_override(name: str) -> Path | None:
    # KATA_TOOL_NVCC=/opt/cuda/bin/nvcc pins one tool without touching PATH.
    key = "KATA_TOOL_" + name.upper().replace("+", "X").replace("-", "_")
    value = os.environ.get(key)
    if value and _is_executable(Path(value)):
        return Path(value)
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _site_dirs() -> list[Path]:
    dirs: list[str] = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # some embedded/virtualenv setups lack it
        pass
    dirs.extend(p for p in sys.path if p.endswith("site-packages"))
    seen: dict[str, None] = dict.fromkeys(dirs)
    return [Path(d) for d in seen]


def _cuda_dirs() -> list[Path]:
    dirs: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs.append(Path("/usr/local/cuda/bin"))
    for sp in _site_dirs():
        nvidia = sp / "nvidia"
        if nvidia.is_dir():
            # CUDA 13 wheels: nvidia/cu13/bin; CUDA 12 wheels: nvidia/cuda_nvcc/bin etc.
            dirs.extend(sorted(nvidia.glob("cu*/bin"), reverse=True))
    return dirs


def search_dirs(name: str) -> list[Path]:
    """Directories `find_tool(name)` searches, in order."""
    dirs = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    if name in _CUDA_TOOLS:
        dirs.extend(_cuda_dirs())
    if name == "cargo":  # rustup installs into ~/.cargo/bin, often not yet on PATH
        home = os.environ.get("CARGO_HOME") or str(Path.home() / ".cargo")
        dirs.append(Path(home) / "bin")
    if name == "tsc":  # `npm ci` in the repository root installs it project-locally
        dirs.extend(_node_modules_bins())
    return dirs


def _node_modules_bins() -> list[Path]:
    """node_modules/.bin of the repository around the working directory, then of the one that
    holds this harness (a learner runs pytest from either)."""
    out: list[Path] = []
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for d in (start, *start.parents):
            if (d / "pyproject.toml").is_file() and (d / "katas").is_dir():
                if d / "node_modules" / ".bin" not in out:
                    out.append(d / "node_modules" / ".bin")
                break
    return out


def typescript_version(tsc: Path) -> str | None:
    """The version of the `typescript` npm package that `tsc` belongs to (its bin/tsc, through
    the node_modules/.bin or global symlink), or None when it is not that package's: a file
    read, no subprocess."""
    try:
        package = Path(os.path.realpath(tsc)).parent.parent / "package.json"
        meta = json.loads(package.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("name") != "typescript":
        return None
    version = meta.get("version")
    return version if isinstance(version, str) else None


@functools.cache
def find_tool(name: str) -> Path | None:
    """Absolute path of tool `name` (a key of TOOLS or a plain executable name), or None.

    Order: $KATA_TOOL_<NAME>, PATH, then for CUDA tools $CUDA_HOME/bin, $CUDA_PATH/bin,
    /usr/local/cuda/bin and the nvidia-cuda-* wheels' site-packages/nvidia/cu*/bin.
    Memoised; call `clear_caches()` after changing PATH.
    """
    override = _env_override(name)
    if override is not None:
        return override
    candidates = TOOLS.get(name, (name,))
    dirs = search_dirs(name)
    for exe in candidates:
        for d in dirs:
            path = d / exe
            if _is_executable(path):
                return path.absolute()
    return None


def require_tool(name: str) -> Path:
    """Like find_tool, but raises ToolNotFoundError (with install advice) when missing."""
    path = find_tool(name)
    if path is None:
        raise ToolNotFoundError(name)
    return path


def install_advice(name: str) -> str:
    """One line telling a learner how to get tool `name`."""
    return _ADVICE.get(name, f"install `{name}` and make sure it is on PATH")


@functools.cache
def tool_version_text(name: str) -> str:
    """Full `TOOL --version` output (stdout+stderr); memoised. Used in build-cache keys."""
    path = require_tool(name)
    try:
        proc = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path}: --version failed: {exc}"
    return (proc.stdout + proc.stderr).strip()


@functools.cache
def tool_version(name: str) -> str:
    """A one-line version string for reports.

    The first line of `--version`, except for NVIDIA tools whose first line is a banner: for those
    the line naming the release ("Cuda compilation tools, release 13.0, V13.0.88").
    """
    lines = [ln.strip() for ln in tool_version_text(name).splitlines() if ln.strip()]
    if not lines:
        return ""
    if "NVIDIA" in lines[0]:
        for line in lines:
            if "release" in line and any(ch.isdigit() for ch in line):
                return line
    return lines[0]


def clear_caches() -> None:
    """Forget memoised look-ups (tests that change PATH call this)."""
    find_tool.cache_clear()
    tool_version_text.cache_clear()
    tool_version.cache_clear()
