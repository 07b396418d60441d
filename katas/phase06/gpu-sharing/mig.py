"""YOUR FILE. Task "placement": which sets of MIG GPU instances a GPU accepts.

An instance is (profile name, start memory slice). gpus.py (given) has the profile tables of
three GPUs as NVIDIA publishes them; README.md "Placement" states the rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness import todo

from .gpus import GPU, Instance  # noqa: F401  (you will need them)


def slices(gpu: GPU, instance: Instance) -> range:
    """The memory slices `instance` occupies: `size` slices from its start."""
    todo("slices")


def check(gpu: GPU, placed: Sequence[Instance]) -> str | None:
    """None when `nvidia-smi mig -cgi` would create every instance of `placed` together, else
    why not, starting with "unknown profile", "bad start", "too many", "overlap" or "compute"."""
    todo("check")


def is_valid(gpu: GPU, placed: Sequence[Instance]) -> bool:
    """Whether the GPU accepts every instance of `placed` together (check() finds nothing)."""
    todo("is_valid")


def free_starts(gpu: GPU, placed: Sequence[Instance], name: str) -> list[int]:
    """Where one more instance of `name` can go now (ascending). ValueError if `placed` is
    not valid itself."""
    todo("free_starts")


def free_instances(gpu: GPU, placed: Sequence[Instance]) -> dict[str, int]:
    """-lgip's "Instances Free" column: for each profile, how many more instances of it alone
    could be created next to `placed`."""
    todo("free_instances")


def lgipp(gpu: GPU, index: int = 0) -> str:
    """The text `nvidia-smi mig -i INDEX -lgipp` prints for `gpu`, one line per profile."""
    todo("lgipp")


def maximal_configurations(gpu: GPU) -> list[tuple[Instance, ...]]:
    """Every valid set of instances to which no further instance can be added; each sorted
    by (start, name), the list sorted."""
    todo("maximal_configurations")
