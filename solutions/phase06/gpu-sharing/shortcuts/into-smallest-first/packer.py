"""Packing MIG requests onto GPUs: exact placement on one GPU, fewest GPUs for a request mix,
and the most requests on a fixed number of GPUs.

Every GPU offers only a few hundred distinct multisets of profiles that fit together, so the
packer enumerates them once per GPU model and searches over the request counts (memoised),
then turns each chosen multiset into start positions with `place`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from .gpus import GPU, Instance
from .mig import check

Counts = tuple[int, ...]


def place(gpu: GPU, names: Sequence[str]) -> list[Instance] | None:
    """Start positions for every profile of `names` together on one empty GPU, or None when
    no placement exists. Tries every start (biggest instances first), not just the lowest."""
    for n in names:
        gpu.profile(n)  # KeyError for a profile the GPU does not have
    order = sorted(names, key=lambda n: -gpu.profile(n).memory_slices)
    placed: list[Instance] = []

    def go(i: int) -> bool:
        if i == len(order):
            return True
        for s in gpu.profile(order[i]).starts:
            placed.append((order[i], s))
            if check(gpu, placed) is None and go(i + 1):
                return True
            placed.pop()
        return False

    return list(placed) if go(0) else None


@cache
def _fitting(gpu: GPU) -> frozenset[Counts]:
    """Every multiset of profiles (as counts in gpu.profiles order) that fits on one GPU."""
    names = gpu.names()
    cands = [(p.name, s) for p in gpu.profiles for s in p.starts]
    out: set[Counts] = set()

    def grow(placed: list[Instance], i: int) -> None:
        counts = [0] * len(names)
        for n, _ in placed:
            counts[names.index(n)] += 1
        out.add(tuple(counts))
        for j in range(i, len(cands)):
            placed.append(cands[j])
            if check(gpu, placed) is None:
                grow(placed, j + 1)
            placed.pop()

    grow([], 0)
    out.discard(tuple([0] * len(names)))
    return frozenset(out)


def _counts(gpu: GPU, requests: Sequence[str]) -> Counts:
    names = gpu.names()
    counts = [0] * len(names)
    for r in requests:
        counts[names.index(gpu.profile(r).name)] += 1
    return tuple(counts)


def _maximal_within(gpu: GPU, rem: Counts) -> list[Counts]:
    """The fitting multisets inside `rem` that cannot take one more of rem's requests."""
    fit = _fitting(gpu)
    out = []
    for c in fit:
        if any(x > r for x, r in zip(c, rem, strict=True)):
            continue
        grows = any(
            c[t] < rem[t] and tuple(x + (i == t) for i, x in enumerate(c)) in fit
            for t in range(len(c))
        )
        if not grows:
            out.append(c)
    return out


def _sub(a: Counts, b: Counts) -> Counts:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def _to_names(gpu: GPU, c: Counts) -> list[str]:
    return [n for n, k in zip(gpu.names(), c, strict=True) for _ in range(k)]


def _placements(gpu: GPU, chosen: list[Counts]) -> list[list[Instance]]:
    out = []
    for c in chosen:
        placed = place(gpu, _to_names(gpu, c))
        assert placed is not None  # c came from a valid placement
        out.append(sorted(placed, key=lambda x: (x[1], x[0])))
    return out


def pack(gpu: GPU, requests: Sequence[str]) -> list[list[Instance]]:
    """Place every request (a profile name) on as few GPUs as possible; one list of instances
    per GPU used. KeyError for a profile the GPU does not have."""
    target = _counts(gpu, requests)

    @cache
    def best(rem: Counts) -> tuple[int, tuple[Counts, ...]]:
        if not any(rem):
            return 0, ()
        first = next(i for i, x in enumerate(rem) if x)
        top: tuple[int, tuple[Counts, ...]] | None = None
        for c in _maximal_within(gpu, rem):
            if c[first] == 0:
                continue  # some GPU holds the first remaining request: let it be this one
            n, rest = best(_sub(rem, c))
            if top is None or n + 1 < top[0]:
                top = (n + 1, (c, *rest))
        assert top is not None  # every profile fits alone on an empty GPU
        return top

    return _placements(gpu, list(best(target)[1]))


def pack_into(gpu: GPU, requests: Sequence[str], num_gpus: int) -> list[list[Instance]]:
    layout: list[list[str]] = []
    small_first = sorted(
        requests, key=lambda n: (gpu.profile(n).compute_slices, gpu.profile(n).memory_slices)
    )
    for r in small_first:
        for g in layout:
            if place(gpu, [*g, r]) is not None:
                g.append(r)
                break
        else:
            if len(layout) < num_gpus:
                layout.append([r])
    return [sorted(place(gpu, g) or [], key=lambda x: (x[1], x[0])) for g in layout]
