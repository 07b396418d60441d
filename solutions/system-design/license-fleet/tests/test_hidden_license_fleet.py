"""Hidden tests of license-fleet: the same questions about fleets, revocation paths, lists, check
loads and seat demands drawn fresh at every run (the run's seed), against an independent
calculation written here (searches, counts and exact big-integer arithmetic rather than the
closed forms), plus cases chosen to break the usual shortcuts. Each random set asserts that it
contains the cases it exists for."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import pytest

from harness.testing import random_for

SIG = 64  # Ed25519


def is_int(a: Any) -> bool:
    """A whole number as the docstrings ask (int, or a numpy integer), never a float or a bool."""
    return isinstance(a, numbers.Integral) and not isinstance(a, bool)


def is_real(a: Any) -> bool:
    """A number (int, float, numpy's, Fraction), never a bool."""
    return isinstance(a, numbers.Real) and not isinstance(a, bool)


def close(a: Any, b: float, rel: float = 1e-9, abs_tol: float = 1e-12) -> bool:
    return is_real(a) and math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)


def smallest(lo: int, hi: int, ok: Any) -> int:
    """The smallest n in [lo, hi] with ok(n) (ok is monotone: False ... False True ... True)."""
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


# --------------------------------------------------------------------------- load
def a_fleet(fl: Any, r: Any) -> Any:
    return fl.Fleet(
        nodes=r.choice([1, 2, r.randint(1, 100), r.randint(1, 200_000)]),
        procs_per_node=r.choice([1, r.randint(2, 8), r.randint(1, 256)]),
        node_agent=r.random() < 0.5,
        renew_s=r.choice([1, 60, 300, 3600, r.randint(1, 86_400)]),
    )


def o_per_second(n: int, jitter: int) -> list[int]:
    """Requests in each second when n clients spread evenly over max(jitter, 1) seconds."""
    seconds = max(jitter, 1)
    return [n // seconds + (s < n % seconds) for s in range(min(seconds, 3))]


@pytest.mark.kata_gate(
    "clients, steady_qps, herd_peak or jitter_for disagree with the model on fleets, jitters and "
    "server capacities that are not in the README"
)
def test_load_any_fleet(lf: Any, fl: Any) -> None:
    r = random_for("load")
    seen = {"agent": 0, "procs": 0, "no-jitter": 0, "uneven": 0, "exact": 0, "inexact": 0}
    for _ in range(400):
        f = a_fleet(fl, r)
        n = f.nodes * (1 if f.node_agent else f.procs_per_node)
        seen["agent" if f.node_agent and f.procs_per_node > 1 else "procs"] += 1
        got = lf.clients(f)
        assert is_int(got) and got == n, f"clients({f}) = {got!r}; want {n}"
        got = lf.steady_qps(f)
        assert close(got, n / f.renew_s), f"steady_qps({f}) = {got!r}; want {n / f.renew_s}"
        jitter = r.choice([0, 1, r.randint(2, 600), r.randint(2, 100_000)])
        want = max(o_per_second(n, jitter))
        seen["no-jitter"] += jitter <= 1
        seen["uneven"] += jitter > 1 and n % jitter != 0
        got = lf.herd_peak(f, jitter)
        assert is_int(got) and got == want, (
            f"herd_peak({f}, jitter_s={jitter}) = {got!r}; the busiest second gets {want}"
        )
        cap = r.choice([r.randint(1, 5_000), max(n // r.randint(1, 50), 1), n, 10 * n + 1])
        if r.random() < 0.3:  # capacities that divide the herd exactly
            cap = max(n // r.randint(1, 50), 1)
            n_fix = cap * r.randint(1, 50)
            f = fl.Fleet(n_fix, 1, True, f.renew_s)
            n = n_fix
        want = smallest(1, n + 1, lambda j, n=n, cap=cap: max(o_per_second(n, j)) <= cap)
        seen["exact" if n % cap == 0 else "inexact"] += 1
        got = lf.jitter_for(f, cap)
        assert is_int(got) and got == want, (
            f"jitter_for({f}, capacity_qps={cap}) = {got!r}; the smallest jitter whose busiest "
            f"second fits is {want}"
        )
    assert min(seen.values()) > 5, f"the random set covers every case: {seen}"


# --------------------------------------------------------------------------- revocation
def a_path(fl: Any, r: Any) -> Any:
    def period() -> int:
        return r.choice([0, 1, 60, 300, 3600, 86_400, r.randint(0, 7 * 86_400)])

    return fl.RevocationPath(period(), period(), period(), r.randint(1, 30 * 86_400), period())


def o_window(p: Any) -> int:
    """Walk a revocation at t = 0 down the path, each stage at its worst alignment."""
    t = 0
    for stage in (p.publish_s, p.cdn_ttl_s, p.poll_s, p.lease_s, p.skew_s):
        t += stage
    return t


@pytest.mark.kata_gate(
    "revocation_window_s or max_lease_s disagree with the model on revocation paths and targets "
    "that are not in the README"
)
def test_revocation_any_path(lf: Any, fl: Any) -> None:
    r = random_for("revocation")
    none = some = edge = 0
    for _ in range(400):
        p = a_path(fl, r)
        want = o_window(p)
        got = lf.revocation_window_s(p)
        assert is_int(got) and got == want, f"revocation_window_s({p}) = {got!r}; want {want}"
        rest = want - p.lease_s
        target = r.choice([rest, rest + 1, rest + r.randint(2, 10**6), r.randint(0, rest + 10)])
        edge += target in (rest, rest + 1)
        # The longest lease that fits: a search over the window itself.
        hi = max(target + 2, 2)
        best = (
            smallest(
                1,
                hi,
                lambda lease, p=p, target=target: o_window(_with_lease(fl, p, lease)) > target,
            )
            - 1
        )
        want_lease = best if best >= 1 else None
        none += want_lease is None
        some += want_lease is not None
        got = lf.max_lease_s(p, target)
        assert got == want_lease and (got is None or is_int(got)), (
            f"max_lease_s({p}, target_s={target}) = {got!r}; the longest lease within the target "
            f"is {want_lease}"
        )
    assert none and some and edge, "the random set covers no lease, a lease, and the 1 s edge"


def _with_lease(fl: Any, p: Any, lease: int) -> Any:
    return fl.RevocationPath(p.publish_s, p.cdn_ttl_s, p.poll_s, lease, p.skew_s)


# --------------------------------------------------------------------------- grace
def o_failed_count(grace: float, renew: float, outage: float, n: int) -> int:
    """Nodes (of n, last renewals evenly spread over [0, renew)) past their grace."""
    return sum((i + 0.5) / n * renew + outage > grace for i in range(n))


@pytest.mark.kata_gate(
    "failed_fraction or survivable_outage_s disagree with the model on grace periods, renewal "
    "intervals and outages that are not in the README"
)
def test_grace_any_outage(lf: Any) -> None:
    r = random_for("grace")
    regimes = {"none": 0, "some": 0, "all": 0}
    for i in range(400):
        renew = r.choice([60.0, 3600.0, 86_400.0, r.uniform(1, 7 * 86_400)])
        grace = renew * r.choice([1.0, 1.5, 2.0, r.uniform(1, 60)])
        outage = r.choice(
            [
                r.uniform(0, grace - renew),
                r.uniform(grace - renew, grace),
                r.uniform(grace, 3 * grace),
            ]
        )
        if outage <= grace - renew:
            want, regime = 0.0, "none"
        elif outage >= grace:
            want, regime = 1.0, "all"
        else:
            want, regime = (renew - (grace - outage)) / renew, "some"
        regimes[regime] += 1
        got = lf.failed_fraction(grace, renew, outage)
        assert close(got, want, abs_tol=1e-9), (
            f"failed_fraction(grace_s={grace}, renew_s={renew}, outage_s={outage}) = {got!r}; "
            f"want {want}"
        )
        if i % 20 == 0:  # the same share, counted over a thousand nodes
            n = 1000
            count = o_failed_count(grace, renew, outage, n)
            assert abs(got * n - count) <= 1.0, (
                f"failed_fraction(grace_s={grace}, renew_s={renew}, outage_s={outage}) = {got!r}; "
                f"{count} of {n} nodes with evenly spread renewals are past their grace"
            )
        share = r.choice([0.0, 1.0, r.random()])
        want = grace - (1 - share) * renew
        got = lf.survivable_outage_s(grace, renew, share)
        assert close(got, want, abs_tol=1e-6), (
            f"survivable_outage_s(grace_s={grace}, renew_s={renew}, max_failed={share}) = "
            f"{got!r}; want {want}"
        )
        if share == 0.0:
            got = lf.survivable_outage_s(grace, renew)
            assert close(got, want, abs_tol=1e-6), (
                f"survivable_outage_s(grace_s={grace}, renew_s={renew}) (no node lost) = {got!r}; "
                f"want {want}"
            )
    assert min(regimes.values()) > 20, f"the random set covers every regime: {regimes}"


# --------------------------------------------------------------------------- verify
def o_k(check: int, ttl: int) -> int:
    """The checks one verification serves, by walking one process's checks."""
    return smallest(1, ttl + 1, lambda k: k * check >= ttl)


def o_cores(load: Any) -> int:
    k = o_k(load.check_s, load.ttl_s)
    num = load.procs * (load.lookups_per_core_s + (k - 1) * load.verifies_per_core_s)
    den = load.check_s * k * load.verifies_per_core_s * load.lookups_per_core_s
    return -(-num // den)


VPS = [8_000, 10_000, 16_000, 20_000, 25_000, 40_000, 50_000, 64_000, 70_000]
LPS = [500_000, 1_000_000, 2_000_000, 4_000_000, 5_000_000, 10_000_000]


@pytest.mark.kata_gate(
    "checks_per_verify or verify_cores disagree with the model on check loads that are not in "
    "the README"
)
def test_verify_any_load(lf: Any, fl: Any) -> None:
    r = random_for("verify")
    seen = {"no-cache": 0, "multiple": 0, "partial": 0, "short-ttl": 0}
    idle = 0
    for _ in range(400):
        check = r.choice([1, 2, 5, 10, 60, r.randint(1, 3600)])
        ttl = r.choice(
            [0, check, r.randint(1, check), check * r.randint(2, 100), r.randint(0, 86_400)]
        )
        load = fl.CheckLoad(
            r.choice([0, 1, r.randint(1, 1000), r.randint(1, 10**7)]),
            check,
            ttl,
            r.choice(VPS),
            r.choice(LPS),
        )
        k = o_k(check, ttl)
        idle += load.procs == 0
        seen[
            "no-cache"
            if ttl == 0
            else "short-ttl"
            if ttl <= check
            else "multiple"
            if ttl % check == 0
            else "partial"
        ] += 1  # noqa: E501
        got = lf.checks_per_verify(load)
        assert is_int(got) and got == k, f"checks_per_verify({load}) = {got!r}; want {k}"
        want = o_cores(load)
        got = lf.verify_cores(load)
        assert is_int(got) and got == want, f"verify_cores({load}) = {got!r}; want {want}"
    assert min(seen.values()) > 20 and idle > 20, (
        f"the random set covers every cache case: {seen}, and loads with no process ({idle})"
    )


@pytest.mark.kata_gate(
    "verify_cores is not the exact cost rounded up on check loads whose exact cost is a whole "
    "number of cores"
)
def test_verify_whole_cores(lf: Any, fl: Any) -> None:
    r = random_for("verify-whole")
    cases = float_above = 0
    while cases < 60:
        vps, lps = r.choice(VPS), r.choice(LPS)
        check, k, n = r.choice([1, 2, 5, 10]), r.randint(1, 10), r.randint(1, 500)
        num, den = n * check * k * vps * lps, lps + (k - 1) * vps
        if num % den:
            continue
        ttl = (k - 1) * check + r.randint(1, check) if k > 1 else r.choice([0, check])
        load = fl.CheckLoad(num // den, check, ttl, vps, lps)
        exact = Fraction(load.procs, check * k) * (Fraction(1, vps) + Fraction(k - 1, lps))
        assert exact == n, f"the test's case {load} costs {exact} cores, not {n}"
        cases += 1
        naive = load.procs / check / k * (1 / vps + (k - 1) / lps)
        float_above += math.ceil(naive) > n
        got = lf.verify_cores(load)
        assert got == n, f"verify_cores({load}) = {got!r}; the exact cost is {n} cores"
    assert float_above, "the set has loads where a float sum lands above the whole number"


# --------------------------------------------------------------------------- crl
def o_depth(nodes: int, fanout: int) -> int:
    return smallest(1, max(nodes.bit_length(), 1), lambda d: fanout**d >= nodes)


def o_distribution(size: int, nodes: int, fanout: int, bw: float) -> float:
    """Level by level: receivers per level, and the busiest sender's sends on each."""
    depth, sends, senders = o_depth(nodes, fanout), 0, 1
    for level in range(1, depth + 1):
        receivers = senders * fanout if level < depth else nodes
        sends += -(-receivers // senders)
        senders = receivers
    return sends * size / bw


@pytest.mark.kata_gate(
    "full_list_bytes, delta_bytes, relay_depth or distribution_s disagree with the model on "
    "revocation lists, fleets and relay fan-outs that are not in the README (exact powers of "
    "the fan-out included)"
)
def test_crl_any_list(lf: Any, fl: Any) -> None:
    r = random_for("crl")
    powers = partial = empty = 0
    for _ in range(400):
        crl = fl.RevocationList(
            r.choice([0, 1, r.randint(0, 10**7)]),
            r.choice([16, 24, 40, r.randint(1, 200)]),
            r.randint(0, 512),
        )
        want = crl.header_bytes + crl.entries * crl.entry_bytes + SIG
        got = lf.full_list_bytes(crl)
        assert is_int(got) and got == want, f"full_list_bytes({crl}) = {got!r}; want {want}"
        changes = r.choice([0, r.randint(0, 10_000)])  # 0: the signed empty delta
        empty += changes == 0
        want = crl.header_bytes + changes * crl.entry_bytes + SIG
        got = lf.delta_bytes(crl, changes)
        assert is_int(got) and got == want, (
            f"delta_bytes({crl}, changes={changes}) = {got!r}; want {want}"
        )
        fanout = r.choice([2, 3, 5, 10, 16, 32, r.randint(2, 1000)])
        power = fanout ** r.randint(1, 8 if fanout < 100 else 3)
        nodes = r.choice([1, power, power + 1, max(power - 1, 1), r.randint(1, 10**6)])
        powers += nodes == power
        depth = o_depth(nodes, fanout)
        partial += nodes % fanout ** (depth - 1) != 0 and nodes < fanout**depth
        got = lf.relay_depth(nodes, fanout)
        assert is_int(got) and got == depth, (
            f"relay_depth(nodes={nodes}, fanout={fanout}) = {got!r}; want {depth}"
        )
        size, bw = r.choice([want, r.randint(1, 10**9)]), r.uniform(1e6, 1e11)
        want_s = o_distribution(size, nodes, fanout, bw)
        got = lf.distribution_s(size, nodes, fanout, bw)
        assert close(got, want_s), (
            f"distribution_s(size_bytes={size}, nodes={nodes}, fanout={fanout}, link_bw={bw}) = "
            f"{got!r}; want {want_s}"
        )
    assert powers > 20 and partial > 20 and empty > 20, (
        f"the set covers exact powers ({powers}), partial levels ({partial}) and deltas with no "
        f"changes ({empty})"
    )


def test_crl_depth_at_exact_powers(lf: Any) -> None:
    for fanout, d in ((5, 3), (10, 3), (10, 6), (3, 5), (7, 2), (6, 3)):
        got = lf.relay_depth(fanout**d, fanout)
        assert got == d, (
            f"relay_depth(nodes={fanout**d}, fanout={fanout}) = {got!r}: {fanout}**{d} nodes are "
            f"exactly {d} levels"
        )


# --------------------------------------------------------------------------- seats
def o_blocking(p: int, q: int, m: int) -> Fraction:
    """Erlang-B for E = p / q Erlangs and m seats, exactly: (E^m / m!) / sum_k E^k / k!, scaled
    by q^m m! into integers t_k = p^k q^(m-k) m! / k!."""
    t = p**m  # t_m
    total = t
    for k in range(m, 0, -1):
        t = t // p * q * k  # t_(k-1)
        total += t
    return Fraction(p**m, total)


@pytest.mark.kata_gate(
    "offered_erlangs, erlang_b or seats_for disagree with the exact Erlang-B formula on demands, "
    "seat counts and targets that are not in the README"
)
def test_seats_any_demand(lf: Any) -> None:
    r = random_for("seats")
    seen = {"under": 0, "over": 0, "poisson-differs": 0}
    for _ in range(150):
        q = r.choice([1, 2, 4, 8])
        p = r.choice([r.randint(1, 40 * q), r.randint(1, 600 * q)])  # up to 600 Erlangs
        e = p / q
        users, rate = r.randint(1, 5000), r.choice([0.5, 1.0, 2.0, r.uniform(0.01, 20)])
        hold = r.uniform(1, 7200)
        want = users * rate * hold / 3600
        got = lf.offered_erlangs(users, rate, hold)
        assert close(got, want), (
            f"offered_erlangs({users}, {rate}, {hold}) = {got!r}; want {want} Erlangs"
        )
        spread = 4 * math.sqrt(e) + 4
        m = max(0, int(e + r.uniform(-spread, spread)))
        exact = o_blocking(p, q, m)
        seen["under" if m < e else "over"] += 1
        # A Poisson tail P(N > m) is a different number (lost checkouts are not held back).
        log_e = math.log(e)
        tail = 1 - math.fsum(math.exp(k * log_e - e - math.lgamma(k + 1)) for k in range(m + 1))
        seen["poisson-differs"] += abs(tail - float(exact)) > 1e-3
        got = lf.erlang_b(e, m)
        assert close(got, float(exact), rel=1e-8, abs_tol=1e-250), (
            f"erlang_b({e}, {m}) = {got!r}; Erlang-B is {float(exact)}"
        )
        target = r.choice([0.1, 0.05, 0.01, 0.001, 10 ** r.uniform(-6, -0.5)])
        b, need = 1.0, 0  # the oracle's float walk, confirmed exactly below
        while b > target:
            need += 1
            b = e * b / (need + e * b)
        below, above = o_blocking(p, q, need), o_blocking(p, q, need - 1) if need else Fraction(1)
        if abs(float(below) - target) < 1e-9 * target or abs(float(above) - target) < 1e-9 * target:
            continue  # too close to call in floats
        assert below <= target < above, "the oracle's seat count is exact"
        got = lf.seats_for(e, target)
        assert is_int(got) and got == need, (
            f"seats_for({e}, target={target}) = {got!r}; {need} seats block {float(below):.3g}, "
            f"{need - 1} block {float(above):.3g}"
        )
    assert min(seen.values()) > 10, f"the random set covers every case: {seen}"
