"""Hidden tests of gpu-cloud: the same questions about node masks, instance mixes, spot jobs,
price lists and demand curves drawn fresh at every run (the run's seed), against an independent
calculation written here (a placement, a walk, a simulation, a brute-force search), plus cases
chosen to break the usual shortcuts. Each random set asserts that it contains the cases it exists
for."""

from __future__ import annotations

import math
import numbers
import statistics
from typing import Any

import numpy as np
import pytest

from harness.testing import random_for

SHAPES = (1, 2, 4, 8)


def is_int(a: Any) -> bool:
    """A whole number as the docstrings ask (int, or a numpy integer), never a float or a bool."""
    return isinstance(a, numbers.Integral) and not isinstance(a, bool)


def is_real(a: Any) -> bool:
    """A number (int, float, numpy's, Fraction), never a bool."""
    return isinstance(a, numbers.Real) and not isinstance(a, bool)


def close(a: Any, b: float, rel: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    return is_real(a) and math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)


# --------------------------------------------------------------------------- pack
def o_blocks(busy: int, size: int) -> int:
    taken = [bool(busy >> i & 1) for i in range(8)]
    return sum(not any(taken[o : o + size]) for o in range(0, 8, size))


def o_nodes(counts: dict[int, int]) -> int:
    """Place the instances largest first, each on the first aligned free block of the first node
    that has one (a buddy allocator), opening nodes as needed."""
    nodes: list[list[bool]] = []
    for size in sorted(counts, reverse=True):
        for _ in range(counts[size]):
            for node in nodes:
                spot = next((o for o in range(0, 8, size) if not any(node[o : o + size])), None)
                if spot is not None:
                    node[spot : spot + size] = [True] * size
                    break
            else:
                nodes.append([True] * size + [False] * (8 - size))
    return len(nodes)


def a_mask(r: Any) -> int:
    return r.choice([0, 255, r.randrange(256), r.randrange(256) & r.randrange(256)])


@pytest.mark.kata_gate(
    "free_blocks, stranded_gpus or nodes_for disagree with an aligned placement on node masks "
    "and instance mixes that are not in the README"
)
def test_pack_any_fleet(gc: Any) -> None:
    r = random_for("pack")
    unaligned = mixed = empty = 0
    for _ in range(300):
        busy, size = a_mask(r), r.choice(SHAPES)
        want = o_blocks(busy, size)
        unaligned += want != (8 - bin(busy).count("1")) // size
        got = gc.free_blocks(busy, size)
        assert is_int(got) and got == want, (
            f"free_blocks(busy={busy:#010b}, size={size}) = {got!r}; {want} aligned blocks are free"
        )
        fleet = [a_mask(r) for _ in range(r.randint(1, 12))]
        free = sum(8 - bin(b).count("1") for b in fleet)
        want = free - size * sum(o_blocks(b, size) for b in fleet)
        got = gc.stranded_gpus(fleet, size)
        assert is_int(got) and got == want, (
            f"stranded_gpus({[f'{b:#010b}' for b in fleet]}, size={size}) = {got!r}; want {want}"
        )
        counts = {
            s: r.choice([0, 1, r.randint(0, 9), r.randint(0, 40)])
            for s in r.sample(SHAPES, r.randint(1, 4))
        }
        if r.random() < 0.05:
            counts = {s: 0 for s in counts} if r.random() < 0.5 else {}
        empty += not any(counts.values())
        want = o_nodes(counts)
        mixed += sum(-(-s * n // 8) for s, n in counts.items()) > want
        got = gc.nodes_for(counts)
        assert is_int(got) and got == want, (
            f"nodes_for({counts}) = {got!r}; an aligned placement, largest first, needs {want}"
        )
    assert unaligned > 20 and mixed > 20 and empty > 5, (
        f"the set covers free GPUs in no aligned block ({unaligned}), mixes that share nodes "
        f"({mixed}) and mixes with no instance ({empty})"
    )


# --------------------------------------------------------------------------- spot
def o_segment(length: float, restart: float, rate: float) -> float:
    """L + (expected preemptions) x (expected time lost to one + restart), the time lost being
    the mean of an exponential conditioned on landing before L."""
    if rate == 0:
        return length
    x = rate * length
    lost = 1 / rate - length / math.expm1(x)
    return length + math.expm1(x) * (lost + restart)


def o_job(job: Any) -> float:
    rate, done, total = job.preempt_per_hour / 3600, 0, 0.0
    while job.work_s - done > job.interval_s:
        total += o_segment(job.interval_s + job.ckpt_s, job.restart_s, rate)
        done += job.interval_s
    return total + o_segment(job.work_s - done, job.restart_s, rate)


def a_job(cl: Any, r: Any) -> Any:
    interval = r.choice([300, 600, 1800, 3600, r.randint(300, 14_400)])
    work = r.choice([interval * r.randint(1, 50), r.randint(1, 30 * 86_400), r.randint(1, 20_000)])
    return cl.SpotJob(
        work_s=work,
        interval_s=interval,
        ckpt_s=r.choice([0.0, r.uniform(1, 600)]),
        restart_s=r.choice([0.0, r.uniform(1, 3600)]),
        preempt_per_hour=r.choice([0.0, r.uniform(0.01, 0.5), r.uniform(0.1, 4)]),
        gpus=r.randint(1, 20_000),
    )


@pytest.mark.kata_gate(
    "segment_s, expected_job_s or spot_cost_usd disagree with the preemption model on jobs, "
    "checkpoint intervals and preemption rates that are not in the README"
)
def test_spot_any_job(gc: Any, cl: Any) -> None:
    r = random_for("spot")
    seen = {"calm": 0, "stormy": 0, "exact-multiple": 0, "no-preemption": 0}
    for _ in range(300):
        job = a_job(cl, r)
        rate = job.preempt_per_hour / 3600
        x = rate * (job.interval_s + job.ckpt_s)
        seen["no-preemption"] += rate == 0
        regime = "calm" if 0 < x < 0.1 else "stormy" if x > 1 else "between"
        seen[regime] = seen.get(regime, 0) + 1
        seen["exact-multiple"] += job.work_s % job.interval_s == 0
        length, restart = r.uniform(1, 20_000), r.uniform(0, 3600)
        want = o_segment(length, restart, rate)
        got = gc.segment_s(length, restart, rate)
        assert close(got, want), (
            f"segment_s({length}, {restart}, {rate}) = {got!r}; the preemption model says {want}"
        )
        want = o_job(job)
        got = gc.expected_job_s(job)
        assert close(got, want), f"expected_job_s({job}) = {got!r}; want {want}"
        price = r.uniform(0.1, 10)
        want = want / 3600 * job.gpus * price
        got = gc.spot_cost_usd(job, price)
        assert close(got, want), f"spot_cost_usd({job}, {price}) = {got!r}; want {want}"
    assert min(seen[k] for k in ("calm", "stormy", "exact-multiple", "no-preemption")) > 10, (
        f"the random set covers every case: {seen}"
    )


def test_spot_matches_a_simulation(gc: Any) -> None:
    """The stretch simulated: preemptions drawn from the run seed; the mean of the runs within
    five standard errors of segment_s."""
    r = random_for("spot-sim")
    for _ in range(3):
        length, restart = r.uniform(600, 7200), r.uniform(0, 1800)
        rate = r.uniform(0.3, 2.0) / length
        runs = []
        for _ in range(3000):
            t = 0.0
            while (hit := r.expovariate(rate)) < length:
                t += hit + restart
            runs.append(t + length)
        mean, err = statistics.fmean(runs), statistics.stdev(runs) / math.sqrt(len(runs))
        got = gc.segment_s(length, restart, rate)
        assert abs(got - mean) < 5 * err, (
            f"segment_s({length}, {restart}, {rate}) = {got!r}; 3000 simulated stretches average "
            f"{mean:.1f} s (standard error {err:.1f} s)"
        )


# --------------------------------------------------------------------------- transfer
def o_bill(nbytes: int, tiers: Any) -> int:
    gb = nbytes // 10**9 + (nbytes % 10**9 > 0)
    bill, lo = 0, 0
    for t in tiers:
        hi = gb if t.up_to_gb is None else t.up_to_gb
        bill += max(0, min(gb, hi) - lo) * t.micro_usd_per_gb
        lo = hi
    return bill


def a_tiers(cl: Any, r: Any) -> Any:
    bounds = sorted(r.sample(range(1, 300_000), r.randint(0, 4)))
    prices = [r.randint(0, 200_000) for _ in range(len(bounds) + 1)]
    return tuple(cl.Tier(b, p) for b, p in zip([*bounds, None], prices, strict=True))


@pytest.mark.kata_gate(
    "transfer_s, egress_micro_usd or monthly_checkpoint_egress_micro_usd disagree with the model "
    "on sizes, links and price lists that are not in the README"
)
def test_transfer_any_bill(gc: Any, cl: Any) -> None:
    r = random_for("transfer")
    crossed = partial_gb = per_copy_differs = zero = huge = 0
    for _ in range(300):
        nbytes = r.choice([r.randint(1, 10**12), r.randint(1, 10**15), 10**9 * r.randint(1, 10**6)])
        if r.random() < 0.1:
            # a month with no egress, or one so large (100 PB - 1 EB) that a float quotient
            # nbytes / 10**9 rounds the last few bytes away
            nbytes = r.choice([0, 10**9 * r.randint(10**8, 10**9) + r.randint(1, 7)])
        zero += nbytes == 0
        huge += nbytes > 10**17
        gbps, eff = r.choice([1, 10, 25, 100, 400, r.uniform(0.1, 800)]), r.uniform(0.3, 1.0)
        want = nbytes * 8 / (gbps * 1e9 * eff)
        got = gc.transfer_s(nbytes, gbps, eff)
        assert close(got, want), f"transfer_s({nbytes}, {gbps}, {eff}) = {got!r}; want {want}"
        got = gc.transfer_s(nbytes, gbps)
        assert close(got, want * eff), (
            f"transfer_s({nbytes}, {gbps}) (the whole link) = {got!r}; want {want * eff}"
        )
        tiers = a_tiers(cl, r)
        partial_gb += nbytes % 10**9 != 0
        want = o_bill(nbytes, tiers)
        got = gc.egress_micro_usd(nbytes, tiers)
        assert is_int(got) and got == want, (
            f"egress_micro_usd({nbytes}, {tiers}) = {got!r}; want {want}"
            + (" (billed GB: the integer ceiling of nbytes / 10**9)" if nbytes > 10**17 else "")
        )
        want = o_bill(nbytes, cl.AWS_EGRESS)
        crossed += nbytes > 10 * 10**12
        got = gc.egress_micro_usd(nbytes)
        assert is_int(got) and got == want, (
            f"egress_micro_usd({nbytes}) (AWS's list) = {got!r}; want {want}"
            + (" (billed GB: the integer ceiling of nbytes / 10**9)" if nbytes > 10**17 else "")
        )
        ckpt, per_day, days = (
            r.randint(1, 2 * 10**12),
            r.choice([1, 4, 24, r.randint(1, 96)]),
            r.choice([28, 30, 31]),
        )
        want = o_bill(ckpt * per_day * days, tiers)
        per_copy_differs += want != o_bill(ckpt, tiers) * per_day * days
        got = gc.monthly_checkpoint_egress_micro_usd(ckpt, per_day, days, tiers)
        assert is_int(got) and got == want, (
            f"monthly_checkpoint_egress_micro_usd({ckpt}, {per_day}, {days}, {tiers}) = {got!r}; "
            f"want {want}"
        )
        if days == 30:
            want = o_bill(ckpt * per_day * 30, cl.AWS_EGRESS)
            got = gc.monthly_checkpoint_egress_micro_usd(ckpt, per_day)
            assert got == want, (
                f"monthly_checkpoint_egress_micro_usd({ckpt}, {per_day}) (30 days, AWS's list) = "
                f"{got!r}; want {want}"
            )
    assert crossed > 20 and partial_gb > 20 and per_copy_differs > 20 and zero > 2 and huge > 2, (
        f"the set covers bills across tiers ({crossed}), partial GB ({partial_gb}), monthly "
        f"totals that are not the sum of single copies ({per_copy_differs}), months with no "
        f"egress ({zero}) and bills past 10**17 bytes ({huge})"
    )


# --------------------------------------------------------------------------- reserve
def a_demand(r: Any) -> list[int]:
    hours = r.choice([1, 24, 168, r.randint(1, 200)])
    base, swing = r.randint(0, 200), r.randint(0, 200)
    kind = r.choice(["diurnal", "flat", "spiky", "noise", "idle"])
    out = []
    for h in range(hours):
        if kind == "diurnal":
            d = base + (swing if 9 <= h % 24 < 18 else 0)
        elif kind == "flat":
            d = base
        elif kind == "spiky":
            d = base + (swing if r.random() < 0.1 else 0)
        elif kind == "noise":
            d = r.randint(0, base + swing)
        else:
            d = 0  # an idle curve: the reserved GPUs are paid all the same
        out.append(d)
    return out


def o_costs(demand: list[int], pr: int, po: int) -> np.ndarray:
    d = np.array(demand, dtype=np.int64)
    levels = np.arange(int(d.max()) + 1, dtype=np.int64)
    over = np.maximum(d[None, :] - levels[:, None], 0).sum(axis=1)
    return levels * len(demand) * pr + over * po


@pytest.mark.kata_gate(
    "fleet_cost or best_reserved disagree with a search over every reservation on demand curves "
    "and prices that are not in the README"
)
def test_reserve_any_curve(gc: Any) -> None:
    r = random_for("reserve")
    seen = {"none": 0, "peak": 0, "inner": 0, "tie": 0, "idle": 0}
    for _ in range(150):
        demand = a_demand(r)
        seen["idle"] += not any(demand)
        po = r.choice([1_000_000, 2_500_000, 4_000_000, r.randint(1, 10_000_000)])
        pr = r.choice([po // 4, po // 2, po // 3, po, r.randint(1, 2 * po)])
        pr = max(pr, 1)
        costs = o_costs(demand, pr, po)
        reserved = r.randint(0, max(demand) + 5)
        want = reserved * len(demand) * pr + po * sum(max(0, d - reserved) for d in demand)
        got = gc.fleet_cost(demand, reserved, pr, po)
        assert is_int(got) and got == want, (
            f"fleet_cost({demand}, {reserved}, {pr}, {po}) = {got!r}; want {want}"
        )
        best = int(np.argmin(costs))  # the first of equal minima: the fewest GPUs
        seen["tie"] += int((costs == costs[best]).sum() > 1)
        seen["none" if best == 0 else "peak" if best == max(demand) else "inner"] += 1
        got = gc.best_reserved(demand, pr, po)
        assert is_int(got) and got == best, (
            f"best_reserved({demand}, {pr}, {po}) = {got!r}; the cheapest is {best} GPUs "
            f"({int(costs[best])} micro-dollars; {got!r} GPUs cost "
            f"{int(costs[got]) if is_int(got) and 0 <= got < len(costs) else '?'})"
        )
    assert min(seen.values()) > 5, f"the random set covers every kind of optimum: {seen}"
