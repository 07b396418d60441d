"""Does build X run on node Y, and why not; in which order to upgrade a fleet (task `compat`)."""

from __future__ import annotations

import re

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

_DRIVER = re.compile(r"[0-9]+(?:\.[0-9]+){1,2}")
_ARCH = re.compile(r"(sm|compute)_([0-9]+)([0-9])")


def driver_version(text: str) -> tuple[int, ...]:
    """A driver version as numbers ("535.104.05" -> (535, 104, 5)), which compare in the right
    order; ValueError naming the text unless it is 2 or 3 dot-separated numbers."""
    if not isinstance(text, str) or _DRIVER.fullmatch(text) is None:
        raise ValueError(f"not a driver version: {text!r}")
    return tuple(int(p) for p in text.split("."))


def min_driver(runtime: str) -> str:
    """The oldest driver that runs everything toolkit `runtime` offers (TOOLKIT_MIN_DRIVER);
    ValueError naming it for a toolkit the table does not have."""
    if runtime not in TOOLKIT_MIN_DRIVER:
        raise ValueError(f"unknown CUDA toolkit {runtime!r}")
    return TOOLKIT_MIN_DRIVER[runtime]


def _arch(text: str, kind: str) -> tuple[int, int]:
    m = _ARCH.fullmatch(text)
    if m is None or m.group(1) != kind:
        raise ValueError(f"not a {kind}_XY architecture: {text!r}")
    return int(m.group(2)), int(m.group(3))


def needs_jit(build: Build, arch: str) -> bool | None:
    """False when a cubin of `build` runs on GPUs of `arch` (same major, minor at least the
    cubin's), True when only its PTX does (a virtual arch at most the GPU's: JIT at load time),
    None when nothing does. ValueError naming an architecture that is not sm_XY (the GPU, the
    cubins) or compute_XY (the PTX)."""
    gpu = _arch(arch, "sm")
    if any(c[0] == gpu[0] and c[1] <= gpu[1] for c in (_arch(s, "sm") for s in build.cubins)):
        return False
    if any(p <= gpu for p in (_arch(s, "compute") for s in build.ptx)):
        return True
    return None


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
    jit = needs_jit(build, node.arch)
    if jit is None:
        return Verdict(False, NO_KERNEL_IMAGE, node.driver)
    driver, refused = node.driver, None
    if build.compat is not None and driver_version(build.compat) > driver_version(node.driver):
        if not node.datacenter:
            refused = COMPAT_NOT_ON_THIS_GPU
        elif driver_version(node.driver)[0] not in FORWARD_COMPAT_BRANCHES:
            refused = COMPAT_NOT_ON_THIS_DRIVER
        else:
            driver = build.compat
    have = driver_version(driver)
    major = int(build.runtime.split(".")[0])
    if have >= driver_version(min_driver(build.runtime)):
        return Verdict(True, OK_FORWARD if driver != node.driver else OK, driver)
    if major in MINOR_VERSION_FLOOR and have >= driver_version(MINOR_VERSION_FLOOR[major]):
        if jit:
            why = PTX_NEEDS_DRIVER
        elif build.new_apis:
            why = API_NEEDS_DRIVER
        else:
            return Verdict(True, OK_MINOR, driver)
    else:
        why = DRIVER_TOO_OLD
    return Verdict(False, refused or why, driver)


def rollout(fleet: list[Node], build: Build, driver: str) -> Rollout:
    """The steps that bring `build` to `fleet` with driver `driver`: drivers before runtimes.
    First a "driver" step for every node (fleet order) whose driver is older than `driver`
    (never a downgrade); then a "deploy" step for every node (fleet order) where `build` runs
    once its driver step is done. The others are `blocked`, with check()'s reason there."""
    target = driver_version(driver)
    steps: list[Step] = []
    after: list[Node] = []
    for node in fleet:
        if driver_version(node.driver) < target:
            steps.append(Step("driver", node.name))
            node = Node(node.name, driver, node.arch, node.datacenter)
        after.append(node)
    blocked: dict[str, str] = {}
    for node in after:
        verdict = check(build, node)
        if verdict.runs:
            steps.append(Step("deploy", node.name))
        else:
            blocked[node.name] = verdict.reason
    return Rollout(steps, blocked)
