"""Public tests: worked examples on one fleet (10,000 nodes, 8 licensed processes each), one
group per task. The hidden tests ask the same questions about fleets, paths, lists and demands
drawn fresh at every run, and compare with an independent calculation."""

from __future__ import annotations

from typing import Any

import pytest

APPROX = dict(rel=1e-9)


def _fleet(fl: Any, agent: bool = False) -> Any:
    return fl.Fleet(nodes=10_000, procs_per_node=8, node_agent=agent, renew_s=300)


# ------------------------------------------------------------------------------ load
def test_load_steady_renewals(lf: Any, fl: Any) -> None:
    assert lf.clients(_fleet(fl)) == 80_000, "every process holds its own lease"
    assert lf.clients(_fleet(fl, agent=True)) == 10_000, "one agent per node"
    assert lf.steady_qps(_fleet(fl)) == pytest.approx(266.6666666666667, **APPROX), "80,000 / 300 s"
    assert lf.steady_qps(_fleet(fl, agent=True)) == pytest.approx(33.333333333333336, **APPROX)


def test_load_thundering_herd(lf: Any, fl: Any) -> None:
    f = _fleet(fl)
    assert lf.herd_peak(f, 0) == 80_000, "no jitter: every client in the first second"
    assert lf.herd_peak(f, 1) == 80_000, "one second of jitter is no jitter"
    assert lf.herd_peak(f, 60) == 1334, "80,000 over 60 s: ceil(1333.3)"
    assert lf.herd_peak(f, 300) == 267, "a full renewal interval of jitter: about the steady rate"


def test_load_jitter_for_a_server(lf: Any, fl: Any) -> None:
    f = _fleet(fl)
    assert lf.jitter_for(f, 2000) == 40, "80,000 clients at 2,000 per second: 40 s of jitter"
    assert lf.jitter_for(f, 3000) == 27, "26 s would put 3,077 in a second"
    assert lf.jitter_for(f, 100_000) == 1, "a server that takes the whole herd needs no jitter"


# ------------------------------------------------------------------------------ revocation
def test_revocation_window(lf: Any, fl: Any) -> None:
    path = fl.RevocationPath(publish_s=3600, cdn_ttl_s=300, poll_s=600, lease_s=3600, skew_s=300)
    assert lf.revocation_window_s(path) == 8400, "1 h + 5 min + 10 min + 1 h + 5 min"


def test_revocation_lease_for_a_target(lf: Any, fl: Any) -> None:
    path = fl.RevocationPath(publish_s=3600, cdn_ttl_s=300, poll_s=600, lease_s=3600, skew_s=300)
    assert lf.max_lease_s(path, 4 * 3600) == 9600, "4 h minus the 1 h 20 min the path takes"
    assert lf.max_lease_s(path, 3600) is None, "the path alone takes longer than an hour"


# ------------------------------------------------------------------------------ grace
def test_grace_failed_share(lf: Any) -> None:
    day = 86_400
    assert lf.failed_fraction(7 * day, day, 5 * day) == 0.0, "5 days: every node is within grace"
    assert lf.failed_fraction(7 * day, day, 6.5 * day) == pytest.approx(0.5, **APPROX), (
        "6.5 days: the half that renewed more than 12 h before the outage"
    )
    assert lf.failed_fraction(7 * day, day, 8 * day) == 1.0, "past grace for everyone"


def test_grace_survivable_outage(lf: Any) -> None:
    day = 86_400
    assert lf.survivable_outage_s(7 * day, day) == pytest.approx(6 * day, **APPROX), (
        "a 7-day grace with daily renewals survives 6 days with no node lost"
    )
    assert lf.survivable_outage_s(7 * day, day, 0.01) == pytest.approx(519_264, **APPROX), (
        "1 % of the fleet lost: 144.24 h"
    )


# ------------------------------------------------------------------------------ verify
def test_verify_no_cache(lf: Any, fl: Any) -> None:
    load = fl.CheckLoad(80_000, 1, 0, 20_000, 5_000_000)
    assert lf.checks_per_verify(load) == 1, "ttl 0: every check verifies"
    assert lf.verify_cores(load) == 4, "80,000 verifications per second at 20,000 per core"


def test_verify_cached_verdict(lf: Any, fl: Any) -> None:
    load = fl.CheckLoad(80_000, 1, 60, 20_000, 5_000_000)
    assert lf.checks_per_verify(load) == 60, "a 60 s verdict serves 60 one-second checks"
    assert lf.verify_cores(load) == 1, "1,333 verifications and 78,667 lookups per second"
    load = fl.CheckLoad(80_000, 10, 25, 20_000, 5_000_000)
    assert lf.checks_per_verify(load) == 3, "checks at 0, 10, 20 s reuse it; 30 s verifies"


# ------------------------------------------------------------------------------ crl
def test_crl_sizes(lf: Any, fl: Any) -> None:
    crl = fl.RevocationList(entries=1_000_000, entry_bytes=24, header_bytes=64)
    assert lf.full_list_bytes(crl) == 24_000_128, "64 + 1,000,000 x 24 + 64-byte signature"
    assert lf.delta_bytes(crl, 500) == 12_128, "a delta of 500 revocations"


def test_crl_relay_tree(lf: Any) -> None:
    assert lf.relay_depth(100_000, 32) == 4, "32**3 = 32,768 < 100,000 <= 32**4"
    assert lf.relay_depth(32_768, 32) == 3, "exactly 32**3"
    assert lf.distribution_s(24_000_128, 100_000, 32, 1.25e9) == pytest.approx(
        1.92001024, **APPROX
    ), "3 full levels of 32 sends plus the last level's 4, each 24 MB at 10 Gbit/s"


# ------------------------------------------------------------------------------ seats
def test_seats_erlang_b(lf: Any) -> None:
    e = lf.offered_erlangs(500, 2, 1800)
    assert e == pytest.approx(500.0, **APPROX), "500 users x 2 checkouts an hour x 30 min"
    assert lf.erlang_b(e, 500) == pytest.approx(0.0348477774146855, rel=1e-7), (
        "as many seats as Erlangs refuse 3.5 % of checkouts"
    )
    assert lf.erlang_b(10, 10) == pytest.approx(0.21458234310734736, rel=1e-7)


def test_seats_for_a_target(lf: Any) -> None:
    assert lf.seats_for(500.0, 0.01) == 527, "1 % blocking at 500 Erlangs"
    assert lf.seats_for(500.0, 0.001) == 555
    assert lf.seats_for(10.0, 0.01) == 18, "small pools need proportionally more headroom"
