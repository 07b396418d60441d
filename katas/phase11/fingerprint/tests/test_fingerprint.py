"""Public tests of fingerprint: one fixed machine per rule of README.md, the four tasks.

The hidden tests check the same properties on machines drawn at random from the run seed,
against a model of their own: more NICs, disks and GPUs, other placeholders, other formats.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from pathlib import Path
from typing import Any

import pytest

SALT = b"acme-license-server-2026"


def one_server(fakeroot: Any) -> Any:
    """A fixed two-socket server with one GPU, a bridge, docker and a loop device."""
    F = fakeroot
    return F.Machine(
        machine_id="4C4C4544004A4B10804EB4C04F593533\n",
        product_uuid="4C4C4544-004A-4B10-804E-B4C04F593533\n",
        board_serial="  .7XJK93.CN7016357C01QA.  \n",
        product_name="PowerEdge R760xa\n",
        cpu=F.Cpu(
            "Intel(R) Xeon(R)   Platinum 8480+", ["sse2", "fpu", "avx512f", "fpu"], mhz=2000.0
        ),
        nics=[
            F.Nic("eno1", "B0:7B:25:D4:1A:02"),
            F.Nic("eno2", "b0-7b-25-d4-1a-03"),
            F.Nic("lo", "00:00:00:00:00:00", device=False, assign_type=None),
            F.Nic("br0", "b0:7b:25:d4:1a:02", device=False, bridge=True, assign_type="3"),
            F.Nic("docker0", "02:42:ac:11:00:01", device=False, bridge=True, assign_type="3"),
            F.Nic("veth3f2a", "36:0e:9c:51:7d:aa", device=False, assign_type="3"),
        ],
        disks=[
            F.Disk("nvme0n1", serial="S6EXNE0T812345   "),
            F.Disk("sda", serial=None, wwid="naa.5000c500a1b2c3d4"),
            F.Disk("loop0", device=False),
            F.Disk("sdb", serial="USB123", removable=True),
        ],
        gpus=[F.Gpu("0000:18:00.0", "GPU-5C2E8A0B-1F3D-4E5A-9B7C-0D1E2F3A4B5C")],
    )


ONE_SERVER = [
    ("machine-id", "4c4c4544004a4b10804eb4c04f593533"),
    ("dmi-uuid", "4c4c4544-004a-4b10-804e-b4c04f593533"),
    ("board-serial", ".7xjk93.cn7016357c01qa."),
    ("product-name", "poweredge r760xa"),
    ("cpu", "intel(r) xeon(r) platinum 8480+|avx512f fpu sse2"),
    ("mac", "b0:7b:25:d4:1a:02"),
    ("mac", "b0:7b:25:d4:1a:03"),
    ("disk", "naa.5000c500a1b2c3d4"),
    ("disk", "s6exne0t812345"),
    ("gpu", "gpu-5c2e8a0b-1f3d-4e5a-9b7c-0d1e2f3a4b5c"),
]


# --------------------------------------------------------------------------- collect
def test_collect_one_server(lib: Any, fakeroot: Any, tmp_path: Path) -> None:
    root = fakeroot.write(one_server(fakeroot), tmp_path / "host")
    got = lib.collect(root)
    assert got == ONE_SERVER, f"collect(one server) =\n{got}\nexpected\n{ONE_SERVER}"


def test_collect_empty_root(lib: Any, tmp_path: Path) -> None:
    got = lib.collect(tmp_path)
    assert got == [], (
        f"collect(an empty directory) = {got}: read under root, never the real machine"
    )


def test_collect_placeholders_are_absent(lib: Any, fakeroot: Any, tmp_path: Path) -> None:
    m = one_server(fakeroot)
    m.product_uuid = "00000000-0000-0000-0000-000000000000\n"
    m.board_serial = "To be filled by O.E.M.\n"
    m.product_name = "Default string\n"
    m.machine_id = (
        "uninitialized\n"  # systemd's first boot: /var/lib/dbus/machine-id is the fallback
    )
    m.dbus_machine_id = "0123456789abcdef0123456789ABCDEF\n"
    got = dict((k, v) for k, v in lib.collect(fakeroot.write(m, tmp_path / "h")) if k != "mac")
    assert "dmi-uuid" not in got and "board-serial" not in got and "product-name" not in got, got
    assert got.get("machine-id") == "0123456789abcdef0123456789abcdef", got


def test_collect_unreadable_dmi(lib: Any, fakeroot: Any, tmp_path: Path) -> None:
    m = one_server(fakeroot)
    m.unreadable = {"product_uuid", "board_serial"}  # mode 0400: what a non-root user sees
    kinds = [k for k, _ in lib.collect(fakeroot.write(m, tmp_path / "h"))]
    assert "dmi-uuid" not in kinds and "board-serial" not in kinds and "product-name" in kinds, (
        kinds
    )


def test_collect_ignores_cpu_mhz(lib: Any, fakeroot: Any, tmp_path: Path) -> None:
    m = one_server(fakeroot)
    a = lib.collect(fakeroot.write(m, tmp_path / "a"))
    m.cpu.mhz = 3712.5
    b = lib.collect(fakeroot.write(m, tmp_path / "b"))
    assert a == b, f"the cpu MHz changed the components:\n{a}\n{b}"


def test_collect_changed_mac_is_not_an_identity(lib: Any, fakeroot: Any, tmp_path: Path) -> None:
    m = one_server(fakeroot)
    m.nics[1].address, m.nics[1].assign_type = (
        "b0:7b:25:d4:1a:99",
        "3",
    )  # ip link set eno2 address ...
    m.nics.append(
        fakeroot.Nic("ens5", "0a:1b:2c:3d:4e:5f")
    )  # a cloud VM's NIC: locally administered
    macs = [v for k, v in lib.collect(fakeroot.write(m, tmp_path / "h")) if k == "mac"]
    assert macs == ["b0:7b:25:d4:1a:02"], macs


# --------------------------------------------------------------------------- hash
def test_hash_encode(lib: Any) -> None:
    got = lib.encode([b"ab", b"c"])
    assert got == b"\x00\x00\x00\x02ab\x00\x00\x00\x01c", got
    assert lib.encode([b"a", b"bc"]) != got, "encode(['a', 'bc']) == encode(['ab', 'c'])"
    assert lib.encode([]) == b"", "encode([]) is empty"
    assert lib.encode([b""]) == b"\x00\x00\x00\x00", "an empty field still has its length"


def test_hash_digest_is_salted_hmac(lib: Any) -> None:
    comp = ("disk", "s6exne0t812345")
    msg = b"\x00\x00\x00\x04disk\x00\x00\x00\x0es6exne0t812345"
    want = hmac.new(SALT, msg, hashlib.sha256).digest()
    got = lib.digests(SALT, [comp])
    assert got == [("disk", want)], f"digest({comp}) = {got}, expected {want.hex()}"
    other = lib.digests(b"another-vendor", [comp])[0][1]
    assert other != want, "two salts gave the same digest"


def test_hash_fingerprint_sorted(lib: Any) -> None:
    comps = list(reversed(ONE_SERVER)) + [ONE_SERVER[5]]
    got = lib.fingerprint(SALT, comps)
    want = sorted(
        set(lib.digests(SALT, ONE_SERVER)), key=lambda e: (ONE_SERVER_KINDS.index(e[0]), e[1])
    )
    assert got == want, (
        f"fingerprint(one server) is not one entry per component sorted by (kind, digest): {got}"
    )


ONE_SERVER_KINDS = [
    "machine-id",
    "dmi-uuid",
    "board-serial",
    "product-name",
    "cpu",
    "mac",
    "disk",
    "gpu",
]


def test_hash_to_bytes(lib: Any) -> None:
    fp = lib.fingerprint(SALT, ONE_SERVER)
    shuffled = fp[:]
    random.Random(3).shuffle(shuffled)
    got = lib.to_bytes(shuffled + fp[:2])
    want = lib.encode([b"fingerprint-v1"] + [f for k, d in fp for f in (k.encode(), d)])
    assert got == want, (
        "to_bytes is not encode(['fingerprint-v1', kind, digest, ...]) in sorted order"
    )
    for _, value in ONE_SERVER:
        assert value.encode() not in got, f"the fingerprint contains the raw value {value!r}"


# --------------------------------------------------------------------------- match
def fp_of(lib: Any, comps: list[tuple[str, str]]) -> Any:
    return lib.fingerprint(SALT, comps)


def swap(comps: list[tuple[str, str]], kind: str, new: str) -> list[tuple[str, str]]:
    """comps with its first component of `kind` replaced by (kind, new)."""
    i = next(i for i, (k, _) in enumerate(comps) if k == kind)
    return comps[:i] + [(kind, new)] + comps[i + 1 :]


def test_match_same_machine(lib: Any) -> None:
    s = lib.compare(fp_of(lib, ONE_SERVER), fp_of(lib, ONE_SERVER))
    assert s == type(s)(3 + 4 + 3 + 1 + 1 + 2 + 2 + 2 + 2 + 2, 0, True), s


def test_match_one_replaced_disk(lib: Any) -> None:
    s = lib.compare(fp_of(lib, ONE_SERVER), fp_of(lib, swap(ONE_SERVER, "disk", "s7newdisk0001")))
    assert (s.mismatched, s.accepted) == (2, True), f"one disk replaced: {s}"


def test_match_two_replaced_parts(lib: Any) -> None:
    two = swap(swap(ONE_SERVER, "disk", "s7newdisk0001"), "mac", "b0:7b:25:00:00:01")
    s = lib.compare(fp_of(lib, ONE_SERVER), fp_of(lib, two))
    assert (s.mismatched, s.accepted) == (4, False), f"a disk and a NIC replaced: {s}"


def test_match_absent_on_one_side(lib: Any) -> None:
    no_gpu = [c for c in ONE_SERVER if c[0] != "gpu"]
    s = lib.compare(fp_of(lib, ONE_SERVER), fp_of(lib, no_gpu))
    assert (s.mismatched, s.accepted) == (2, True), f"the GPU gone: {s}"
    s = lib.compare(fp_of(lib, no_gpu), fp_of(lib, no_gpu))
    assert (s.matched, s.mismatched) == (20, 0), f"no GPU on both sides counts nowhere: {s}"


def test_match_too_thin(lib: Any) -> None:
    thin = [c for c in ONE_SERVER if c[0] in ("machine-id", "cpu")]
    s = lib.compare(fp_of(lib, thin), fp_of(lib, thin))
    assert s == type(s)(4, 0, False), f"machine-id and cpu alone: {s}"


# --------------------------------------------------------------------------- spoof
def verdict_of(lib: Any, fakeroot: Any, tmp_path: Path, enrolled: Any, current: Any) -> str:
    a = lib.fingerprint(SALT, lib.collect(fakeroot.write(enrolled, tmp_path / "enrolled")))
    b = lib.fingerprint(SALT, lib.collect(fakeroot.write(current, tmp_path / "current")))
    return lib.verdict(a, b)


@pytest.mark.parametrize(
    "case, want",
    [
        ("same", "same"),
        ("cloned-vm", "clone"),
        ("changed-mac", "part-replaced"),
        ("container", "hidden-hardware"),
        ("reinstall", "reinstalled"),
        ("new-disk", "part-replaced"),
        ("two-new-disks", "different"),
    ],
)
def test_spoof_cases(lib: Any, fakeroot: Any, tmp_path: Path, case: str, want: str) -> None:
    F = fakeroot
    host = one_server(F)
    host.disks.append(F.Disk("nvme1n1", serial="S6EXNE0T899999"))
    other = one_server(F)
    other.disks.append(F.Disk("nvme1n1", serial="S6EXNE0T899999"))
    if (
        case == "cloned-vm"
    ):  # same disk images and machine-id; the hypervisor gives a new UUID and MACs
        other.product_uuid = "9a1f3c2e-5b7d-4e60-8f21-3c4d5e6f7a8b"
        other.nics = [F.Nic("eno1", "b0:7b:25:aa:bb:01"), F.Nic("eno2", "b0:7b:25:aa:bb:02")]
    elif case == "changed-mac":  # ip link set eno1 address ...: not burned in, the card drops out
        other.nics[0].address, other.nics[0].assign_type = "02:11:22:33:44:55", "3"
    elif case == "container":  # the host's machine-id copied in, /sys/class/dmi hidden, veth only
        other.product_uuid = other.board_serial = other.product_name = None
        other.nics = [F.Nic("eth0", "02:42:ac:11:00:02", device=False, assign_type="3")]
        other.disks, other.gpus = [], []
    elif case == "reinstall":
        other.machine_id = "8d2f0e6b1c3a4f5e9d7b6a5c4e3f2a1b\n"
    elif case == "new-disk":
        other.disks[0].serial = "S6EXNE0T800001"
    elif case == "two-new-disks":
        other.disks[0].serial = "S6EXNE0T800001"
        other.disks[-1].serial = "S6EXNE0T800002"
    got = verdict_of(lib, F, tmp_path, host, other)
    assert got == want, f"verdict on the {case} case: {got}, expected {want}"
