"""What a licensed fleet is made of: the clients that call the license server, the path a
revocation travels, the signed revocation list, and the load of local license checks. Given: read
it, use it, do not edit it (license_fleet.py is yours).

Units are base units everywhere: seconds, bytes, bytes per second. Times are whole seconds where
a field says `int`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Ed25519 (RFC 8032): a signature is 64 bytes, a public key 32.
SIGNATURE_BYTES = 64


@dataclass(frozen=True)
class Fleet:
    """The machines that hold leases from one license server."""

    nodes: int  # machines
    procs_per_node: int  # licensed processes on each machine
    node_agent: bool  # True: one agent per node holds the lease for all its processes
    renew_s: int  # every lease holder renews its lease every renew_s seconds


@dataclass(frozen=True)
class RevocationPath:
    """How a revocation reaches a running process: each stage is a period, and a revocation that
    just misses a stage waits for all of it."""

    publish_s: int  # the vendor signs and publishes a new revocation list every publish_s
    cdn_ttl_s: int  # the CDN serves a copy of the list up to cdn_ttl_s old
    poll_s: int  # the license server fetches the list every poll_s
    lease_s: int  # a lease the server grants is honoured by the client for lease_s
    skew_s: int  # a client's clock may run behind the server's by up to skew_s


@dataclass(frozen=True)
class RevocationList:
    """A signed list of revoked license ids (a CRL's shape): a header (serial, issued-at,
    next-update, key id), the entries, one Ed25519 signature over both."""

    entries: int  # revoked licenses listed
    entry_bytes: int  # bytes per entry (a 16-byte license id and an 8-byte time: 24)
    header_bytes: int  # bytes of the header


@dataclass(frozen=True)
class CheckLoad:
    """Local license checks: every process checks its license file's signature (Ed25519) every
    check_s seconds, unless it holds a cached verdict younger than ttl_s."""

    procs: int  # processes that check, fleet-wide
    check_s: int  # seconds between one process's checks
    ttl_s: int  # a verified verdict is reused while younger than ttl_s (0: never)
    verifies_per_core_s: int  # Ed25519 verifications one core does per second
    lookups_per_core_s: int  # cached-verdict lookups one core does per second
