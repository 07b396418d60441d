"""The build tools of anti-tamper: given, not yours to edit.

    python3 tamper.py secrets [COUNT] > DIR/secrets.h   a fresh secrets.h (random secrets), in a
                                                    directory of its own: one beside guard.c
                                                    would hide the tests' secrets.h
    python3 tamper.py seal PROGRAM                  stamp PROGRAM's code digest into .kata_seal
    python3 tamper.py build [OUT]                   secrets.h + cc + seal: a program to attack

The seal is SHA-256 over the file bytes of every PT_LOAD program header with PF_X, in
program-header order: the code as the loader maps it. The tests build your guard.c with main.c
and sha256.c (`cc -O2 -g -Wall`), with a secrets.h of their own (fresh secrets every run), and
seal the result with this file's `seal`.
"""

from __future__ import annotations

import hashlib
import os
import secrets as _random
import shutil
import string
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PT_LOAD, PF_X = 1, 1
SHT_SYMTAB, STT_FUNC = 2, 2
SEAL_SECTION = ".kata_seal"
SECRET_ALPHABET = string.ascii_letters + string.digits
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Segment:
    offset: int  # in the file
    vaddr: int
    filesz: int
    flags: int


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    addr: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    offset: int  # in the file
    size: int


class Elf:
    """The parts of an ELF64 little-endian file the seal and the tests need."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        self.data = data
        (self.machine,) = struct.unpack_from("<H", data, 18)
        phoff, shoff = struct.unpack_from("<QQ", data, 32)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 54)
        self.segments = []
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from(
                "<IIQQQQ", data, phoff + i * phentsize
            )
            if p_type == PT_LOAD:
                self.segments.append(Segment(p_offset, p_vaddr, p_filesz, p_flags))
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx][4] if shnum else 0
        self.sections = [
            Section(self._str(names + r[0]), r[1], r[4], r[3], r[5], r[6], r[9]) for r in raw
        ]

    def _str(self, at: int) -> str:
        return self.data[at : self.data.index(b"\0", at)].decode()

    def code(self) -> list[Segment]:
        """The executable PT_LOAD segments, in program-header order."""
        return [s for s in self.segments if s.flags & PF_X]

    def code_ranges(self) -> list[tuple[int, int]]:
        """(start, end) file offsets of the code the seal covers."""
        return [(s.offset, s.offset + s.filesz) for s in self.code()]

    def digest(self) -> bytes:
        h = hashlib.sha256()
        for lo, hi in self.code_ranges():
            h.update(self.data[lo:hi])
        return h.digest()

    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(f"no section {name} in the program")

    def file_offset(self, vaddr: int) -> int:
        for s in self.segments:
            if s.vaddr <= vaddr < s.vaddr + s.filesz:
                return s.offset + vaddr - s.vaddr
        raise KeyError(f"address {vaddr:#x} is in no loaded segment")

    def functions(self, sized: bool = True) -> dict[str, Symbol]:
        """Function symbols (from .symtab) by name, at their file offsets: those with a size, or
        with `sized=False` every one (crt's frame_dummy and friends have size 0)."""
        out: dict[str, Symbol] = {}
        for sec in self.sections:
            if sec.type != SHT_SYMTAB or not sec.entsize:
                continue
            strtab = self.sections[sec.link]
            for i in range(sec.size // sec.entsize):
                name, info, _other, _shndx, value, size = struct.unpack_from(
                    "<IBBHQQ", self.data, sec.offset + i * sec.entsize
                )
                if info & 0xF == STT_FUNC and (size or not sized) and value:
                    n = self._str(strtab.offset + name)
                    try:
                        out[n] = Symbol(n, self.file_offset(value), size)
                    except KeyError:
                        pass
        return out


def seal(path: str | os.PathLike[str]) -> bytes:
    """Stamp the digest of the program's code into its .kata_seal section; returns it."""
    p = Path(path)
    data = bytearray(p.read_bytes())
    elf = Elf(bytes(data))
    sec = elf.section(SEAL_SECTION)
    if sec.size < 32:
        raise ValueError(f"{SEAL_SECTION} holds {sec.size} bytes; the seal needs 32")
    for lo, hi in elf.code_ranges():
        if lo < sec.offset + 32 and sec.offset < hi:
            raise ValueError(f"{SEAL_SECTION} lies inside the code it seals")
    digest = elf.digest()
    data[sec.offset : sec.offset + 32] = digest
    p.write_bytes(bytes(data))
    return digest


def random_secrets(count: int = 3) -> list[bytes]:
    """`count` fresh secrets: 20 to 40 letters and digits, no byte repeated four times in a row."""
    out = []
    while len(out) < count:
        n = 20 + _random.randbelow(21)
        s = "".join(_random.choice(SECRET_ALPHABET) for _ in range(n)).encode()
        if not any(s[i] == s[i + 1] == s[i + 2] == s[i + 3] for i in range(n - 3)):
            out.append(s)
    return out


def secrets_header(secrets: list[bytes]) -> str:
    """secrets.h for these secrets: byte lists behind X-macros, never a string literal.

    KATA_SECRET_COUNT          how many
    KATA_SECRET_<n>_LEN        secret n's length in bytes (at most GUARD_SECRET_MAX)
    KATA_SECRET_<n>(B)         B(byte, position, n) for each byte of secret n, in order
    KATA_SECRET_LIST(S)        S(0) S(1) ... S(KATA_SECRET_COUNT - 1)
    """
    lines = [
        "/* Generated by tamper.py: the secrets of this build. Never written as a string. */",
        "#ifndef KATA_SECRETS_H",
        "#define KATA_SECRETS_H",
        f"#define KATA_SECRET_COUNT {len(secrets)}",
    ]
    for n, s in enumerate(secrets):
        if not 1 <= len(s) <= 64:
            raise ValueError("a secret holds 1 to 64 bytes")
        body = " ".join(f"B({b:#04x}, {i}, {n})" for i, b in enumerate(s))
        lines += [f"#define KATA_SECRET_{n}_LEN {len(s)}", f"#define KATA_SECRET_{n}(B) {body}"]
    lines.append("#define KATA_SECRET_LIST(S) " + " ".join(f"S({n})" for n in range(len(secrets))))
    lines.append("#endif")
    return "\n".join(lines) + "\n"


def _build(out: Path) -> None:
    secrets = random_secrets()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "secrets.h").write_text(secrets_header(secrets))
        cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
        sources = [str(HERE / n) for n in ("main.c", "guard.c", "sha256.c")]
        cmd = [cc, "-O2", "-g", "-Wall", "-I", tmp, *sources, "-o", str(out), "-lm"]
        subprocess.run(cmd, check=True)
    print(f"sealed {out}: {seal(out).hex()}")
    for n, s in enumerate(secrets):
        print(f"secret {n}: {s.decode()}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["secrets"]:
        sys.stdout.write(secrets_header(random_secrets(int(argv[1]) if len(argv) > 1 else 3)))
    elif argv[:1] == ["seal"] and len(argv) == 2:
        print(seal(argv[1]).hex())
    elif argv[:1] == ["build"]:
        _build(Path(argv[1] if len(argv) > 1 else "guard"))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
