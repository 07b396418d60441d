"""License checks at fleet scale: the numbers a licensing design review asks for.

Every function follows the model its docstring states (the README explains where each term
comes from); results are compared with an independent calculation on fleets drawn fresh at
every run.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .fleet import SIGNATURE_BYTES, CheckLoad, Fleet, RevocationList, RevocationPath


# --------------------------------------------------------------------------- load
def clients(fleet: Fleet) -> int:
    """Lease holders that call the license server: one per node with a node agent, else one per
    licensed process (nodes x procs_per_node)."""
    return fleet.nodes if fleet.node_agent else fleet.nodes * fleet.procs_per_node


def steady_qps(fleet: Fleet) -> float:
    """Renewals per second at the license server in steady state: every client renews once per
    renew_s, at times spread over the interval: clients / renew_s."""
    return clients(fleet) / fleet.renew_s


def herd_peak(fleet: Fleet, jitter_s: int) -> int:
    """Requests in the busiest second after an outage that outlived every lease: every client
    calls when the server comes back, each after a delay drawn from the jitter_s whole seconds
    0 .. jitter_s - 1 and spread evenly over them (jitter_s of 0 or 1: all in the first second).
    The busiest second gets ceil(clients / max(jitter_s, 1)) requests."""
    return -(-clients(fleet) // max(jitter_s, 1))


def jitter_for(fleet: Fleet, capacity_qps: int) -> int:
    """The smallest jitter_s (>= 1) whose herd_peak is at most capacity_qps requests per
    second. (A fleet has millions of clients: solve the ceiling for jitter_s, do not search.)"""
    return max(-(-clients(fleet) // capacity_qps), 1)


# --------------------------------------------------------------------------- revocation
def revocation_window_s(path: RevocationPath) -> int:
    """The longest a revoked license keeps working: a revocation that just misses each stage
    waits for all of it (the next publish, the CDN copy's TTL, the server's next poll), a lease
    granted just before the server learns of it is honoured for lease_s, and a client whose clock
    runs behind by skew_s ends that lease skew_s late."""
    return path.publish_s + path.cdn_ttl_s + path.poll_s + path.lease_s + path.skew_s


def max_lease_s(path: RevocationPath, target_s: int) -> int | None:
    """The longest lease (whole seconds, the path's other stages as they are, path.lease_s
    ignored) whose revocation window is at most target_s; None when not even a 1-second lease
    meets it."""
    lease = target_s - (path.publish_s + path.cdn_ttl_s + path.poll_s + path.skew_s)
    return lease if lease >= 1 else None


# --------------------------------------------------------------------------- grace
def failed_fraction(grace_s: float, renew_s: float, outage_s: float) -> float:
    """The share of the fleet that fails closed during a license-server outage of outage_s.
    A node renews every renew_s, so when the outage starts its last renewal is an age drawn
    uniformly from [0, renew_s); it keeps working until grace_s after that renewal (grace_s >=
    renew_s > 0). A node fails when age + outage_s > grace_s: the share is (outage_s - (grace_s -
    renew_s)) / renew_s, clamped to [0, 1]."""
    share = (outage_s - (grace_s - renew_s)) / renew_s
    return min(max(share, 0.0), 1.0)


def survivable_outage_s(grace_s: float, renew_s: float, max_failed: float = 0.0) -> float:
    """The longest outage after which at most max_failed (0 <= max_failed <= 1) of the fleet has
    failed closed: grace_s - renew_s + max_failed x renew_s."""
    return grace_s - renew_s + max_failed * renew_s


# --------------------------------------------------------------------------- verify
def checks_per_verify(load: CheckLoad) -> int:
    """How many checks one verification serves: a process checks at 0, check_s, 2 x check_s, ...;
    a verdict is reused while younger than ttl_s, so the next verification is at the first check
    whose age is >= ttl_s: ceil(ttl_s / check_s) checks, and at least 1 (ttl_s = 0: every check
    verifies)."""
    return max(-(-load.ttl_s // load.check_s), 1)


def verify_cores(load: CheckLoad) -> int:
    """Cores the fleet spends on license checks, rounded up: procs / check_s checks per second,
    one in checks_per_verify of them an Ed25519 verification (1 / verifies_per_core_s core-seconds
    each), the others a cached lookup (1 / lookups_per_core_s each). Compute it exactly (integers
    or fractions.Fraction): a float sum can land a hair above a whole number of cores."""
    k = checks_per_verify(load)
    per_check = Fraction(1, load.verifies_per_core_s) + Fraction(k - 1, load.lookups_per_core_s)
    return math.ceil(Fraction(load.procs, load.check_s * k) * per_check)


# --------------------------------------------------------------------------- crl
def full_list_bytes(crl: RevocationList) -> int:
    """Bytes of the full signed list: header + entries x entry_bytes + one Ed25519 signature
    (fleet.SIGNATURE_BYTES)."""
    return crl.header_bytes + crl.entries * crl.entry_bytes + SIGNATURE_BYTES


def delta_bytes(crl: RevocationList, changes: int) -> int:
    """Bytes of a signed delta carrying only `changes` new entries: its own header, the changes
    and a signature."""
    return crl.header_bytes + changes * crl.entry_bytes + SIGNATURE_BYTES


def relay_depth(nodes: int, fanout: int) -> int:
    """Levels of a relay tree from the origin to `nodes` leaves (nodes >= 1, fanout >= 2) when
    every sender serves at most `fanout` receivers: the smallest d >= 1 with fanout**d >= nodes
    (exactly, in integers)."""
    depth, reach = 1, fanout
    while reach < nodes:
        depth, reach = depth + 1, reach * fanout
    return depth


def distribution_s(size_bytes: int, nodes: int, fanout: int, link_bw: float) -> float:
    """Seconds until the last of `nodes` has a `size_bytes` file sent down the relay tree (store
    and forward: a sender sends to its receivers one after another at link_bw bytes/s). Every
    level above the last is full (fanout receivers per sender); the last level's nodes are spread
    as evenly as possible over the fanout**(depth - 1) senders above them, so the busiest sends
    ceil(nodes / fanout**(depth - 1)). Time = ((depth - 1) x fanout + that) x size_bytes /
    link_bw."""
    depth = relay_depth(nodes, fanout)
    last = -(-nodes // fanout ** (depth - 1))
    return ((depth - 1) * fanout + last) * size_bytes / link_bw


# --------------------------------------------------------------------------- seats
def offered_erlangs(users: int, checkouts_per_hour: float, hold_s: float) -> float:
    """Demand for floating seats in Erlangs: checkouts per second times the mean holding time,
    users x checkouts_per_hour / 3600 x hold_s."""
    return users * checkouts_per_hour * hold_s / 3600


def erlang_b(erlangs: float, seats: int) -> float:
    """The probability that a checkout is refused (all seats held) for `erlangs` of offered
    demand and `seats` seats, by the Erlang-B recursion: B(0) = 1, B(m) = E B(m-1) / (m + E
    B(m-1))."""
    b = 1.0
    for m in range(1, seats + 1):
        b = erlangs * b / (m + erlangs * b)
    return b


def seats_for(erlangs: float, target: float) -> int:
    """The fewest seats whose Erlang-B blocking is at most `target` (0 < target < 1, erlangs >
    0)."""
    b, m = 1.0, 0
    while b > target:
        m += 1
        b = erlangs * b / (m + erlangs * b)
    return m
