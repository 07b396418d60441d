//! YOURS: collect a machine's components, hash them, match two fingerprints, judge spoofs.
//!
//! Every function below is graded through lib.rs (README, "Tasks"); each says what it must do.
//! Read api.rs first: Kind (names, weights), Component, Entry, Fingerprint, Score, Verdict,
//! TOLERANCE, MIN_MATCHED, PLACEHOLDERS. sha256.rs gives you hmac_sha256.

#![allow(unused_imports, unused_variables)]

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::api::{Component, Entry, Fingerprint, Kind, Score, Verdict, KINDS, MIN_MATCHED, PLACEHOLDERS, TOLERANCE};
use crate::sha256::hmac_sha256;

// ---------------------------------------------------------------------------------- collect

/// Every component of the machine whose filesystem is mounted at `root` (never `/` itself:
/// read `root.join("etc/machine-id")`), sorted by (kind, value), without duplicates.
///
/// Values are normalised (trimmed, every run of whitespace one space, lower case); a value that
/// is empty, in PLACEHOLDERS, or whose letters and digits are all '0' or all 'f' is absent, and
/// so is a file that cannot be read (missing, EACCES, a directory): never a panic.
///
/// - machine-id: /etc/machine-id, else /var/lib/dbus/machine-id; 32 hex digits or absent.
/// - dmi-uuid, board-serial, product-name: /sys/class/dmi/id/{product_uuid,board_serial,product_name}.
/// - cpu: /proc/cpuinfo's first `model name` and first `flags` lines, as
///   "<model>|<flags lower-cased, sorted, deduplicated, joined by one space>"; absent without a
///   model name. Nothing else of cpuinfo (MHz and bogomips change from read to read).
/// - mac: each /sys/class/net/<if> that is a physical card: it has a `device` entry (lo, bridges,
///   docker0, veth pairs, bonds and tunnels have none) and no `bridge` entry; its
///   addr_assign_type (when present) is 0 (the burned-in address). Its `address` with ':', '-',
///   '.' removed must be 12 hex digits, not all zero, its first octet neither multicast (bit 0)
///   nor locally administered (bit 1); written "aa:bb:cc:dd:ee:ff".
/// - disk: each /sys/block/<dev> with a `device` entry, whose name does not start with loop, ram,
///   zram, dm-, md, nbd or sr, and whose `removable` is not 1: device/serial, or device/wwid when
///   the serial is absent.
/// - gpu: the `GPU UUID:` line of each /proc/driver/nvidia/gpus/<bus>/information.
pub fn collect(root: &Path) -> Vec<Component> {
    todo!("collect: read the components under root")
}

// ------------------------------------------------------------------------------------- hash

/// The canonical encoding: each field as its length (4 bytes, big-endian u32) followed by its
/// bytes, so no two lists of fields encode alike (["ab", "c"] != ["a", "bc"]).
pub fn encode(fields: &[&[u8]]) -> Vec<u8> {
    todo!("encode: length-prefixed fields")
}

/// HMAC-SHA-256 under the vendor's `salt` (the key) of encode([kind name, value]).
pub fn digest(salt: &[u8], component: &Component) -> [u8; 32] {
    todo!("digest: the salted hash of one component")
}

/// One Entry (kind, digest) per component, sorted by (kind, digest), no duplicates.
pub fn fingerprint(salt: &[u8], components: &[Component]) -> Fingerprint {
    todo!("fingerprint: one entry per component, sorted")
}

/// encode(["fingerprint-v1", kind name, digest, kind name, digest, ...]) over `fp`'s entries
/// sorted by (kind, digest) with duplicates dropped (whatever order they come in).
pub fn to_bytes(fp: &Fingerprint) -> Vec<u8> {
    todo!("to_bytes: the canonical encoding of a fingerprint")
}

// ------------------------------------------------------------------------------------ match

/// Kind by kind, over the sets of digests A (enrolled) and B (current):
/// matched += weight x |A ∩ B|; mismatched += weight x max(|A - B|, |B - A|).
/// A kind absent on both sides counts nowhere; absent on one side, all of it differs.
/// accepted = mismatched <= TOLERANCE and matched >= MIN_MATCHED.
pub fn compare(enrolled: &Fingerprint, current: &Fingerprint) -> Score {
    todo!("compare: weighted k-of-n")
}

// ------------------------------------------------------------------------------------ spoof

/// The first of these that holds:
/// 1. HiddenHardware: enrolled has a dmi-uuid entry, current has none.
/// 2. Clone: both have dmi-uuid entries, they differ, and a machine-id or a disk digest is shared.
/// 3. TooThin: compare's matched < MIN_MATCHED.
/// 4. Different: compare's mismatched > TOLERANCE.
/// 5. Same: mismatched == 0.
/// 6. Reinstalled: every kind but machine-id has the same set of digests on both sides.
/// 7. PartReplaced.
pub fn verdict(enrolled: &Fingerprint, current: &Fingerprint) -> Verdict {
    todo!("verdict: the spoofing adversary's cases")
}
