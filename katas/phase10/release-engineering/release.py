"""Given: the release engineer's data. Versions, builds, nodes, CUDA's driver table, the canary's
samples and policy, the changes of a rollout. You read and use these; you do not edit them.

The driver table is NVIDIA's (CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver
Versions", Linux x86_64; the minor-version floors from the CUDA Compatibility guide). Driver
versions are dotted numbers ("535.104.05"): compare them number by number, never as strings
("535.104.05" < "535.54.03" as strings, and it is the newer driver).
"""

from __future__ import annotations

from dataclasses import dataclass, field


# ----------------------------------------------------------------------------------- semver
@dataclass(frozen=True)
class Version:
    """A Semantic Version 2.0.0 as its parts: 1.0.0-rc.1+build.5 is
    Version(1, 0, 0, ("rc", "1"), ("build", "5")). Identifiers stay strings, as written."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


# ----------------------------------------------------------------------------------- compat
# Each CUDA toolkit release (GA = .0, "Update 1" = .1, ...) and the oldest Linux driver that
# runs everything it offers (PTX JIT of its PTX, every API of its release).
TOOLKIT_MIN_DRIVER: dict[str, str] = {
    "11.0.2": "450.51.05",
    "11.0.3": "450.51.06",
    "11.1.0": "455.23",
    "11.1.1": "455.32",
    "11.2.0": "460.27.03",
    "11.2.2": "460.32.03",
    "11.4.0": "470.42.01",
    "11.4.4": "470.82.01",
    "11.8.0": "520.61.05",
    "12.0.0": "525.60.13",
    "12.0.1": "525.85.12",
    "12.1.0": "530.30.02",
    "12.2.0": "535.54.03",
    "12.2.2": "535.104.05",
    "12.3.0": "545.23.06",
    "12.4.0": "550.54.14",
    "12.4.1": "550.54.15",
    "12.5.0": "555.42.02",
    "12.6.0": "560.28.03",
    "12.6.3": "560.35.05",
    "12.8.0": "570.26",
    "12.8.1": "570.124.06",
    "12.9.0": "575.51.03",
    "13.0.0": "580.65.06",
    "13.0.1": "580.82.07",
}

# Minor-version compatibility (CUDA 11 and later): a build of toolkit M.x runs, with a limited
# feature set, on any driver of at least the major's floor (the M.0 release's driver family).
MINOR_VERSION_FLOOR: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

# Forward compatibility (the cuda-compat-M-m package: a newer user-mode driver, libcuda.so, that
# runs on an older kernel-mode driver) works on data-center GPUs only, and only on these kernel
# driver branches (a kata's simplification of NVIDIA's support matrix: its LTS and production
# branches).
FORWARD_COMPAT_BRANCHES: tuple[int, ...] = (470, 535, 550, 570, 580)

# Why a build runs, or does not, on a node (Verdict.reason): the CUDA error the runtime raises.
OK = "ok"  # the driver is at least the toolkit's minimum
OK_MINOR = "minor-version-compatibility"  # older driver of the same major family: limited
OK_FORWARD = "forward-compatibility"  # the build's compat package supplies a newer libcuda
NO_KERNEL_IMAGE = "no-kernel-image"  # cudaErrorNoKernelImageForDevice (209)
PTX_NEEDS_DRIVER = "ptx-needs-newer-driver"  # CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)
API_NEEDS_DRIVER = "api-needs-newer-driver"  # cudaErrorCallRequiresNewerDriver (36)
DRIVER_TOO_OLD = "driver-too-old"  # cudaErrorInsufficientDriver (35)
COMPAT_NOT_ON_THIS_GPU = (
    "forward-compat-not-on-this-gpu"  # CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)
)
COMPAT_NOT_ON_THIS_DRIVER = (
    "forward-compat-not-on-this-driver"  # CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)
)
REASONS = (
    OK, OK_MINOR, OK_FORWARD, NO_KERNEL_IMAGE, PTX_NEEDS_DRIVER, API_NEEDS_DRIVER, DRIVER_TOO_OLD,
    COMPAT_NOT_ON_THIS_GPU, COMPAT_NOT_ON_THIS_DRIVER,
)  # fmt: skip


@dataclass(frozen=True)
class Build:
    """A release artifact (a container image): the CUDA toolkit it was built with (its
    runtime, cudart, ships inside it), the kernels it carries, and what else it needs.

    cubins: machine code per GPU architecture ("sm_80", "sm_90", "sm_100", ...).
    ptx: PTX per virtual architecture ("compute_90"): the driver JIT-compiles it for newer GPUs.
    new_apis: it calls APIs introduced in its own toolkit release (not in the major's .0).
    compat: the driver version of the cuda-compat package inside the image, if any (NGC style).
    """

    name: str
    runtime: str
    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    new_apis: bool = False
    compat: str | None = None


@dataclass(frozen=True)
class Node:
    """A GPU node: its (kernel- and user-mode) driver version, its GPUs' architecture, and
    whether they are data-center GPUs (forward compatibility works only on those)."""

    name: str
    driver: str
    arch: str
    datacenter: bool = True


@dataclass(frozen=True)
class Verdict:
    """Whether a build runs on a node, why (one of REASONS), and the driver version the
    build's CUDA calls actually reach (the compat package's when it is used)."""

    runs: bool
    reason: str
    driver: str


@dataclass(frozen=True)
class Step:
    """One step of a fleet rollout: action "driver" (upgrade the node's driver to the target)
    or "deploy" (run the new build there)."""

    action: str
    node: str


@dataclass(frozen=True)
class Rollout:
    """The ordered steps, and the nodes the new build cannot go to, with the reason (one of
    REASONS) it would not run there even after the driver step."""

    steps: list[Step]
    blocked: dict[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------------- canary
PROMOTE, HOLD, ROLLBACK = "promote", "hold", "rollback"


@dataclass(frozen=True)
class Arm:
    """One side of a canary comparison over the same window: requests served, requests that
    failed, and a sample of request latencies in milliseconds."""

    requests: int
    errors: int
    latencies_ms: tuple[float, ...]


@dataclass(frozen=True)
class Policy:
    """The canary judge's knobs.

    min_requests / min_latencies: each arm needs this many requests / latency samples before
        the judge decides anything but HOLD.
    alpha: the one-sided significance level of both tests.
    error_margin: the largest error-rate increase that does not matter (absolute: 0.001 is
        0.1 percentage points).
    latency_margin: the largest relative increase of the median latency that does not matter
        (0.05 is 5 %).
    """

    min_requests: int = 2000
    min_latencies: int = 200
    alpha: float = 0.01
    error_margin: float = 0.001
    latency_margin: float = 0.05


@dataclass(frozen=True)
class Judgement:
    """The judge's decision (PROMOTE, HOLD or ROLLBACK) and one sentence per reason."""

    decision: str
    reasons: list[str]


# --------------------------------------------------------------------------------- rollback
@dataclass(frozen=True)
class Change:
    """One change of a rollout. after: the ids of the changes it needs in place first.
    reversible: False when undoing it is impossible (why says what: a persistent format was
    bumped, a firmware was flashed). check: what to verify once it is undone."""

    id: str
    after: tuple[str, ...] = ()
    reversible: bool = True
    why: str = ""
    check: str = ""


@dataclass(frozen=True)
class Undo:
    """One step of a rollback plan: undo `change`, then run `check`."""

    change: str
    check: str


@dataclass(frozen=True)
class RollbackPlan:
    """undo: the steps in order. kept: the applied changes that stay, each with its reason
    ("irreversible: <why>" or "needed by <id of a kept change that depends on it>")."""

    undo: list[Undo]
    kept: dict[str, str]
