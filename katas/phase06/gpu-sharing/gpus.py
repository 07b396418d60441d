"""GIVEN (not graded): the MIG GPU-instance profiles of three GPUs, as NVIDIA publishes them.

Sources (see README.md, "Sources"):
- NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
  (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): the profiles,
  their fractions of memory and SMs, and the number of instances of each.
- the same guide, "Getting Started with MIG" / "List GPU Instance Profiles": `nvidia-smi mig
  -lgip` (profile IDs, SMs per instance) and `nvidia-smi mig -lgipp` (placements), printed for
  an A100-SXM4-40GB:

      GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1
      GPU  0 Profile ID 20 Placements: {0,1,2,3,4,5,6}:1
      GPU  0 Profile ID 15 Placements: {0,2,4,6}:2
      GPU  0 Profile ID 14 Placements: {0,2,4}:2
      GPU  0 Profile ID  9 Placements: {0,4}:4
      GPU  0 Profile ID  5 Placement : {0}:4
      GPU  0 Profile ID  0 Placement : {0}:8

  A100-80GB and H100-80GB print the same placements for the same profile IDs (their -lgipp
  output, quoted in README.md); only the names (memory) and SM counts differ.

A placement `{starts}:size` is in **memory slices**: the GPU has 8, and an instance of the
profile occupies `size` consecutive slices beginning at one of `starts`. Compute is in 7
slices (the "g" of "3g.20gb"). These tables are facts, not your work: read them, do not edit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile as `nvidia-smi mig -lgip` / `-lgipp` list it."""

    name: str  # "3g.20gb"
    id: int  # the GPU instance profile ID (-cgi takes it)
    compute_slices: int  # the "3" of 3g: sevenths of the GPU's compute
    memory_slices: int  # the size in -lgipp: eighths of the GPU's memory
    starts: tuple[int, ...]  # the start positions -lgipp lists
    max_instances: int  # "Instances Total" in -lgip (the "+me" profile: 1)
    sms: int  # streaming multiprocessors of one instance (-lgip "SM")
    memory_gb: int  # the nominal memory in the name


@dataclass(frozen=True)
class GPU:
    """A MIG-capable GPU: its slices and the profiles its driver offers, in -lgip order."""

    name: str
    memory_slices: int
    compute_slices: int
    sms: int  # the whole GPU, MIG off
    memory_gb: int
    profiles: tuple[Profile, ...]

    def profile(self, name: str) -> Profile:
        """The profile called `name` ("3g.20gb" or "MIG 3g.20gb"); KeyError if this GPU has none."""
        key = name.removeprefix("MIG ").strip()
        for p in self.profiles:
            if p.name == key:
                return p
        raise KeyError(f"{self.name} has no MIG profile {name!r}")

    def names(self) -> list[str]:
        return [p.name for p in self.profiles]


ALL = tuple(range(7))


def _gpu(name: str, sms: int, memory_gb: int, rows: list[tuple]) -> GPU:
    """rows: (profile name, ID, compute slices, memory slices, starts, max instances, SMs)."""
    profiles = tuple(
        Profile(n, pid, g, size, tuple(starts), count, s, int(n.split(".")[1].split("gb")[0]))
        for n, pid, g, size, starts, count, s in rows
    )
    return GPU(name, 8, 7, sms, memory_gb, profiles)


# SMs from -lgip. A100: 14 per compute slice, and 7g has 98 of the 108 (MIG mode leaves 10
# unused). H100 SXM5 80GB: 1g = 16, 1g.20gb = 26, 2g = 32, 3g = 60, 4g = 64, 7g = all 132.
A100_40GB = _gpu(
    "A100-SXM4-40GB",
    108,
    40,
    [
        ("1g.5gb", 19, 1, 1, ALL, 7, 14),
        ("1g.5gb+me", 20, 1, 1, ALL, 1, 14),
        ("1g.10gb", 15, 1, 2, (0, 2, 4, 6), 4, 14),
        ("2g.10gb", 14, 2, 2, (0, 2, 4), 3, 28),
        ("3g.20gb", 9, 3, 4, (0, 4), 2, 42),
        ("4g.20gb", 5, 4, 4, (0,), 1, 56),
        ("7g.40gb", 0, 7, 8, (0,), 1, 98),
    ],
)

A100_80GB = _gpu(
    "A100-SXM4-80GB",
    108,
    80,
    [
        ("1g.10gb", 19, 1, 1, ALL, 7, 14),
        ("1g.10gb+me", 20, 1, 1, ALL, 1, 14),
        ("1g.20gb", 15, 1, 2, (0, 2, 4, 6), 4, 14),
        ("2g.20gb", 14, 2, 2, (0, 2, 4), 3, 28),
        ("3g.40gb", 9, 3, 4, (0, 4), 2, 42),
        ("4g.40gb", 5, 4, 4, (0,), 1, 56),
        ("7g.80gb", 0, 7, 8, (0,), 1, 98),
    ],
)

H100_80GB = _gpu(
    "H100-SXM5-80GB",
    132,
    80,
    [
        ("1g.10gb", 19, 1, 1, ALL, 7, 16),
        ("1g.10gb+me", 20, 1, 1, ALL, 1, 16),
        ("1g.20gb", 15, 1, 2, (0, 2, 4, 6), 4, 26),
        ("2g.20gb", 14, 2, 2, (0, 2, 4), 3, 32),
        ("3g.40gb", 9, 3, 4, (0, 4), 2, 60),
        ("4g.40gb", 5, 4, 4, (0,), 1, 64),
        ("7g.80gb", 0, 7, 8, (0,), 1, 132),
    ],
)

GPUS = {g.name: g for g in (A100_40GB, A100_80GB, H100_80GB)}

# A placed instance: (profile name, start memory slice), as `nvidia-smi mig -lgi` shows
# "Placement Start:Size".
Instance = tuple[str, int]
