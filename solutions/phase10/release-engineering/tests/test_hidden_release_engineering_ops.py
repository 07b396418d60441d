"""Hidden tests of release-engineering, tasks "canary", "rollback" and "ebpf": counts, samples,
scenarios and dependency graphs drawn from the run seed. The p-values are checked against
Fisher's and Mann-Whitney's definitions computed here (exact fractions, pairwise counting); the
decisions on scenarios whose answer is known by construction; the plans by their properties."""

from __future__ import annotations

import bisect
import math
import random
import shutil
import statistics
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

from harness.testing import raises, random_for


# ------------------------------------------------------------------------- canary oracles
def fisher_exact_small(be: int, bn: int, ce: int, cn: int) -> float:
    """P(X >= ce), X hypergeometric, in exact integers (small tables only)."""
    k_all, n_all = be + ce, bn + cn
    num = sum(
        math.comb(k_all, k) * math.comb(n_all - k_all, cn - k)
        for k in range(ce, min(k_all, cn) + 1)
    )
    return float(Fraction(num, math.comb(n_all, cn)))


def fisher_exact_large(be: int, bn: int, ce: int, cn: int) -> float:
    """The same by the pmf's ratio recurrence from k = ce upwards, scaled by the pmf at ce."""
    K, N, n = be + ce, bn + cn, cn
    log_p = (
        math.lgamma(K + 1) - math.lgamma(ce + 1) - math.lgamma(K - ce + 1)
        + math.lgamma(N - K + 1) - math.lgamma(n - ce + 1) - math.lgamma(N - K - n + ce + 1)
        - math.lgamma(N + 1) + math.lgamma(n + 1) + math.lgamma(N - n + 1)
    )  # fmt: skip
    total, term = 1.0, 1.0
    for k in range(ce, min(K, n)):
        term *= (K - k) * (n - k) / ((k + 1) * (N - K - n + k + 1))
        total += term
        if term < 1e-18 * total:
            break
    return min(1.0, math.exp(log_p) * total)


def mann_whitney_greater(base: list[float], can: list[float]) -> float:
    """U of the canary by counting, for each canary value, the baseline values below and equal
    (bisect on the sorted baseline), the tie term from a Counter of the pooled values."""
    b = sorted(base)
    u = 0.0
    for x in can:
        lo, hi = bisect.bisect_left(b, x), bisect.bisect_right(b, x)
        u += lo + 0.5 * (hi - lo)
    n1, n2 = len(can), len(base)
    n = n1 + n2
    tie = sum(t * t * t - t for t in Counter(list(base) + list(can)).values())
    sd = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))))
    if sd == 0:
        return 1.0  # every value the same: no evidence (scipy: -0.5 / 0 -> z = -inf)
    z = (u - n1 * n2 / 2.0 - 0.5) / sd
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def oracle_judge(release: Any, b: Any, c: Any, p: Any) -> tuple[str, float, float, float, float]:
    """(decision, error effect, error p, latency effect, latency p) by the README's rules."""
    if (
        min(b.requests, c.requests) < p.min_requests
        or min(len(b.latencies_ms), len(c.latencies_ms)) < p.min_latencies
    ):
        return release.HOLD, 0.0, 1.0, 0.0, 1.0
    ee = c.errors / c.requests - b.errors / b.requests
    ep = fisher_exact_large(b.errors, b.requests, c.errors, c.requests)
    le = statistics.median(c.latencies_ms) / statistics.median(b.latencies_ms) - 1
    lp = mann_whitney_greater(list(b.latencies_ms), list(c.latencies_ms))
    worse = [
        (e > m and q < p.alpha)
        for e, q, m in ((ee, ep, p.error_margin), (le, lp, p.latency_margin))
    ]
    unsure = [
        (e > m and q >= p.alpha)
        for e, q, m in ((ee, ep, p.error_margin), (le, lp, p.latency_margin))
    ]
    decision = release.ROLLBACK if any(worse) else release.HOLD if any(unsure) else release.PROMOTE
    return decision, ee, ep, le, lp


def clear_cut(p: Any, ee: float, ep: float, le: float, lp: float) -> bool:
    """No effect within 5 % of its margin and no p-value within a factor 3 of alpha: a judge
    by any correct reading of the rules decides these the same way."""
    for e, m in ((ee, p.error_margin), (le, p.latency_margin)):
        if abs(e - m) < 0.05 * m:
            return False
    return all(not (p.alpha / 3 < q < p.alpha * 3) for q in (ep, lp))


def binomial(r: random.Random, n: int, q: float) -> int:
    """A binomial draw (normal approximation, Poisson for rare events): n is large here."""
    mean = n * q
    if mean < 30:
        k, t, limit = 0, r.random(), math.exp(-mean)
        while t > limit:
            t *= r.random()
            k += 1
        return min(k, n)
    return max(0, min(n, round(r.gauss(mean, math.sqrt(mean * (1 - q))))))


def lognormal(r: random.Random, n: int, median: float, sigma: float = 0.5) -> tuple[float, ...]:
    return tuple(round(median * r.lognormvariate(0, sigma), r.choice([1, 2])) for _ in range(n))


def scenario(r: random.Random, release: Any, kind: str, policy: Any) -> tuple[Any, Any, str]:
    """Baseline and canary arms whose right decision is known by construction."""
    A = release.Arm
    m0 = r.uniform(40, 400)
    q0 = r.uniform(0.0005, 0.01)
    if kind == "too-few":
        short = r.choice(["requests", "latencies"])
        n = (
            r.randint(100, policy.min_requests - 1)
            if short == "requests"
            else r.randint(policy.min_requests, 50000)
        )
        k = (
            r.randint(10, policy.min_latencies - 1)
            if short == "latencies"
            else r.randint(policy.min_latencies, policy.min_latencies + 600)
        )
        bad = A(
            n,
            binomial(r, n, min(0.5, q0 * r.uniform(1, 20))),
            lognormal(r, k, m0 * r.uniform(1, 2)),
        )
        good = A(
            max(n, policy.min_requests) * 3,
            binomial(r, n * 3, q0),
            lognormal(r, 3 * policy.min_latencies, m0),
        )
        return (good, bad, release.HOLD) if r.random() < 0.7 else (bad, good, release.HOLD)
    if kind == "errors-up":
        n = r.randint(20000, 120000)
        q1 = q0 + policy.error_margin * r.uniform(4, 15)
        lat = r.randint(500, 1500)
        return (
            A(n, binomial(r, n, q0), lognormal(r, lat, m0)),
            A(n, binomial(r, n, q1), lognormal(r, lat, m0)),
            release.ROLLBACK,
        )
    if kind == "latency-up":
        n = r.randint(5000, 50000)
        lat = r.randint(800, 2000)
        return (A(n, binomial(r, n, q0), lognormal(r, lat, m0)),
                A(n, binomial(r, n, q0 * r.uniform(0, 1)), lognormal(r, lat, m0 * r.uniform(1.2, 1.6))),
                release.ROLLBACK)  # fmt: skip
    if kind == "no-effect":
        n = r.randint(600000, 1500000)
        lat = r.randint(3000, 4000)
        return (
            A(n, binomial(r, n, q0), lognormal(r, lat, m0)),
            A(n, binomial(r, n, q0), lognormal(r, lat, m0)),
            release.PROMOTE,
        )
    if kind == "noisy-small":
        n = r.randint(policy.min_requests, 4000)
        be = r.randint(0, 2)
        ce = be + math.ceil(policy.error_margin * n) + r.randint(1, 3)
        lat = r.randint(800, 1500)
        return A(n, be, lognormal(r, lat, m0)), A(n, ce, lognormal(r, lat, m0)), release.HOLD
    if kind == "small-but-significant":
        n = r.randint(1500000, 3000000)
        q0 = r.uniform(0.005, 0.02)
        lat = r.randint(3000, 4000)
        base = lognormal(r, lat, m0)
        return (A(n, binomial(r, n, q0), base),
                A(n, binomial(r, n, q0 + policy.error_margin * r.uniform(0.3, 0.55)), tuple(r.sample(base, len(base)))),
                release.PROMOTE)  # fmt: skip
    if kind == "heavy-tail":
        n = r.randint(20000, 60000)
        base = lognormal(r, 3000, m0)
        can = sorted(lognormal(r, 3000, m0))
        for i in r.sample(range(1600, 3000), 60):
            can[i] *= 10
        r.shuffle(can)
        return A(n, binomial(r, n, q0), base), A(n, binomial(r, n, q0), tuple(can)), release.PROMOTE
    if kind == "better":
        n = r.randint(20000, 100000)
        return (A(n, binomial(r, n, q0 * 3), lognormal(r, 1000, m0 * 1.3)),
                A(n, binomial(r, n, q0), lognormal(r, 1000, m0)), release.PROMOTE)  # fmt: skip
    raise AssertionError(kind)


KINDS = [
    "too-few",
    "errors-up",
    "latency-up",
    "no-effect",
    "noisy-small",
    "small-but-significant",
    "heavy-tail",
    "better",
]


def drawn(r: random.Random, release: Any, kind: str, policy: Any) -> tuple[Any, Any, str]:
    """A scenario of `kind` whose oracle decision is its constructed truth and is clear-cut."""
    for _ in range(50):
        b, c, truth = scenario(r, release, kind, policy)
        d, *stats = oracle_judge(release, b, c, policy)
        if d == truth and (
            truth == release.HOLD and kind == "too-few" or clear_cut(policy, *stats)
        ):
            return b, c, truth
    raise AssertionError(f"could not draw a clear {kind} scenario")  # never on a sane seed


def show(arm: Any) -> str:
    lat = arm.latencies_ms
    med = statistics.median(lat) if lat else float("nan")
    return f"Arm({arm.requests} requests, {arm.errors} errors, {len(lat)} latencies, median {med:.1f} ms)"


# ------------------------------------------------------------------------- canary tests
@pytest.mark.kata_gate(
    "canary.errors_p_value is not the one-sided Fisher exact probability on random error counts"
)
def test_stats_any_error_counts(canary: Any) -> None:
    r = random_for()
    for _ in range(150):
        bn, cn = r.randint(1, 400), r.randint(1, 400)
        be, ce = (
            r.randint(0, min(bn, r.choice([3, 10, 40, 400]))),
            r.randint(0, min(cn, r.choice([3, 10, 40, 400]))),
        )
        want = fisher_exact_small(be, bn, ce, cn)
        got = canary.errors_p_value(be, bn, ce, cn)
        assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12), (
            f"canary.errors_p_value({be}, {bn}, {ce}, {cn}): expected {want!r}, got {got!r}"
        )
    for _ in range(40):
        bn, cn = r.randint(10000, 2000000), r.randint(10000, 2000000)
        q = r.uniform(0.0001, 0.03)
        be, ce = binomial(r, bn, q), binomial(r, cn, q * r.uniform(0.8, 1.3))
        want = fisher_exact_large(be, bn, ce, cn)
        got = canary.errors_p_value(be, bn, ce, cn)
        assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12), (
            f"canary.errors_p_value({be}, {bn}, {ce}, {cn}): expected {want!r}, got {got!r}"
        )


@pytest.mark.kata_gate(
    "canary.latency_p_value is not the one-sided Mann-Whitney U test (ties at half, tie-corrected "
    "variance, continuity correction) on random latency samples"
)
def test_stats_any_latency_samples(canary: Any) -> None:
    r = random_for()
    for _ in range(120):
        n1, n2 = r.randint(2, 300), r.randint(2, 300)
        digits = r.choice([0, 0, 1, 3])
        m = r.uniform(20, 300)
        base = [round(m * r.lognormvariate(0, 0.4), digits) for _ in range(n1)]
        can = [round(m * r.uniform(0.9, 1.2) * r.lognormvariate(0, 0.4), digits) for _ in range(n2)]
        if r.random() < 0.05:
            base, can = [m] * n1, [m] * n2  # all ties
        want = mann_whitney_greater(base, can)
        got = canary.latency_p_value(base, can)
        assert math.isclose(got, want, rel_tol=1e-7, abs_tol=1e-10), (
            f"canary.latency_p_value(base={base[:5]}... ({n1}), canary={can[:5]}... ({n2})): "
            f"expected {want!r}, got {got!r}"
        )


@pytest.mark.kata_gate(
    "canary.judge's decision differs from the known answer on fresh scenarios (a real "
    "regression, no effect on many requests, too few requests, a noisy small count, a heavy "
    "tail, a significant change below the margin)"
)
def test_canary_any_scenario(canary: Any, release: Any) -> None:
    r = random_for()
    policy = release.Policy()
    for kind in KINDS * 3:
        b, c, truth = drawn(r, release, kind, policy)
        got = canary.judge(b, c, policy)
        assert got.decision == truth, (
            f"canary.judge({show(b)}, {show(c)}, {policy}) on a {kind} scenario: expected "
            f"{truth}, got {got.decision} ({got.reasons})"
        )


@pytest.mark.kata_gate(
    "canary.judge decides something other than hold when an arm has fewer requests or latency "
    "samples than the policy's minimum"
)
def test_canary_holds_on_too_few(canary: Any, release: Any) -> None:
    r = random_for()
    for _ in range(12):
        policy = release.Policy(
            min_requests=r.randint(500, 20000), min_latencies=r.randint(50, 800)
        )
        b, c, truth = drawn(r, release, "too-few", policy)
        got = canary.judge(b, c, policy)
        assert got.decision == truth, (
            f"canary.judge({show(b)}, {show(c)}, {policy}): expected {truth}, got {got.decision}"
        )


@pytest.mark.kata_gate(
    "canary.judge rolls back on an error-rate increase above the margin that is not significant "
    "(a few errors on a few thousand requests)"
)
def test_canary_noisy_small_counts_hold(canary: Any, release: Any) -> None:
    r = random_for()
    policy = release.Policy()
    for _ in range(10):
        b, c, truth = drawn(r, release, "noisy-small", policy)
        got = canary.judge(b, c, policy)
        assert got.decision == truth, (
            f"canary.judge({show(b)}, {show(c)}): expected {truth}, got {got.decision}"
        )


@pytest.mark.kata_gate(
    "canary.judge rolls back or holds on a change that is significant but smaller than the margin, "
    "or on a heavier tail with the same median"
)
def test_canary_below_margin_promotes(canary: Any, release: Any) -> None:
    r = random_for()
    policy = release.Policy()
    for kind in ["small-but-significant", "heavy-tail"] * 4:
        b, c, truth = drawn(r, release, kind, policy)
        got = canary.judge(b, c, policy)
        assert got.decision == truth, (
            f"canary.judge({show(b)}, {show(c)}) on a {kind} scenario: expected {truth}, got {got.decision}"
        )


@pytest.mark.kata_gate("canary.judge ignores the policy's alpha or margins (random policies)")
def test_canary_any_policy(canary: Any, release: Any) -> None:
    r = random_for()
    seen = 0
    while seen < 25:
        policy = release.Policy(
            min_requests=r.choice([500, 1000, 5000]),
            min_latencies=r.choice([50, 100, 300]),
            alpha=r.choice([0.001, 0.005, 0.02, 0.05, 0.1]),
            error_margin=r.choice([0.0002, 0.0005, 0.002, 0.005]),
            latency_margin=r.choice([0.01, 0.02, 0.1, 0.2]),
        )
        n = r.randint(1000, 40000)
        q0 = r.uniform(0.001, 0.02)
        A = release.Arm
        b = A(n, binomial(r, n, q0), lognormal(r, r.randint(100, 800), 100.0))
        c = A(n, binomial(r, n, q0 + r.uniform(-0.002, 0.01)),
              lognormal(r, r.randint(100, 800), 100.0 * r.uniform(0.95, 1.3)))  # fmt: skip
        want, *stats = oracle_judge(release, b, c, policy)
        if not clear_cut(policy, *stats):
            continue
        seen += 1
        got = canary.judge(b, c, policy)
        assert got.decision == want, (
            f"canary.judge({show(b)}, {show(c)}, {policy}): expected {want}, got {got.decision}"
        )


@pytest.mark.kata_gate(
    "canary.errors_p_value or latency_p_value returns a p-value for impossible counts or an "
    "empty sample"
)
def test_stats_refuses_impossible_counts(canary: Any) -> None:
    for args in [(5, 3, 0, 10), (0, 10, 11, 10), (-1, 10, 0, 10), (0, 10, -2, 10)]:
        with raises(
            ValueError, f"canary.errors_p_value{args} must refuse errors outside 0..requests"
        ):
            canary.errors_p_value(*args)
    with raises(ValueError, "canary.latency_p_value([1.0], []) must refuse an empty sample"):
        canary.latency_p_value([1.0], [])
    with raises(ValueError, "canary.latency_p_value([], [1.0]) must refuse an empty sample"):
        canary.latency_p_value([], [1.0])


# ------------------------------------------------------------------------- rollback
def random_graph(r: random.Random, release: Any, n: int | None = None) -> list[Any]:
    n = n or r.randint(2, 12)
    names = r.sample(["driver", "compat", "image", "cache", "flag", "fw", "cfg", "route", "quota",
                      "schema", "kmod", "dash", "alert", "plugin", "nccl"], n)  # fmt: skip
    order = r.sample(names, n)  # a hidden topological order
    changes = []
    for i, name in enumerate(order):
        after = tuple(sorted(r.sample(order[:i], min(i, r.choice([0, 1, 1, 2, 3])))))
        irreversible = r.random() < 0.2
        changes.append(release.Change(name, after, not irreversible,
                                      f"{name} bumped a format" if irreversible else "",
                                      f"check {name} {r.randint(0, 99)}"))  # fmt: skip
    r.shuffle(changes)
    return changes


def closure_down(changes: list[Any], picked: set[str]) -> set[str]:
    need = {c.id: c.after for c in changes}
    out, todo = set(), list(picked)
    while todo:
        x = todo.pop()
        if x not in out:
            out.add(x)
            todo.extend(need[x])
    return out


def ancestors(changes: list[Any], cid: str) -> set[str]:
    return closure_down(changes, {cid}) - {cid}


def check_plan(changes: list[Any], applied: set[str], plan: Any) -> str | None:
    """None when `plan` is the rollback plan of `applied`, else what is wrong with it."""
    by_id = {c.id: c for c in changes}
    stays = closure_down(changes, {a for a in applied if not by_id[a].reversible})
    if not isinstance(plan.kept, dict) or set(plan.kept) != stays:
        return f"kept should be {sorted(stays)}, got {plan.kept}"
    for cid, why in plan.kept.items():
        if not by_id[cid].reversible:
            if why != f"irreversible: {by_id[cid].why}":
                return f"kept[{cid!r}] should be 'irreversible: {by_id[cid].why}', got {why!r}"
        else:
            users = [k for k in stays if cid in by_id[k].after]
            if why not in [f"needed by {u}" for u in users]:
                return (
                    f"kept[{cid!r}] should be 'needed by X' for X in {sorted(users)}, got {why!r}"
                )
    ids = [u.change for u in plan.undo]
    if sorted(ids) != sorted(applied - stays):
        return f"undo should hold {sorted(applied - stays)} once each, got {ids}"
    for i, cid in enumerate(ids):
        if plan.undo[i].check != by_id[cid].check:
            return f"undo step {cid!r} should carry its check {by_id[cid].check!r}, got {plan.undo[i].check!r}"
        for later in ids[i + 1 :]:
            if later in ancestors(changes, cid):
                pass
            elif cid in ancestors(changes, later):
                return f"{cid!r} is undone before {later!r}, which needs it"
    return None


@pytest.mark.kata_gate(
    "rollback.rollback_plan is not a valid plan on a random dependency graph (what is kept, "
    "dependents undone before what they need, each step's check)"
)
def test_rollback_any_graph(rollback: Any, release: Any) -> None:
    r = random_for()
    for _ in range(120):
        changes = random_graph(r, release)
        applied = closure_down(
            changes, set(r.sample([c.id for c in changes], r.randint(0, len(changes))))
        )
        plan = rollback.rollback_plan(changes, set(applied))
        problem = check_plan(changes, applied, plan)
        assert problem is None, f"rollback.rollback_plan({changes}, {sorted(applied)}): {problem}"


def oracle_order(changes: list[Any]) -> list[str]:
    placed: list[str] = []
    while len(placed) < len(changes):
        ready = [c for c in changes if c.id not in placed and set(c.after) <= set(placed)]
        placed.append(ready[0].id)
    return placed


def test_rollback_order_any_graph(rollback: Any, release: Any) -> None:
    r = random_for()
    for _ in range(120):
        changes = random_graph(r, release)
        want = oracle_order(changes)
        got = rollback.rollout_order(changes)
        assert got == want, f"rollback.rollout_order({changes}): expected {want}, got {got}"


@pytest.mark.kata_gate(
    "rollback.rollout_order or rollback_plan accepts a graph with a cycle or a repeated change, "
    "or an applied set that no rollout leaves"
)
def test_rollback_refuses_broken_graphs(rollback: Any, release: Any) -> None:
    r = random_for()
    C = release.Change
    for _ in range(20):
        changes = random_graph(r, release, r.randint(3, 8))
        ids = [c.id for c in changes]
        cyc = r.sample(ids, r.randint(2, len(ids)))
        broken = [C(c.id, tuple(sorted(set(c.after) | ({cyc[(cyc.index(c.id) + 1) % len(cyc)]} if c.id in cyc else set()))),
                    c.reversible, c.why, c.check) for c in changes]  # fmt: skip
        on_cycle = sorted(
            x
            for x in ids
            if x in ancestors(broken, x)
            or any(x in ancestors(broken, y) and y in ancestors(broken, x) for y in ids if y != x)
        )
        with raises(
            ValueError,
            f"rollback.rollout_order must refuse a cycle (through {on_cycle}) naming a change on it",
            match="|".join(on_cycle),
        ):
            rollback.rollout_order(broken)
        with raises(ValueError, "rollback.rollback_plan must refuse a cyclic graph"):
            rollback.rollback_plan(broken, set())
        top = next((c for c in changes if c.after), None)
        if top is not None:
            with raises(
                ValueError,
                f"rollback.rollback_plan must refuse {top.id!r} applied without {top.after}",
            ):
                rollback.rollback_plan(changes, {top.id})
        with raises(
            ValueError, "rollback.rollback_plan must refuse an applied change that is no change"
        ):
            rollback.rollback_plan(changes, {"no-such-change"})
        twice = [*changes, C(changes[0].id, (), True, "", "again")]
        with raises(
            ValueError, f"rollback.rollout_order must refuse {changes[0].id!r} listed twice"
        ):
            rollback.rollout_order(twice)
        ghost = [*changes, C("ghost", ("no-such-change",))]
        with raises(ValueError, "rollback.rollout_order must refuse a change that needs no change"):
            rollback.rollout_order(ghost)


# ------------------------------------------------------------------------- ebpf
@pytest.mark.kata_gate(
    "the bpftrace program's count is not the traced process's own calls of the given system call "
    "(other processes make the same call meanwhile; each run traces getppid and sched_yield)"
)
def test_ebpf_counts_only_that_process(tracing: Any, run_bpftrace: Any, syscall_child: Any) -> None:
    assert shutil.which("bpftrace"), "bpftrace is on PATH (the capability says so)"
    r = random_for()
    # both calls every run, in a random order: a program wired to one call misses the other
    for call in r.sample(["getppid", "sched_yield"], 2):
        n = r.randint(0, 300)
        noise = syscall_child(r.randint(200, 500), call)
        child = syscall_child(n, call)
        # the noise process runs while the traced child does, both released once bpftrace attached
        out, err = run_bpftrace(tracing.count_syscall_program(call, child.pid), child, [noise])
        lines = out.strip().splitlines()
        assert lines[-1:] == [f"{call} {n}"], (
            f"count_syscall_program({call!r}, pid): bpftrace printed {out!r} "
            f"(stderr {err[-300:]!r}); the child made {n} {call} calls"
        )
        assert len([ln for ln in lines if ln.strip() and not ln.startswith("Attaching")]) == 1, (
            f"count_syscall_program({call!r}, pid) must print one line and no map: {out!r}"
        )


@pytest.mark.kata_gate(
    "tracing.count_syscall_program puts a name or pid it should refuse into the program text "
    "(not [a-z][a-z0-9_]*, not a positive int)"
)
def test_ebpf_refuses_injection(tracing: Any) -> None:
    for bad in ["getppid/**/", 'read { system("id"); }', "getppid\n", "", "GETPID", "a-b"]:
        with raises(ValueError, f"tracing.count_syscall_program({bad!r}, 1) must refuse it"):
            tracing.count_syscall_program(bad, 1)
    for pid in [0, -5, True, "123", 1.0]:
        with raises(
            ValueError, f"tracing.count_syscall_program('getppid', {pid!r}) must refuse it"
        ):
            tracing.count_syscall_program("getppid", pid)


@pytest.mark.kata_gate(
    "canary.judge does not decide by comparing its own errors_p_value / latency_p_value with "
    "policy.alpha (a policy whose alpha is just above, then just below, that p-value)"
)
def test_canary_alpha_at_the_p_value(canary: Any, release: Any, scenarios: Any) -> None:
    # Each metric alone exceeds its margin; alpha is set 5 % above, then 5 % below, the p-value the
    # learner's own test gives: ROLLBACK, then HOLD. A judge at alpha/2 (a two-sided p), or one that
    # decides with another test (a z-test, a t-test on log latencies), misses one side.
    r = random_for()
    R = release
    checked = 0
    for _ in range(200):
        if checked >= 8:
            break
        n = r.randint(3000, 12000)
        lat = scenarios.quantile_latencies(r.randint(200, 600))
        if checked % 2 == 0:  # errors: same latencies, more errors by more than the margin
            be = r.randint(2, 25)
            ce = be + int(n * 0.0015) + r.randint(1, 12)
            base, can = R.Arm(n, be, lat), R.Arm(n, ce, lat)
            p = canary.errors_p_value(be, n, ce, n)
            what = f"errors_p_value({be}, {n}, {ce}, {n})"
        else:  # latency: same errors, median up by more than the margin, moderate evidence
            m = r.randint(200, 400)
            b = scenarios.random_latencies(r, m)
            c = scenarios.random_latencies(r, m, 120.0 * (1 + r.uniform(0.08, 0.14)))
            if statistics.median(c) / statistics.median(b) - 1 <= 0.06:
                continue
            base, can = R.Arm(n, 10, b), R.Arm(n, 10, c)
            p = canary.latency_p_value(list(b), list(c))
            what = f"latency_p_value(base, canary) ({m} latencies each)"
        if not isinstance(p, float) or not (1e-6 < p < 0.4):
            continue
        for alpha, want in ((p * 1.05, R.ROLLBACK), (p / 1.05, R.HOLD)):
            policy = R.Policy(min_requests=1000, min_latencies=100, alpha=alpha)
            got = canary.judge(base, can, policy).decision
            assert got == want, (
                f"canary.judge with {what} = {p:.6g} and alpha = {alpha:.6g}: expected {want}, "
                f"got {got} (a metric above its margin is a regression when p < alpha, "
                f"inconclusive when p >= alpha)"
            )
        checked += 1
    assert checked >= 4, "too few usable cases drawn"


@pytest.mark.kata_gate(
    "canary.judge holds when each arm has exactly policy.min_requests requests and "
    "policy.min_latencies latency samples (the minimum is enough: hold only on fewer)"
)
def test_canary_minimum_is_enough(canary: Any, release: Any, scenarios: Any) -> None:
    r = random_for()
    R = release
    for _ in range(3):
        n, m = r.randint(1000, 50000), r.randint(100, 500)
        lat = scenarios.quantile_latencies(m)
        base, can = R.Arm(n, n // 200, lat), R.Arm(n, n * 3 // 100, lat)  # errors 0.5 % -> 3 %
        exact = R.Policy(min_requests=n, min_latencies=m)
        got = canary.judge(base, can, exact).decision
        assert got == R.ROLLBACK, (
            f"canary.judge with {n} requests and {m} latencies per arm, {exact}: errors "
            f"0.5 % -> 3 %, expected rollback, got {got} (arms at exactly the minimum decide)"
        )
        for short in (R.Policy(min_requests=n + 1, min_latencies=m),
                      R.Policy(min_requests=n, min_latencies=m + 1)):  # fmt: skip
            got = canary.judge(base, can, short).decision
            assert got == R.HOLD, (
                f"canary.judge with {n} requests, {m} latencies, {short}: expected hold, got {got}"
            )


@pytest.mark.kata_gate(
    "canary.judge treats an effect exactly equal to its margin as above it (an error rate up by "
    "exactly error_margin, a median up by exactly latency_margin: not worse by more than the margin)"
)
def test_canary_effect_at_the_margin(canary: Any, release: Any) -> None:
    # Dyadic margins and counts keep every way of computing the effect exact in floats
    # (ce/n - be/n, (ce - be)/n, mc/mb - 1, (mc - mb)/mb): the effect IS the margin, so the
    # metric is fine (PROMOTE); one error more is above it and significant (ROLLBACK).
    r = random_for()
    R = release
    for _ in range(4):
        n = r.choice([2**15, 2**16])
        margin = 2.0 ** -r.randint(7, 10)  # 0.78 % .. 0.098 %: 32 to 512 errors more
        be = r.randint(0, 40)
        ce = be + int(margin * n)
        lat = tuple(float(r.randint(50, 2000)) for _ in range(2 * r.randint(60, 200) + 1))
        policy = R.Policy(min_requests=1000, min_latencies=100, alpha=r.choice([0.01, 0.05]),
                          error_margin=margin, latency_margin=0.05)  # fmt: skip
        for errors, want in ((ce, R.PROMOTE), (ce + 1, R.ROLLBACK)):
            got = canary.judge(R.Arm(n, be, lat), R.Arm(n, errors, lat), policy).decision
            assert got == want, (
                f"canary.judge: errors {be}/{n} -> {errors}/{n} (effect {(errors - be) / n:g}, "
                f"error_margin {margin:g}), the same latencies, {policy}: expected {want}, got {got}"
            )
    for _ in range(4):
        margin = 2.0 ** -r.randint(2, 6)  # 25 % .. 1.6 %
        m = 2 * r.randint(60, 200) + 1  # odd: the median is a sample, scaled exactly
        base = [float(r.randint(50, 2000)) for _ in range(m)]
        can = [x * (1 + margin) for x in base]
        policy = R.Policy(min_requests=1000, min_latencies=100, alpha=r.choice([0.01, 0.05]),
                          error_margin=0.001, latency_margin=margin)  # fmt: skip
        got = canary.judge(R.Arm(5000, 10, tuple(base)), R.Arm(5000, 10, tuple(can)), policy)
        assert got.decision == R.PROMOTE, (
            f"canary.judge: every latency times {1 + margin:g} (median {statistics.median(base):g} "
            f"-> {statistics.median(can):g}, effect exactly latency_margin {margin:g}), errors "
            f"10/5000 on both, {policy}: expected {R.PROMOTE}, got {got.decision} ({got.reasons})"
        )
