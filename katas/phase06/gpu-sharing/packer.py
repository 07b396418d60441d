"""YOUR FILE. Task "packing": place a mix of MIG requests on as few GPUs as possible.

Use your mig.py to check placements. Every answer is checked against an exhaustive search on
small cases, and the packer is timed against the reference on a bigger mix.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness import todo

from .gpus import GPU, Instance  # noqa: F401  (you will need them)
from .mig import check  # noqa: F401  (you will need them)


def place(gpu: GPU, names: Sequence[str]) -> list[Instance] | None:
    """Start positions for every profile of `names` together on one empty GPU, or None when
    no placement exists."""
    todo("place")


def pack(gpu: GPU, requests: Sequence[str]) -> list[list[Instance]]:
    """Place every request (a profile name) on as few GPUs as possible; one list of instances
    per GPU used. KeyError for a profile the GPU does not have."""
    todo("pack")


def pack_into(gpu: GPU, requests: Sequence[str], num_gpus: int) -> list[list[Instance]]:
    """Place as many of `requests` as possible on at most `num_gpus` GPUs (the rest wait);
    one list of instances per GPU used."""
    todo("pack_into")
