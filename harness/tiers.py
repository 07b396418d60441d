"""Tiers and capabilities: what this machine can run, probed once per session.

Tiers are what a kata needs as a whole: ``cpu`` (always), ``cluster-sim`` (multi-host simulations
on one machine: network namespaces, root) and ``gpu`` (an NVIDIA driver and device). Capabilities
are single tools or kernel features (``cc``, ``nvcc``, ``valgrind``, ``namespaces`` ...).

Probes are cheap file checks; the only subprocesses are the GPU probe, which runs only when the
driver's files exist, so CUDA is never initialised in the pytest process, bpftrace's (a
program that exits at once, only where bpftrace is on PATH: the kernel may still refuse it) and
`node --version` (only where node is on PATH); both answers are kept per binary (_cached_run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .manifest import CAPABILITIES, TIERS

_TOOLS = {
    "cc": "gcc",
    "cxx": "g++",
    "nvcc": "nvcc",
    "ptxas": "ptxas",
    "cuobjdump": "cuobjdump",
    "clang": "clang",
    "valgrind": "valgrind",
    "chromium": "chromium",
    "cargo": "cargo",
    "promtool": "promtool",  # Prometheus' rule and exposition checker (phase 10)
    "gdb": "gdb",
    "strace": "strace",
    "bpftrace": "bpftrace",  # eBPF tracing (phase 10): on PATH *and* allowed by the kernel
    "node": "node",  # Node.js >= 20.15 *and* a tsc of the typescript npm package (phase 12's CLI)
}


@dataclass(frozen=True)
class Capabilities:
    """The probed tiers and capabilities, with a reason a learner can act on for each one missing."""

    tiers: tuple[str, ...]
    available: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)  # name -> why, with advice

    def has_tier(self, tier: str) -> bool:
        return tier in self.tiers

    def has(self, capability: str) -> bool:
        return capability in self.available

    def why_not(self, name: str) -> str:
        return self.missing.get(name, f"{name} is not available")

    def to_json(self) -> str:
        return json.dumps(
            {"tiers": self.tiers, "available": self.available, "missing": self.missing}
        )

    @classmethod
    def from_json(cls, text: str) -> Capabilities:
        d = json.loads(text)
        return cls(tuple(d["tiers"]), tuple(d["available"]), dict(d["missing"]))

    def restricted_to(self, tier: str) -> Capabilities:
        """Force the tier down (``--kata-tier=cpu``): drop every tier above `tier`."""
        keep = {"cpu"} | ({tier} if tier in self.tiers else set())
        missing = dict(self.missing)
        for t in TIERS:
            if t not in keep and t in self.tiers:
                missing[t] = f"the {t} tier is switched off by --kata-tier={tier}"
        return Capabilities(tuple(t for t in TIERS if t in keep), self.available, missing)


def _find_tool(name: str) -> Path | None:
    try:  # harness.toolchain knows the CUDA wheels and CUDA_HOME; fall back to PATH
        from .toolchain import find_tool
    except ImportError:
        found = shutil.which(_TOOLS.get(name, name))
        return Path(found) if found else None
    return find_tool(_TOOLS.get(name, name))


def _advice(name: str) -> str:
    try:
        from .toolchain import install_advice
    except ImportError:
        return f"install {name}"
    return install_advice(_TOOLS.get(name, name))


def _probe_gpu() -> str | None:
    """None when a GPU is usable, else why not. Runs nvidia-smi in a subprocess, never CUDA here."""
    if not (Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidiactl").exists()):
        return "no NVIDIA driver found (/proc/driver/nvidia is missing)"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "an NVIDIA driver is loaded but nvidia-smi is missing, so no device could be listed"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi failed: {e}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return f"nvidia-smi lists no GPU: {(out.stderr or out.stdout).strip()[:200]}"
    return None


def _probe_os() -> dict[str, str | None]:
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    found: dict[str, str | None] = {}
    userns = Path("/proc/self/ns/user").exists()
    unpriv = Path("/proc/sys/kernel/unprivileged_userns_clone")
    allowed = root or not unpriv.exists() or unpriv.read_text().strip() == "1"
    found["namespaces"] = (
        None
        if userns and allowed and shutil.which("unshare")
        else "Linux namespaces are unavailable (needs Linux with user namespaces and `unshare`)"
    )
    cg1 = Path("/sys/fs/cgroup/memory")
    cg2 = Path("/sys/fs/cgroup/cgroup.controllers")
    writable = (
        os.access(cg1, os.W_OK) if cg1.exists() else cg2.exists() and os.access(cg2.parent, os.W_OK)
    )
    found["cgroups"] = None if writable else "cgroups are not writable here (run as root on Linux)"
    found["netns"] = _probe_netns(root)
    found["kbuild"] = _probe_kbuild()
    found["busybox"] = _probe_busybox()
    return found


# Capability bits (linux/capability.h): root in a container may lack them (docker's default
# set has neither), and then `ip netns add` fails where a probe of euid alone said yes.
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21


def effective_capabilities(status: str | None = None) -> int:
    """The CapEff mask of this process (from /proc/self/status, or the text given); 0 off Linux."""
    if status is None:
        try:
            status = Path("/proc/self/status").read_text()
        except OSError:
            return 0
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def _probe_netns(root: bool, status: str | None = None) -> str | None:
    """None when `ip netns` can work here: root holding CAP_SYS_ADMIN and CAP_NET_ADMIN, and ip."""
    if not root or not shutil.which("ip"):
        return "network namespaces need root and iproute2 (`ip netns`)"
    caps = effective_capabilities(status)
    lacking = [
        name
        for name, bit in (("CAP_SYS_ADMIN", CAP_SYS_ADMIN), ("CAP_NET_ADMIN", CAP_NET_ADMIN))
        if not caps >> bit & 1
    ]
    if lacking:
        return (
            f"network namespaces need {' and '.join(lacking)}, which this root lacks "
            "(a container without --privileged or --cap-add)"
        )
    return None


def _probe_busybox() -> str | None:
    """None when a statically linked busybox exists (a container rootfs has no libc for it)."""
    for path in ("/bin/busybox", "/usr/bin/busybox", shutil.which("busybox") or ""):
        if path and os.path.isfile(path):
            with open(path, "rb") as f:
                head = f.read(4096)
            if head[:4] == b"\x7fELF" and b"ld-linux" not in head and b"/lib64/ld" not in head:
                return None
    return "no statically linked busybox: apt-get install busybox-static"


def kernel_build_dir() -> Path | None:
    """Where external kernel modules are built (`make -C DIR M=... modules`): the running
    kernel's build tree, else the newest installed headers (a module built against them cannot
    be loaded into this kernel, but it shows that the source builds as a module)."""
    running = Path("/lib/modules") / os.uname().release / "build"
    candidates = [running, *sorted(Path("/usr/src").glob("linux-headers-*"), reverse=True)]
    for d in candidates:
        if (d / "Makefile").is_file() and (d / "Module.symvers").is_file():
            return d
    return None


def _probe_kbuild() -> str | None:
    """None when external kernel modules can be built here."""
    if kernel_build_dir() is None:
        return (
            "no kernel headers (/lib/modules/$(uname -r)/build is missing): "
            "apt-get install linux-headers-$(uname -r)"
        )
    if shutil.which("make") is None:
        return "make was not found: apt-get install make"
    return None


def _probe_bpftrace(path: Path) -> str | None:
    """None when bpftrace can attach a syscall tracepoint here, else the kernel's refusal. Being on
    PATH is not enough: eBPF tracing needs root (or CAP_BPF and CAP_PERFMON) and tracefs, which
    most containers lack; `BEGIN { exit(); }` alone attaches nothing and passes even there, so the
    probe attaches the tracepoint the kata's task uses. Bounded: 15 s. Every pytest session
    probes (the suite starts hundreds), so the answer is kept for this boot, binary, mount
    namespace, user and capability set (_cached_run)."""
    program = "tracepoint:syscalls:sys_enter_getppid { } BEGIN { exit(); }"

    def run() -> str | None:
        try:
            out = subprocess.run(
                [str(path), "-e", program], capture_output=True, text=True, timeout=15
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"bpftrace could not run here: {e}"
        if out.returncode == 0:
            return None
        errors = [ln.strip() for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln]
        said = (errors[-1] if errors else (out.stderr or out.stdout).strip()[-200:]) or "no output"
        return f"bpftrace cannot trace system calls here (exit {out.returncode}: {said[:200]})"

    return _cached_run("bpftrace", path, run)


def _cached_run(name: str, path: Path, run: Any) -> str | None:
    """run()'s answer, remembered in the user's cache directory ($XDG_CACHE_HOME or ~/.cache, not
    the temp directory: a learner's run leaves nothing there) under a key of everything it depends on:
    the tool (path, size, mtime), the boot, the mount namespace (tracefs may be mounted in one
    namespace only), the user and its capabilities. A cache that cannot be read or written is
    no cache."""

    def read(p: str) -> str:
        try:
            return Path(p).read_text().strip()
        except OSError:
            return ""

    try:
        st = path.stat()
        mnt = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return run()
    caps = [ln for ln in read("/proc/self/status").splitlines() if ln.startswith("CapEff")]
    key = [str(path), st.st_size, st.st_mtime_ns, read("/proc/sys/kernel/random/boot_id"), mnt,
           os.geteuid(), caps]  # fmt: skip
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cache = Path(base) / "gpu-katas" / f"probe-{name}-{os.geteuid()}.json"
    try:
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            return saved.get("why")
    except (OSError, ValueError, AttributeError):
        pass
    why = run()
    try:
        cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "why": why}))
        os.replace(tmp, cache)
    except OSError:
        pass
    return why


# Node.js 20.15 (and 22.2) brought --disable-wasm-trap-handler: without it fetch (undici's wasm
# HTTP parser reserves ~10 GiB of address space) fails under the sandbox's RLIMIT_AS.
MIN_NODE = (20, 15)
MIN_TYPESCRIPT = 5


def _major(version: str) -> int | None:
    head = version.strip().lstrip("v").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _node_version(text: str) -> tuple[int, int] | None:
    m = re.match(r"v?(\d+)\.(\d+)\.", text.strip())
    return (int(m[1]), int(m[2])) if m else None


def _probe_node(path: Path) -> str | None:
    """None when `path` is Node.js >= MIN_NODE and a tsc of the `typescript` npm package (>=
    MIN_TYPESCRIPT) is found (PATH, or the repository's node_modules/.bin after `npm ci`). The
    node version costs one `node --version`, kept like bpftrace's answer (_cached_run); the tsc
    check reads its package.json."""

    def run() -> str | None:
        try:
            out = subprocess.run(
                [str(path), "--version"], capture_output=True, text=True, timeout=15
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"node could not run here: {e}"
        version = _node_version(out.stdout) if out.returncode == 0 else None
        if version is None:
            return f"{path} --version said {(out.stdout + out.stderr).strip()[:100]!r}, not a Node.js version"
        if version < MIN_NODE:
            need = ".".join(map(str, MIN_NODE))
            return f"node {out.stdout.strip()} is too old (the CLI needs Node.js >= {need}): {_advice('node')}"
        return None

    why = _cached_run("node", path, run)
    if why is not None:
        return why
    from .toolchain import find_tool, install_advice, typescript_version

    tsc = find_tool("tsc")
    if tsc is None:
        return f"node is here but tsc was not found: {install_advice('tsc')}"
    version = typescript_version(tsc)
    if version is None:
        return f"{tsc} is not the typescript npm package's tsc: {install_advice('tsc')}"
    major = _major(version)
    if major is None or major < MIN_TYPESCRIPT:
        return (
            f"typescript {version} ({tsc}) is older than {MIN_TYPESCRIPT}: {install_advice('tsc')}"
        )
    return None


# Capabilities whose tool must also run (the kernel may refuse it): tool path -> None or why not.
_RUNS = {"bpftrace": _probe_bpftrace, "node": _probe_node}


def probe() -> Capabilities:
    """Probe this machine. Costs a few stat calls, plus nvidia-smi where a driver exists."""
    available: list[str] = []
    missing: dict[str, str] = {}
    for cap in CAPABILITIES:
        if cap in _TOOLS:
            found = _find_tool(cap)
            why = _RUNS.get(cap, lambda _: None)(found) if found else None
            if found and why is None:
                available.append(cap)
            else:
                missing[cap] = why or f"{_TOOLS[cap]} was not found: {_advice(cap)}"
    for cap, why in _probe_os().items():
        if why is None:
            available.append(cap)
        else:
            missing[cap] = why
    tiers = ["cpu"]
    if "namespaces" in available and "netns" in available:
        tiers.append("cluster-sim")
    else:
        missing["cluster-sim"] = missing.get("netns") or missing.get("namespaces", "")
    gpu_problem = _probe_gpu()
    if gpu_problem is None:
        tiers.append("gpu")
    else:
        missing["gpu"] = gpu_problem
    return Capabilities(tuple(t for t in TIERS if t in tiers), tuple(available), missing)
