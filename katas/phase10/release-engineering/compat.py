"""Does build X run on node Y, and why not; in which order to upgrade a fleet (task `compat`)."""

from __future__ import annotations

from harness import todo

from .release import (  # noqa: F401
    API_NEEDS_DRIVER,
    COMPAT_NOT_ON_THIS_DRIVER,
    COMPAT_NOT_ON_THIS_GPU,
    DRIVER_TOO_OLD,
    FORWARD_COMPAT_BRANCHES,
    MINOR_VERSION_FLOOR,
    NO_KERNEL_IMAGE,
    OK,
    OK_FORWARD,
    OK_MINOR,
    PTX_NEEDS_DRIVER,
    TOOLKIT_MIN_DRIVER,
    Build,
    Node,
    Rollout,
    Step,
    Verdict,
)


def driver_version(text: str) -> tuple[int, ...]:
    """A driver version as numbers ("535.104.05" -> (535, 104, 5)), which compare in the right
    order; ValueError naming the text unless it is 2 or 3 dot-separated numbers."""
    todo("driver_version")


def min_driver(runtime: str) -> str:
    """The oldest driver that runs everything toolkit `runtime` offers (TOOLKIT_MIN_DRIVER);
    ValueError naming it for a toolkit the table does not have."""
    todo("min_driver")


def needs_jit(build: Build, arch: str) -> bool | None:
    """False when a cubin of `build` runs on GPUs of `arch` (same major, minor at least the
    cubin's), True when only its PTX does (a virtual arch at most the GPU's: JIT at load time),
    None when nothing does. ValueError naming an architecture that is not sm_XY (the GPU, the
    cubins) or compute_XY (the PTX)."""
    todo("needs_jit")


def check(build: Build, node: Node) -> Verdict:
    """Whether `build` runs on `node`, and why (release.REASONS), decided in this order:

    1. Kernels: a cubin for the node's arch, else PTX to JIT, else NO_KERNEL_IMAGE.
    2. The driver its CUDA calls reach: the node's, or the build's compat package when that is
       newer than the node's driver and usable: a data-center GPU (else the package is refused
       with COMPAT_NOT_ON_THIS_GPU) on a driver branch in FORWARD_COMPAT_BRANCHES (else
       COMPAT_NOT_ON_THIS_DRIVER); a refused package is not used.
    3. That driver >= the toolkit's minimum: OK (OK_FORWARD through the compat package).
       Else >= the major's MINOR_VERSION_FLOOR: minor-version compatibility, unless the kernels
       need PTX JIT (PTX_NEEDS_DRIVER) or the build uses new APIs (API_NEEDS_DRIVER); OK_MINOR.
       Else DRIVER_TOO_OLD. A build that does not run after a refused compat package gets the
       refusal as its reason.
    """
    todo("check")


def rollout(fleet: list[Node], build: Build, driver: str) -> Rollout:
    """The steps that bring `build` to `fleet` with driver `driver`: drivers before runtimes.
    First a "driver" step for every node (fleet order) whose driver is older than `driver`
    (never a downgrade); then a "deploy" step for every node (fleet order) where `build` runs
    once its driver step is done. The others are `blocked`, with check()'s reason there."""
    todo("rollout")
