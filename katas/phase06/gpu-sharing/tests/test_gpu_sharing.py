"""Public tests of gpu-sharing, tasks "placement" (mig.py) and "packing" (packer.py).

Every placement fact below is from NVIDIA's MIG User Guide (README.md "Sources").
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

import pytest

# `nvidia-smi mig -lgipp` on an A100-SXM4-40GB, as the MIG User Guide prints it.
LGIPP_A100 = """\
GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1
GPU  0 Profile ID 20 Placements: {0,1,2,3,4,5,6}:1
GPU  0 Profile ID 15 Placements: {0,2,4,6}:2
GPU  0 Profile ID 14 Placements: {0,2,4}:2
GPU  0 Profile ID  9 Placements: {0,4}:4
GPU  0 Profile ID  5 Placement : {0}:4
GPU  0 Profile ID  0 Placement : {0}:8"""


# --------------------------------------------------------------------------- placement
def test_placement_lgipp_text(mig: Any, gpus: Any) -> None:
    assert mig.lgipp(gpus.A100_40GB) == LGIPP_A100
    assert mig.lgipp(gpus.H100_80GB, index=3).splitlines()[0] == (
        "GPU  3 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1"
    )


def test_placement_slices(mig: Any, gpus: Any) -> None:
    a = gpus.A100_40GB
    assert list(mig.slices(a, ("3g.20gb", 4))) == [4, 5, 6, 7]
    assert list(mig.slices(a, ("1g.10gb", 6))) == [6, 7]
    assert list(mig.slices(a, ("7g.40gb", 0))) == list(range(8))


@pytest.mark.parametrize(
    "placed",
    [
        [("7g.40gb", 0)],
        [("4g.20gb", 0), ("3g.20gb", 4)],
        [("3g.20gb", 0), ("3g.20gb", 4)],
        [("1g.5gb", s) for s in range(7)],
        [("3g.20gb", 4), ("2g.10gb", 0), ("1g.5gb", 2), ("1g.5gb", 3)],
        [("2g.10gb", 0), ("2g.10gb", 2), ("2g.10gb", 4), ("1g.5gb", 6)],
        [("1g.10gb", 0), ("1g.10gb", 2), ("1g.10gb", 4), ("1g.10gb", 6)],
        [("1g.5gb+me", 3), ("1g.5gb", 0), ("1g.5gb", 1)],
        [],
    ],
)
def test_placement_valid_a100(placed: list, mig: Any, gpus: Any) -> None:
    assert mig.check(gpus.A100_40GB, placed) is None, placed
    assert mig.is_valid(gpus.A100_40GB, placed)


@pytest.mark.parametrize(
    "placed, reason",
    [
        ([("3g.20gb", 2)], "bad start"),
        ([("5g.30gb", 0)], "unknown profile"),
        ([("3g.40gb", 0)], "unknown profile"),  # an A100-80GB / H100 name
        ([("4g.20gb", 0), ("2g.10gb", 2)], "overlap"),
        ([("3g.20gb", 0), ("3g.20gb", 0)], "overlap"),
        ([("1g.5gb+me", 0), ("1g.5gb+me", 1)], "too many"),
        ([("7g.40gb", 0), ("1g.5gb", 6)], "overlap"),
    ],
)
def test_placement_invalid_a100(placed: list, reason: str, mig: Any, gpus: Any) -> None:
    why = mig.check(gpus.A100_40GB, placed)
    assert why is not None and why.startswith(reason), f"{placed}: {why!r}"
    assert not mig.is_valid(gpus.A100_40GB, placed)


def test_placement_free_starts(mig: Any, gpus: Any) -> None:
    a = gpus.A100_40GB
    assert mig.free_starts(a, [], "2g.10gb") == [0, 2, 4]
    assert mig.free_starts(a, [("3g.20gb", 4)], "2g.10gb") == [0, 2]
    assert mig.free_starts(a, [("3g.20gb", 0)], "2g.10gb") == [4]
    assert mig.free_starts(a, [("1g.5gb", 1)], "4g.20gb") == []
    with pytest.raises(ValueError):
        mig.free_starts(a, [("3g.20gb", 0), ("4g.20gb", 0)], "1g.5gb")


def test_placement_free_instances_like_lgip(mig: Any, gpus: Any) -> None:
    h = gpus.H100_80GB
    free = mig.free_instances(h, [])
    assert free == {p.name: p.max_instances for p in h.profiles}  # -lgip on an empty GPU
    # One 3g.40gb at 0 takes 1g.10gb from 7/7 to 3/7: the four slices it holds are gone.
    assert mig.free_instances(h, [("3g.40gb", 0)]) == {
        "1g.10gb": 3,
        "1g.10gb+me": 1,
        "1g.20gb": 2,
        "2g.20gb": 1,
        "3g.40gb": 1,
        "4g.40gb": 0,
        "7g.80gb": 0,
    }


def test_placement_maximal_configurations_a100(mig: Any, gpus: Any, valid: Any) -> None:
    configs = mig.maximal_configurations(gpus.A100_40GB)
    assert len(configs) == len(set(configs)), "each configuration once"
    for c in configs:
        assert valid(gpus.A100_40GB, c) is None, c
    assert (("4g.20gb", 0), ("3g.20gb", 4)) in configs
    assert (("7g.40gb", 0),) in configs
    assert (("3g.20gb", 0),) not in configs, "3g.20gb at 0 alone: another one still fits at 4"
    assert len(configs) == 239


# --------------------------------------------------------------------------- packing
def _check_layout(gpu: Any, layout: list, requests: list, valid: Any) -> None:
    for g in layout:
        assert valid(gpu, g) is None, f"GPU {g}: {valid(gpu, g)}"
    placed = Counter(gpu.profile(n).name for g in layout for n, _ in g)
    assert not placed - Counter(requests), f"placed more than was asked: {placed}"


def test_packing_place_needs_more_than_the_lowest_start(packer: Any, gpus: Any, valid: Any) -> None:
    a = gpus.A100_40GB
    names = ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]
    got = packer.place(a, names)
    assert got is not None, "3g.20gb@4 + 2g.10gb@0 + 1g.5gb@2 + 1g.5gb@3 fits"
    assert sorted(n for n, _ in got) == sorted(names)
    assert valid(a, got) is None, valid(a, got)
    assert packer.place(a, ["4g.20gb", "3g.20gb", "1g.5gb"]) is None  # 9 memory slices
    assert packer.place(a, ["2g.10gb"] * 4) is None  # 3 at most
    assert packer.place(a, []) == []


@pytest.mark.parametrize(
    "requests, gpus_needed",
    [
        (["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"], 1),
        (["3g.20gb"] * 3, 2),
        (["4g.20gb", "4g.20gb", "3g.20gb", "3g.20gb"], 2),
        (["2g.10gb"] * 4 + ["1g.5gb"] * 2, 2),
        (["7g.40gb", "1g.5gb"], 2),
    ],
)
def test_packing_fewest_gpus(
    requests: list, gpus_needed: int, packer: Any, gpus: Any, valid: Any
) -> None:
    a = gpus.A100_40GB
    layout = packer.pack(a, requests)
    _check_layout(a, layout, requests, valid)
    assert sum(len(g) for g in layout) == len(requests), "every request placed"
    assert len(layout) == gpus_needed


def test_packing_most_requests_on_n_gpus(packer: Any, gpus: Any, valid: Any) -> None:
    h = gpus.H100_80GB
    requests = ["4g.40gb", "3g.40gb", "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb", "1g.10gb"]
    layout = packer.pack_into(h, requests, 1)
    _check_layout(h, layout, requests, valid)
    assert len(layout) <= 1
    # 3g@4 + 2g@0 + 1g@2 + 1g@3 takes 4 requests; nothing takes 5.
    assert sum(len(g) for g in layout) == 4
    layout = packer.pack_into(h, requests, 2)
    _check_layout(h, layout, requests, valid)
    assert sum(len(g) for g in layout) == 6
    with pytest.raises(KeyError):
        packer.pack(h, ["3g.20gb"])  # an A100-40GB name


def test_packing_picture(packer: Any, gpus: Any, kata: Any, kata_metrics: Any) -> None:
    picture = kata.module("picture")
    requests = ["4g.20gb", "3g.20gb", "3g.20gb", "2g.10gb", "2g.10gb", "1g.10gb", "1g.5gb"]
    requests += ["1g.5gb", "1g.5gb", "2g.10gb"]
    layout = packer.pack(gpus.A100_40GB, requests)
    svg = picture.placements_svg(gpus.A100_40GB, layout, "your packing of 10 requests")
    assert ET.fromstring(svg).tag.endswith("svg")
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your packer: 10 MIG requests on A100-40GB GPUs"
    kata_metrics["GPUs used"] = len(layout)


def test_packing_speed(packer: Any, gpus: Any, kata_budget: Any) -> None:
    """A mix of 24 requests on A100-40GB: at most 5x the reference's time."""
    import random

    rng = random.Random(16)
    a = gpus.A100_40GB
    names = [n for n in a.names() if n != "1g.5gb+me"]
    requests = [rng.choice(names) for _ in range(24)]
    ref = kata_budget.reference.module("packer")
    want = len(ref.pack(a, requests))

    def fewest(layout: Any) -> None:  # what is timed is the search, not a quicker greedy
        assert len(layout) == want, f"the timed pack used {len(layout)} GPUs, the reference {want}"

    verdict = kata_budget.compare(
        lambda: packer.pack(a, requests),
        lambda: ref.pack(a, requests),
        name="pack",
        ratio=5.0,
        check=fewest,
    )
    kata_budget.metrics["your pack (ms)"] = round(verdict.learner_cost / 1e6, 2)
    kata_budget.metrics["reference pack (ms)"] = round(verdict.reference_cost / 1e6, 2)
