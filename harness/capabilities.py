"""What a grader must install for the katas it grades, and what to tell an instructor whose
grader lacks it. The one capability -> install map: the grader entry points
(``harness/graders/install.sh``, used by Gradescope's ``setup.sh``, the PrairieLearn image and
the GitHub workflow), ``.ci/run`` and the grade-mode check in the plugin all read it from here.

    python -m harness.capabilities extras [ROOT] [--katas a,b]   # "cuda" (pip extras, comma-joined)
    python -m harness.capabilities apt [ROOT] [--katas a,b]      # "g++ gcc" (Debian packages)
    python -m harness.capabilities needs [ROOT] [--katas a,b]    # what each kata needs, for people
    python -m harness.capabilities npm [ROOT] [--katas a,b]      # "typescript" (npm packages)
    python -m harness.capabilities gpu-image-optional            # "bpftrace,busybox,cargo,node,promtool,valgrind"

npm packages are pinned in the repository's package.json and package-lock.json and installed
with `npm ci` in the repository root (project-local node_modules/, where the probe finds tsc).

What the katas need is read from their manifests (``[requires]`` and each task's ``tier`` and
``capabilities``); the harness's own needs (Python, pip) are the entry points' business.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from .manifest import Manifest, ManifestError, discover, load_manifest


@dataclass(frozen=True)
class Install:
    """How a grader gets one tier or capability."""

    extras: tuple[str, ...] = ()  # pip extras of this package
    apt: tuple[str, ...] = ()  # Debian/Ubuntu packages
    npm: tuple[str, ...] = ()  # npm packages, pinned in the root package.json (`npm ci`)
    advice: str = ""  # the instructor's half-sentence: "install the [cuda] extra"


_CUDA = Install(extras=("cuda",), advice="install the [cuda] extra (pip install -e '.[cuda]')")

# Every tier and capability a manifest may name (harness.manifest.TIERS / CAPABILITIES).
INSTALL: dict[str, Install] = {
    "cpu": Install(),
    "cc": Install(apt=("gcc",), advice="install gcc (apt-get install gcc)"),
    "cxx": Install(apt=("g++",), advice="install g++ (apt-get install g++)"),
    "nvcc": _CUDA,
    "ptxas": _CUDA,
    "cuobjdump": _CUDA,
    "clang": Install(apt=("clang",), advice="install clang (apt-get install clang)"),
    "valgrind": Install(apt=("valgrind",), advice="install valgrind (apt-get install valgrind)"),
    "cargo": Install(apt=("cargo",), advice="install Rust's cargo (apt-get install cargo)"),
    "chromium": Install(apt=("chromium",), advice="install chromium (apt-get install chromium)"),
    # Debian's prometheus package carries promtool (`check metrics`, `check rules`, `test rules`).
    "promtool": Install(
        apt=("prometheus",), advice="install promtool (apt-get install prometheus)"
    ),
    "gdb": Install(apt=("gdb",), advice="install gdb (apt-get install gdb)"),
    # Node.js >= 20.15 (Debian 13's nodejs; the entry points skip the apt packages where a node
    # is already on PATH, e.g. NodeSource's, whose nodejs conflicts with Debian's npm) and tsc.
    "node": Install(
        apt=("nodejs", "npm"),
        npm=("typescript",),
        advice="install Node.js >= 20.15 and npm (apt-get install nodejs npm on Debian 13, else "
        "NodeSource's) and the pinned "
        "TypeScript (npm ci in the course repository)",
    ),
    "strace": Install(apt=("strace",), advice="install strace (apt-get install strace)"),
    # bpftrace also needs the kernel to let it trace (root, tracefs): the probe runs it.
    "bpftrace": Install(
        apt=("bpftrace",),
        advice="install bpftrace (apt-get install bpftrace) and grade as root where the kernel "
        "allows eBPF tracing (not in most containers)",
    ),
    "namespaces": Install(
        apt=("util-linux",), advice="run the grader on Linux with user namespaces and `unshare`"
    ),
    "cgroups": Install(advice="run the grader as root with a writable cgroup file system"),
    "busybox": Install(
        apt=("busybox-static",), advice="install a static busybox (apt-get install busybox-static)"
    ),
    "kbuild": Install(
        apt=("make",),
        advice="install make and the running kernel's headers "
        "(apt-get install make linux-headers-$(uname -r))",
    ),
    "netns": Install(apt=("iproute2",), advice="run the grader as root with iproute2 (`ip netns`)"),
    "cluster-sim": Install(
        apt=("iproute2", "util-linux"),
        advice="run the grader as root on Linux with network namespaces",
    ),
    "gpu": Install(
        extras=("gpu",),
        advice="run the grader on a machine with an NVIDIA GPU and driver, or declare the gpu "
        "tier optional for this grader (KATA_OPTIONAL=gpu)",
    ),
}

# Tiers and capabilities no package provides (hardware, privileges): never installed by the
# entry points; a grader without them declares them optional or runs where they exist.
NOT_INSTALLABLE = frozenset(
    {"gpu", "cgroups", "cluster-sim", "namespaces", "netns", "kbuild"}
)  # kbuild: the headers package is named after the running kernel


# The gpu-tier image (the GPU machines the gpu tier is checked on, harness/benchmarks/gpu_check.sh:
# Python 3.12 with cupy, cuda-bindings, numba-cuda, torch and the full CUDA 13 toolkit, and no
# package registry) has no Rust, bpftrace, busybox, Node.js (nor TypeScript), promtool or valgrind, and nothing can be installed there.
# What needs them skips on it: a grader on that image declares them optional (KATA_OPTIONAL).
GPU_IMAGE_LACKS = ("bpftrace", "busybox", "cargo", "node", "promtool", "valgrind")
GPU_IMAGE_NOTE = (
    "the gpu-tier image has no Rust, bpftrace, busybox, Node.js/TypeScript, promtool or valgrind (and no package "
    "registry): declare them optional there (KATA_OPTIONAL=bpftrace,busybox,cargo,node,promtool,valgrind) or "
    "bake them into the image"
)


def install_for(name: str) -> Install:
    return INSTALL.get(name, Install(advice=f"provide {name}"))


def manifests(root: Path, katas: list[str] | None = None) -> list[Manifest]:
    out = []
    for kata_dir in discover(root):
        try:
            m = load_manifest(kata_dir)
        except ManifestError:
            continue  # graded as an error by the run itself
        if not katas or m.id in katas:
            out.append(m)
    return out


def needs(ms: list[Manifest]) -> dict[str, list[str]]:
    """Tier or capability -> the kata ids that need it (kata-wide or for one of their tasks)."""
    out: dict[str, list[str]] = {}
    for m in ms:
        names = {m.tier, *m.capabilities}
        for t in m.tasks:
            names |= {*(t.capabilities), *([t.tier] if t.tier else [])}
        for name in sorted(names - {"cpu"}):
            out.setdefault(name, []).append(m.id)
    return out


def npm_plan(ms: list[Manifest]) -> list[str]:
    """The npm packages that give a grader what `ms` need (installed by `npm ci` in the course
    repository: the root package.json pins each of them)."""
    return sorted({p for name in needs(ms) for p in install_for(name).npm})


def plan(ms: list[Manifest], include_gpu: bool = False) -> tuple[list[str], list[str]]:
    """(pip extras, apt packages) that give a grader what `ms` need; the gpu extra only when
    asked (it needs a GPU and driver to be of any use)."""
    extras: set[str] = set()
    apt: set[str] = set()
    for name in needs(ms):
        if name in NOT_INSTALLABLE and not (include_gpu and name == "gpu"):
            continue
        inst = install_for(name)
        extras.update(inst.extras)
        apt.update(inst.apt)
    return sorted(extras), sorted(apt)


def missing_sentence(name: str, points_by_kata: dict[str, float], fmt=str) -> str:
    """The instructor's sentence for a grader that lacks `name`: what to do, and what it cost.

    "this grader has no nvcc: install the [cuda] extra (...); 50 points of vector-add were not
    graded"
    """
    what = {"gpu": "GPU", "cluster-sim": "cluster-sim tier"}.get(name, name)
    lost = " and ".join(f"{fmt(p)} points of {k}" for k, p in points_by_kata.items())
    advice = install_for(name).advice
    if name in GPU_IMAGE_LACKS:
        advice += f"; {GPU_IMAGE_NOTE}"
    return f"this grader has no {what}: {advice}; {lost} were not graded"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.capabilities", description=__doc__)
    p.add_argument("what", choices=("extras", "apt", "npm", "needs", "gpu-image-optional"))
    p.add_argument("root", nargs="?", default=".", help="the course repository (default: .)")
    p.add_argument("--katas", default="", help="comma-separated kata ids (default: all)")
    p.add_argument("--gpu", action="store_true", help="include the gpu extra (a GPU grader)")
    a = p.parse_args(argv)
    if a.what == "gpu-image-optional":  # KATA_OPTIONAL on the gpu-tier image
        print(",".join(GPU_IMAGE_LACKS))
        return 0
    ms = manifests(Path(a.root), [k for k in a.katas.split(",") if k])
    extras, apt = plan(ms, include_gpu=a.gpu)
    if a.what == "extras":
        print(",".join(extras))
    elif a.what == "apt":
        print(" ".join(apt))
    elif a.what == "npm":
        print(" ".join(npm_plan(ms)))
    else:
        for name, katas in needs(ms).items():
            print(
                f"{name}: {', '.join(katas)} — {install_for(name).advice or 'nothing to install'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
