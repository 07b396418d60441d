"""License checks at fleet scale: the numbers a licensing design review asks for.

Write each function to the model its docstring states (the README explains where each term comes
from). The tests compare your numbers with an independent calculation on fleets, paths, lists and
demands drawn fresh at every run.
"""

from __future__ import annotations

import math  # noqa: F401  (ceil)
from fractions import Fraction  # noqa: F401  (exact arithmetic)

from harness import todo

from .fleet import SIGNATURE_BYTES, CheckLoad, Fleet, RevocationList, RevocationPath  # noqa: F401


# --------------------------------------------------------------------------- load
def clients(fleet: Fleet) -> int:
    """Lease holders that call the license server: one per node with a node agent, else one per
    licensed process (nodes x procs_per_node)."""
    todo("clients")


def steady_qps(fleet: Fleet) -> float:
    """Renewals per second at the license server in steady state: every client renews once per
    renew_s, at times spread over the interval: clients / renew_s."""
    todo("steady_qps")


def herd_peak(fleet: Fleet, jitter_s: int) -> int:
    """Requests in the busiest second after an outage that outlived every lease: every client
    calls when the server comes back, each after a delay drawn from the jitter_s whole seconds
    0 .. jitter_s - 1 and spread evenly over them (jitter_s of 0 or 1: all in the first second).
    The busiest second gets ceil(clients / max(jitter_s, 1)) requests."""
    todo("herd_peak")


def jitter_for(fleet: Fleet, capacity_qps: int) -> int:
    """The smallest jitter_s (>= 1) whose herd_peak is at most capacity_qps requests per
    second. (A fleet has millions of clients: solve the ceiling for jitter_s, do not search.)"""
    todo("jitter_for")


# --------------------------------------------------------------------------- revocation
def revocation_window_s(path: RevocationPath) -> int:
    """The longest a revoked license keeps working: a revocation that just misses each stage
    waits for all of it (the next publish, the CDN copy's TTL, the server's next poll), a lease
    granted just before the server learns of it is honoured for lease_s, and a client whose clock
    runs behind by skew_s ends that lease skew_s late."""
    todo("revocation_window_s")


def max_lease_s(path: RevocationPath, target_s: int) -> int | None:
    """The longest lease (whole seconds, the path's other stages as they are, path.lease_s
    ignored) whose revocation window is at most target_s; None when not even a 1-second lease
    meets it."""
    todo("max_lease_s")


# --------------------------------------------------------------------------- grace
def failed_fraction(grace_s: float, renew_s: float, outage_s: float) -> float:
    """The share of the fleet that fails closed during a license-server outage of outage_s.
    A node renews every renew_s, so when the outage starts its last renewal is an age drawn
    uniformly from [0, renew_s); it keeps working until grace_s after that renewal (grace_s >=
    renew_s > 0). A node fails when age + outage_s > grace_s: the share is (outage_s - (grace_s -
    renew_s)) / renew_s, clamped to [0, 1]."""
    todo("failed_fraction")


def survivable_outage_s(grace_s: float, renew_s: float, max_failed: float = 0.0) -> float:
    """The longest outage after which at most max_failed (0 <= max_failed <= 1) of the fleet has
    failed closed: grace_s - renew_s + max_failed x renew_s."""
    todo("survivable_outage_s")


# --------------------------------------------------------------------------- verify
def checks_per_verify(load: CheckLoad) -> int:
    """How many checks one verification serves: a process checks at 0, check_s, 2 x check_s, ...;
    a verdict is reused while younger than ttl_s, so the next verification is at the first check
    whose age is >= ttl_s: ceil(ttl_s / check_s) checks, and at least 1 (ttl_s = 0: every check
    verifies)."""
    todo("checks_per_verify")


def verify_cores(load: CheckLoad) -> int:
    """Cores the fleet spends on license checks, rounded up: procs / check_s checks per second,
    one in checks_per_verify of them an Ed25519 verification (1 / verifies_per_core_s core-seconds
    each), the others a cached lookup (1 / lookups_per_core_s each). Compute it exactly (integers
    or fractions.Fraction): a float sum can land a hair above a whole number of cores."""
    todo("verify_cores")


# --------------------------------------------------------------------------- crl
def full_list_bytes(crl: RevocationList) -> int:
    """Bytes of the full signed list: header + entries x entry_bytes + one Ed25519 signature
    (fleet.SIGNATURE_BYTES)."""
    todo("full_list_bytes")


def delta_bytes(crl: RevocationList, changes: int) -> int:
    """Bytes of a signed delta carrying only `changes` new entries: its own header, the changes
    and a signature."""
    todo("delta_bytes")


def relay_depth(nodes: int, fanout: int) -> int:
    """Levels of a relay tree from the origin to `nodes` leaves (nodes >= 1, fanout >= 2) when
    every sender serves at most `fanout` receivers: the smallest d >= 1 with fanout**d >= nodes
    (exactly, in integers)."""
    todo("relay_depth")


def distribution_s(size_bytes: int, nodes: int, fanout: int, link_bw: float) -> float:
    """Seconds until the last of `nodes` has a `size_bytes` file sent down the relay tree (store
    and forward: a sender sends to its receivers one after another at link_bw bytes/s). Every
    level above the last is full (fanout receivers per sender); the last level's nodes are spread
    as evenly as possible over the fanout**(depth - 1) senders above them, so the busiest sends
    ceil(nodes / fanout**(depth - 1)). Time = ((depth - 1) x fanout + that) x size_bytes /
    link_bw."""
    todo("distribution_s")


# --------------------------------------------------------------------------- seats
def offered_erlangs(users: int, checkouts_per_hour: float, hold_s: float) -> float:
    """Demand for floating seats in Erlangs: checkouts per second times the mean holding time,
    users x checkouts_per_hour / 3600 x hold_s."""
    todo("offered_erlangs")


def erlang_b(erlangs: float, seats: int) -> float:
    """The probability that a checkout is refused (all seats held) for `erlangs` of offered
    demand and `seats` seats, by the Erlang-B recursion: B(0) = 1, B(m) = E B(m-1) / (m + E
    B(m-1))."""
    todo("erlang_b")


def seats_for(erlangs: float, target: float) -> int:
    """The fewest seats whose Erlang-B blocking is at most `target` (0 < target < 1, erlangs >
    0)."""
    todo("seats_for")
