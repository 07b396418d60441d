//! GIVEN: the types your fingerprint.rs works with, and the policy's numbers. Do not edit.

/// The kinds of component, in their canonical order (the order of `Entry` sorting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// /etc/machine-id (or /var/lib/dbus/machine-id): the OS install's id.
    MachineId,
    /// /sys/class/dmi/id/product_uuid: the SMBIOS system UUID (the motherboard's firmware).
    DmiUuid,
    /// /sys/class/dmi/id/board_serial: the motherboard's serial number.
    BoardSerial,
    /// /sys/class/dmi/id/product_name: the model ("PowerEdge R760"), shared by many machines.
    ProductName,
    /// /proc/cpuinfo: the CPU model and its flags, shared by many machines.
    Cpu,
    /// One per physical network card: its burned-in MAC address.
    Mac,
    /// One per physical disk: its serial number (or WWID).
    Disk,
    /// One per NVIDIA GPU: its UUID.
    Gpu,
}

pub const KINDS: [Kind; 8] = [
    Kind::MachineId,
    Kind::DmiUuid,
    Kind::BoardSerial,
    Kind::ProductName,
    Kind::Cpu,
    Kind::Mac,
    Kind::Disk,
    Kind::Gpu,
];

impl Kind {
    /// The name that goes into the hashes and the canonical encoding ("machine-id", ...).
    pub fn name(self) -> &'static str {
        match self {
            Kind::MachineId => "machine-id",
            Kind::DmiUuid => "dmi-uuid",
            Kind::BoardSerial => "board-serial",
            Kind::ProductName => "product-name",
            Kind::Cpu => "cpu",
            Kind::Mac => "mac",
            Kind::Disk => "disk",
            Kind::Gpu => "gpu",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        KINDS.iter().copied().find(|k| k.name() == name)
    }

    /// The weight of one component of this kind in the match (README, "The policy").
    /// Identity-bearing parts weigh 2 to 4, facts shared by a whole product line weigh 1.
    pub fn weight(self) -> u32 {
        match self {
            Kind::MachineId => 3,
            Kind::DmiUuid => 4,
            Kind::BoardSerial => 3,
            Kind::ProductName => 1,
            Kind::Cpu => 1,
            Kind::Mac => 2,
            Kind::Disk => 2,
            Kind::Gpu => 2,
        }
    }
}

/// A normalised component as `collect` reports it (the raw value: it never leaves the machine).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Component {
    pub kind: Kind,
    pub value: String,
}

/// One entry of a fingerprint: the kind in clear, the value only as its salted hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    pub kind: Kind,
    pub digest: [u8; 32],
}

/// A fingerprint: entries sorted by (kind, digest), no duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub entries: Vec<Entry>,
}

/// What `compare` measures: the weight both sides share, the weight that differs, the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Score {
    pub matched: u32,
    pub mismatched: u32,
    pub accepted: bool,
}

/// What `verdict` concludes about the current machine against the enrolled one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing differs (accepted).
    Same,
    /// Only the machine-id differs: the OS was reinstalled on the same hardware (accepted).
    Reinstalled,
    /// Within the tolerance: a disk, a NIC, a GPU, the CPU was replaced (accepted).
    PartReplaced,
    /// The enrolled machine had a DMI UUID and this one shows none (refused).
    HiddenHardware,
    /// A different DMI UUID with the same machine-id or a shared disk serial (refused).
    Clone,
    /// Fewer than MIN_MATCHED points of weight are shared (refused).
    TooThin,
    /// More than TOLERANCE points of weight differ (refused).
    Different,
}

/// The most weight that may differ for a match: one replaced part, never two.
pub const TOLERANCE: u32 = 3;

/// The least weight both sides must share for a match: a fingerprint thinner than this
/// (a container that sees only a machine-id and a CPU) identifies nothing.
pub const MIN_MATCHED: u32 = 6;

/// Values that firmware and drivers write when they have nothing to say (compared after
/// normalisation, so in lower case). Such a value counts as absent.
pub const PLACEHOLDERS: [&str; 14] = [
    "to be filled by o.e.m.",
    "to be filled by oem",
    "default string",
    "not specified",
    "not applicable",
    "not available",
    "none",
    "n/a",
    "unknown",
    "system serial number",
    "system product name",
    "0123456789",
    "03000200-0400-0500-0006-000700080009",
    "uninitialized",
];
