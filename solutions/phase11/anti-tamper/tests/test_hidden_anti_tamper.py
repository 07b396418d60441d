"""Hidden tests of anti-tamper: fresh secrets, challenges and patch offsets every run (drawn from
the run seed), attacks on the built binary, and oracles the program cannot reach (the tests
compute every expected answer themselves with Python's hmac)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from bisect import bisect_left
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from harness.testing import random_for

PIECE = 6  # a run of 6 secret bytes never occurs by chance in a program of this size


def right_answer_in(run: Any, want: str) -> bool:
    return want in run.stdout


def code_offsets(program: Any, rnd: Any, count: int) -> list[int]:
    ranges = program.elf.code_ranges()
    total = sum(hi - lo for lo, hi in ranges)
    out = []
    for pick in rnd.sample(range(total), count):
        for lo, hi in ranges:
            if pick < hi - lo:
                out.append(lo + pick)
                break
            pick -= hi - lo
    return out


def never_run_offsets(program: Any) -> list[tuple[str, int, int]]:
    """(what, start, end) file ranges of code the program never executes: the given
    kata_unused_diagnostics, and the padding after a function of known size up to the next
    function symbol of .text (of any size: crt's frame_dummy has none)."""
    fns = program.functions()
    text = program.elf.section(".text")
    starts = sorted({f.offset for f in program.elf.functions(sized=False).values()})
    unused = fns["kata_unused_diagnostics"]
    out = [("kata_unused_diagnostics", unused.offset, unused.offset + unused.size)]
    for f in fns.values():
        end = f.offset + f.size
        after = [s for s in starts if s >= end]
        if after and text.offset <= end and after[0] <= text.offset + text.size:
            if after[0] - end >= 2:
                out.append((f"padding after {f.name}", end, after[0]))
    return out


# --------------------------------------------------------------------------- integrity
@pytest.mark.kata_gate("the program printed the right HMAC after one byte of its code was changed")
def test_integrity_random_bytes_of_code(program: Any, tools: Any, challenge: bytes) -> None:
    want = program.baseline(0, challenge, "guard_integrity")
    rnd = random_for("integrity offsets")
    for off in code_offsets(program, rnd, 6):
        mask = rnd.randint(1, 255)
        run = program.ask(0, challenge, exe=program.patched({off: mask}), timeout=5)
        run.todo("guard_integrity")
        assert not right_answer_in(run, want), (
            f"guard_integrity: byte {off:#x} of the code segment XOR {mask:#04x}, and the program "
            f"still printed the right HMAC: {run.describe()}"
        )


@pytest.mark.kata_gate("the program answered after a byte of code it never runs was changed")
def test_integrity_bytes_never_run(program: Any, tools: Any, challenge: bytes) -> None:
    program.baseline(1, challenge, "guard_integrity")
    rnd = random_for("never-run offsets")
    places = never_run_offsets(program)
    picks = [places[0], *rnd.sample(places[1:], min(2, len(places) - 1))]
    for what, lo, hi in picks:
        off, mask = rnd.randrange(lo, hi), rnd.randint(1, 255)
        run = program.ask(1, challenge, exe=program.patched({off: mask}))
        run.todo("guard_integrity")
        assert tools.refused(run, "integrity"), (
            f"guard_integrity: byte {off:#x} ({what}, never executed) XOR {mask:#04x}, and the "
            f"program did not refuse naming the integrity check: {run.describe()}"
        )


@pytest.mark.kata_gate(
    "the program printed the right HMAC with guard_integrity overwritten by `return GUARD_OK`"
)
def test_integrity_check_overwritten_with_return_ok(
    program: Any, tools: Any, challenge: bytes
) -> None:
    want = program.baseline(2, challenge, "guard_integrity")
    code = tools.RETURN_ZERO.get(program.elf.machine)
    if code is None:
        pytest.skip(f"no patch for machine {program.elf.machine}")
    fn = program.functions()["guard_integrity"]
    run = program.ask(2, challenge, exe=program.patched([(fn.offset, code)]), timeout=5)
    run.todo("guard_integrity")
    assert not right_answer_in(run, want), (
        "guard_integrity's first bytes replaced by `return GUARD_OK` (digest left all zero), and "
        f"the program still printed the right HMAC: the digest must be an input of guard_secret "
        f"({run.describe()})"
    )


@pytest.mark.kata_gate(
    "the program printed the right HMAC with its refusal routine patched to return at once"
)
def test_integrity_refusal_patched_out(program: Any, tools: Any, challenge: bytes) -> None:
    want = program.baseline(0, challenge, "guard_integrity")
    ret = tools.RET.get(program.elf.machine)
    if ret is None:
        pytest.skip(f"no patch for machine {program.elf.machine}")
    fn = program.functions()["kata_refuse"]
    run = program.ask(0, challenge, exe=program.patched([(fn.offset, ret)]), timeout=5)
    run.todo("guard_integrity")
    assert not right_answer_in(run, want), (
        "main.c's kata_refuse replaced by `ret` (so the failed check's verdict is ignored), and "
        f"the program still printed the right HMAC ({run.describe()})"
    )


@pytest.mark.kata_gate(
    "the running program answered after a byte of its code changed in memory since the last request"
)
def test_integrity_code_changed_in_memory_between_requests(
    program: Any, tools: Any, challenge: bytes
) -> None:
    want = program.baseline(1, challenge, "guard_integrity")
    fn = program.functions()["kata_unused_diagnostics"]
    off = fn.offset + random_for("poke").randrange(fn.size)
    with program.serve() as server:
        first = server.ask(f"1 {challenge.hex()}")
        assert first == want, f"guard_integrity: first answer of --serve is wrong: {first!r}"
        server.poke(off, 0x20)
        second = server.ask(f"1 {challenge.hex()}")
        run = server.finish()
    run.todo("guard_integrity")
    assert second is None and run.returncode != 0, (
        f"guard_integrity: after byte {off:#x} of kata_unused_diagnostics changed in the running "
        f"program's memory, the next request got {second!r}: hash the code as mapped, at every "
        f"call ({run.describe()})"
    )
    assert "integrity" in run.stderr, f"the refusal does not name integrity: {run.describe()}"


def test_integrity_unsealed_program_refuses(program: Any, tools: Any, challenge: bytes) -> None:
    program.baseline(0, challenge, "guard_integrity")
    sec = program.elf.section(".kata_seal")
    exe = program.patched([(sec.offset, b"unsealed: run tamper.py seal it")])
    run = program.ask(0, challenge, exe=exe)
    run.todo("guard_integrity")
    assert tools.refused(run, "integrity"), (
        f"guard_integrity: a program whose .kata_seal holds the placeholder did not refuse: "
        f"{run.describe()}"
    )


def test_integrity_many_requests_all_answered(program: Any, kata_random: Any) -> None:
    with program.serve() as server:
        for _ in range(12):
            i = kata_random.randrange(len(program.secrets))
            c = kata_random.randbytes(kata_random.randint(1, 64))
            got = server.ask(f"{i} {c.hex()}")
            if got is None:
                break
            assert got == program.answer(i, c), (
                f"guard_integrity/guard_secret: --serve answered {got!r} for secret {i}, "
                f"challenge {c.hex()}"
            )
        run = server.finish()
    run.todo("guard_integrity", "guard_secret")
    run.must_not_crash()
    assert got is not None and run.returncode == 0, f"a request went unanswered: {run.describe()}"


# --------------------------------------------------------------------------- tracer
@pytest.mark.kata_gate("the program refused to answer with no tracer attached")
def test_tracer_no_false_positive(program: Any, tools: Any, kata_random: Any) -> None:
    for i in range(len(program.secrets)):
        c = kata_random.randbytes(16)
        run = program.ask(i, c)
        run.todo("guard_tracer")
        run.must_not_crash()
        if run.returncode == 99:  # guard_secret is a stub: the checks passed
            run.todo("guard_secret")
        assert run.returncode == 0, f"guard_tracer: refused with no tracer: {run.describe()}"
    # a long run with few file descriptors: a check that leaks one per call ends up refusing
    with program.serve(nofile=24) as server:
        answers = [server.ask(f"0 {c.hex()}") for _ in range(48)]
        run = server.finish()
    run.todo("guard_tracer")
    run.must_not_crash()
    for k, got in enumerate(answers):
        assert got == program.answer(0, c), (
            f"guard_tracer: request {k + 1} of a --serve run limited to 24 open files got "
            f"{got!r} (does a check leave a file open?): {run.describe()}"
        )


@pytest.mark.kata_gate("the program answered under gdb")
def test_tracer_under_gdb(program: Any, tools: Any, challenge: bytes) -> None:
    program.checks_pass(2, challenge, "guard_tracer")
    run = tools.gdb_run(program, "2", challenge.hex())
    run.todo("guard_tracer")
    status = tools.gdb_exit_status(run)
    assert program.answer(2, challenge) not in run.stdout and status not in (0, None), (
        f"guard_tracer: under `gdb -batch -ex run` the program answered (exit status {status}): "
        f"{run.describe()}"
    )
    assert "tracer" in run.stdout + run.stderr, (
        f"the refusal does not name tracer: {run.describe()}"
    )


@pytest.mark.kata_gate("the program answered under strace -f")
def test_tracer_under_strace(program: Any, tools: Any, challenge: bytes) -> None:
    program.checks_pass(0, challenge, "guard_tracer")
    run = tools.strace_run(program, "0", challenge.hex())
    run.todo("guard_tracer")
    run.must_not_crash("the program under strace -f")
    assert tools.refused(run, "tracer"), f"guard_tracer: under strace -f: {run.describe()}"


@pytest.mark.kata_gate(
    "the program answered as the tracee of a tracer that is neither gdb nor strace"
)
def test_tracer_under_a_plain_ptrace_tracer(program: Any, tools: Any, challenge: bytes) -> None:
    program.checks_pass(1, challenge, "guard_tracer")
    run = tools.ptrace_run(program, "1", challenge.hex())
    run.todo("guard_tracer")
    run.must_not_crash("the program traced by the test")
    assert tools.refused(run, "tracer"), (
        f"guard_tracer: traced by the test process itself (PTRACE_TRACEME, a python tracer): "
        f"{run.describe()}"
    )


@pytest.mark.kata_gate("the program answered after a tracer attached between two requests")
def test_tracer_attached_between_requests(program: Any, tools: Any, challenge: bytes) -> None:
    want = program.baseline(0, challenge, "guard_tracer")
    with program.serve() as server:
        first = server.ask(f"0 {challenge.hex()}")
        assert first == want, f"guard_tracer: first answer of --serve is wrong: {first!r}"
        server.attach()
        second = server.ask(f"0 {challenge.hex()}")
        run = server.finish()
    run.todo("guard_tracer")
    assert second is None, (
        f"guard_tracer: a tracer attached (PTRACE_SEIZE, main.c's attach) after the first answer, and the next "
        f"request got {second!r}: read TracerPid at every call ({run.describe()})"
    )
    assert "tracer" in run.stderr, f"the refusal does not name tracer: {run.describe()}"


# --------------------------------------------------------------------------- strings
def test_strings_every_secret_fresh_challenges(program: Any, kata_random: Any) -> None:
    with program.serve() as server:
        for i in range(len(program.secrets)):
            for _ in range(3):
                c = kata_random.randbytes(kata_random.randint(1, 100))
                got = server.ask(f"{i} {c.hex()}")
                if got is None:
                    break
                assert got == program.answer(i, c), (
                    f"guard_secret({i}): the HMAC of challenge {c.hex()} is {got!r}, expected "
                    f"{program.answer(i, c)} (the secret decoded wrong)"
                )
        run = server.finish()
    run.todo("guard_secret")
    run.must_not_crash()
    assert run.returncode == 0, f"guard_secret: --serve ended early: {run.describe()}"


@pytest.mark.kata_gate("guard_secret returned bytes for a secret index out of range")
def test_strings_index_out_of_range(program: Any, challenge: bytes) -> None:
    program.baseline(0, challenge)
    for i in (len(program.secrets), len(program.secrets) + 7, -1):
        run = program.ask(i, challenge)
        run.must_not_crash()
        assert run.returncode == 2 and run.stdout == "", (
            f"guard_secret({i}) must return -1 for an index out of range: {run.describe()}"
        )


@pytest.mark.kata_gate("`strings -a -n 4` on the program shows a secret")
def test_strings_strings_tool(program: Any, tools: Any, challenge: bytes) -> None:
    program.baseline(0, challenge)
    strings = tools.need_tool("strings")
    out = subprocess.run(
        [strings, "-a", "-n", "4", str(program.path)], capture_output=True, timeout=60, check=True
    ).stdout
    for i, s in enumerate(program.secrets):
        assert s not in out, f"guard_secret: `strings -a -n 4` shows secret {i} ({s.decode()})"


def encodings(secret: bytes) -> dict[str, bytes]:
    return {
        "ASCII": secret,
        "UTF-16LE": secret.decode().encode("utf-16-le"),
        "UTF-16BE": secret.decode().encode("utf-16-be"),
        "reversed": secret[::-1],
    }


@pytest.mark.kata_gate(
    "a piece of a secret is in the program file as plain, UTF-16 or reversed text"
)
def test_strings_no_plain_piece(program: Any, challenge: bytes) -> None:
    program.baseline(0, challenge)
    for i, s in enumerate(program.secrets):
        for name, enc in encodings(s).items():
            step = 2 if name.startswith("UTF") else 1
            for j in range(0, len(enc) - PIECE * step + 1, step):
                piece = enc[j : j + PIECE * step]
                assert piece not in program.data, (
                    f"guard_secret: {PIECE} characters of secret {i} ({s.decode()}) are in the "
                    f"program file as {name} text at byte {program.data.find(piece):#x}"
                )


@pytest.mark.kata_gate(
    "a secret is in the program file with its bytes spread out at a fixed stride"
)
def test_strings_no_strided_copy(program: Any, challenge: bytes) -> None:
    program.baseline(0, challenge)
    for i, s in enumerate(program.secrets):
        for stride in range(2, 9):
            for start in range(stride):
                column = program.data[start::stride]
                for name, enc in (("forward", s), ("reversed", s[::-1])):
                    at = column.find(enc)
                    assert at < 0, (
                        f"guard_secret: secret {i} ({s.decode()}) is in the program file {name}, "
                        f"one byte every {stride}, from byte {start + at * stride:#x}"
                    )


@pytest.mark.kata_gate("a secret is in the program file with its bytes only reordered")
def test_strings_no_shuffled_copy(program: Any, challenge: bytes) -> None:
    program.baseline(0, challenge)
    data = np.frombuffer(program.data, np.uint8)
    for i, s in enumerate(program.secrets):
        values, want = np.unique(np.frombuffer(s, np.uint8), return_counts=True)
        # counts of each of the secret's byte values in every window of len(s) bytes
        cum = np.zeros((len(values), len(data) + 1), np.int32)
        np.cumsum(data[None, :] == values[:, None], axis=1, out=cum[:, 1:])
        windows = cum[:, len(s) :] - cum[:, : -len(s)]
        hits = np.flatnonzero((windows == want[:, None]).all(axis=0))
        assert len(hits) == 0, (
            f"guard_secret: the {len(s)} bytes at {int(hits[0]):#x} of the program file are "
            f"secret {i} ({s.decode()}) reordered: {program.data[hits[0] : hits[0] + len(s)]!r}"
        )


def masked_hits(data: bytes, secret: bytes) -> list[str]:
    """Where secret lies in data under a byte mask a known-plaintext scan recovers: XOR or
    subtraction with a mask of period 1..8, or with a mask that steps by a constant."""
    b = np.frombuffer(data, np.uint8)
    s = np.frombuffer(secret, np.uint8)
    if len(b) < len(s):
        return []
    win = sliding_window_view(b, len(s))
    hits = []
    for name, d in (("XOR", win ^ s), ("subtraction", win - s)):
        step = d[:, 1:] - d[:, :-1]
        found = (step == step[:, :1]).all(axis=1)
        for p in range(1, 9):
            found |= (d[:, p:] == d[:, :-p]).all(axis=1)
        for at in np.flatnonzero(found)[:3]:
            hits.append(f"{name} mask {bytes(d[at][:8]).hex()}... at byte {int(at):#x}")
    return hits


@pytest.mark.kata_gate(
    "a secret is in the program file under a repeating (period <= 8) or constant-step byte mask"
)
def test_strings_no_simple_mask(program: Any, challenge: bytes) -> None:
    program.baseline(0, challenge)
    for i, s in enumerate(program.secrets):
        hits = masked_hits(program.data, s)
        assert not hits, f"guard_secret: secret {i} ({s.decode()}) is recoverable: {hits}"


# --------------------------------------------------------------------------- failsafe
def exact_refusal(run: Any, check: str) -> None:
    run.todo("guard_fail")
    assert run.returncode == 3, (
        f"guard_fail: exit status {run.returncode}, expected 3: {run.describe()}"
    )
    assert run.stdout == "", f"guard_fail: the refusing program wrote to stdout: {run.describe()}"
    lines = [s for s in run.stderr.splitlines() if not s.startswith("KATA_TODO")]
    assert not any("atexit" in s for s in lines), (
        f"guard_fail: atexit handlers ran (exit() instead of _exit()): {run.describe()}"
    )
    assert len(lines) == 1 and check in lines[0], (
        f"guard_fail: expected one line on stderr naming the {check} check, got {lines}"
    )
    assert run.stderr.endswith("\n"), f"guard_fail: the line on stderr has no newline: {lines}"


@pytest.mark.kata_gate("a detected tampering did not end with status 3, one line and empty stdout")
def test_failsafe_integrity_refusal_exact(program: Any, challenge: bytes, kata_random: Any) -> None:
    program.baseline(0, challenge, "guard_integrity", "guard_fail")
    fn = program.functions()["kata_unused_diagnostics"]
    exe = program.patched({fn.offset + kata_random.randrange(fn.size): kata_random.randint(1, 255)})
    run = program.ask(0, challenge, exe=exe)
    run.todo("guard_integrity")
    exact_refusal(run, "integrity")


def test_failsafe_tracer_refusal_exact(program: Any, tools: Any, challenge: bytes) -> None:
    program.checks_pass(0, challenge, "guard_tracer", "guard_fail")
    run = tools.ptrace_run(program, "0", challenge.hex())
    run.todo("guard_tracer")
    run.must_not_crash("the program traced by the test")
    exact_refusal(run, "tracer")


CORE_CALL = re.compile(r"\b(?:setrlimit|prlimit64)\((?:[^,]*, )?RLIMIT_CORE, \{rlim_cur=0[,}]")


def core_lowered_under_strace(program: Any, tools: Any, challenge: bytes) -> str | None:
    """Where no program can be started with a core limit above 0: the program's system calls
    under strace; None when guard_harden set RLIMIT_CORE's soft limit to 0, else what it did."""
    strace = tools.need_tool("strace")
    log = program.tmp / "harden.strace"
    run = program.ask(
        0,
        challenge,
        wrapper=[strace, "-f", "-q", "-e", "trace=setrlimit,prlimit64", "-o", str(log)],
    )
    text = log.read_text(errors="replace") if log.exists() else ""
    if "+++ exited with" not in text and "+++ killed by" not in text:
        pytest.skip(f"strace could not trace the program here: {run.describe()}")
    calls = [s for s in text.splitlines() if "RLIMIT_CORE" in s]
    return None if any(CORE_CALL.search(s) for s in calls) else f"its RLIMIT_CORE calls: {calls}"


@pytest.mark.kata_gate(
    "the running program, started with core files allowed, is dumpable or may write a core file"
)
def test_failsafe_not_dumpable_no_core(program: Any, tools: Any, challenge: bytes) -> None:
    """Started with RLIMIT_CORE above 0 (where the machine lets the tests raise it; else the
    setrlimit/prlimit64 call is looked for under strace): guard_harden must lower it to 0."""
    settable = tools.core_limit_settable()
    with program.serve(core=True) as server:
        answer = server.ask(f"0 {challenge.hex()}")
        probe = server.ask("probe")
        try:
            limits = Path(f"/proc/{server.pid}/limits").read_text()
        except OSError:
            limits = ""
        run = server.finish()
    run.todo("guard_harden")
    run.todo("guard_secret")
    run.must_not_crash()
    assert answer == program.answer(0, challenge), f"wrong answer {answer!r}: {run.describe()}"
    start = f"RLIMIT_CORE {tools.CORE_LIMIT}" if settable else "the machine's RLIMIT_CORE"
    assert probe == "dumpable=0 core=0", (
        f"guard_harden: the running program, started with {start}, says {probe!r}"
    )
    core = [s for s in limits.splitlines() if s.startswith("Max core file size")]
    assert not core or core[0].split()[4] == "0", (
        f"guard_harden: started with {start}, /proc/PID/limits says {core}"
    )
    if not settable:  # the core limit was 0 already: look at what guard_harden asked for
        missing = core_lowered_under_strace(program, tools, challenge)
        assert missing is None, (
            f"guard_harden: run under strace, the program never set RLIMIT_CORE's soft limit to "
            f"0 (setrlimit or prlimit64); {missing}"
        )


MEMORY_PIECE = 12  # a 12-byte run of a secret never occurs by chance in a process's memory


def pieces(secret: bytes) -> list[bytes]:
    """Overlapping 12-byte pieces covering the secret: a freed heap chunk keeps all but its first
    16 bytes, a half-overwritten stack slot keeps a part."""
    starts = sorted({*range(0, len(secret) - MEMORY_PIECE + 1, 4), len(secret) - MEMORY_PIECE})
    return [secret[j : j + MEMORY_PIECE] for j in starts]


@pytest.mark.kata_gate("a decoded secret was still in the program's memory after its answer")
def test_failsafe_secrets_wiped_after_use(program: Any, kata_random: Any) -> None:
    with program.serve() as server:
        seal = bytes(
            b ^ 0xA5 for b in program.elf.data[program.elf.section(".kata_seal").offset :][:32]
        )
        sanity = server.ask("scan " + seal.hex())
        found: dict[tuple[int, int], list[str | None]] = {}
        for i in range(len(program.secrets)):
            c = kata_random.randbytes(24)
            got = server.ask(f"{i} {c.hex()}")
            if got is None:
                break
            assert got == program.answer(i, c), f"guard_secret({i}): wrong answer {got!r}"
            for k, s in enumerate(program.secrets[: i + 1]):
                needles = [bytes(b ^ 0xA5 for b in p).hex() for p in pieces(s)]
                found[(i, k)] = [server.ask("scan " + n) for n in needles]
        run = server.finish()
    run.todo("guard_secret")
    run.must_not_crash()
    assert sanity not in (None, "found 0", "found -1"), (
        f"main.c's scan does not work here: {sanity}"
    )
    n = len(program.secrets)
    left = {k: v for k, v in found.items() if any(r != "found 0" for r in v)}
    assert len(found) == n * (n + 1) // 2 and not left, (
        f"guard_secret: after answering secret i, the program's readable memory still holds "
        f"{MEMORY_PIECE}-byte pieces of secret k ((i, k): scan results, one per piece): "
        f"{left or found} ({run.describe()})"
    )


# --------------------------------------------------------------------------- red team rt18
DRIVER_C = r"""/* The tests' driver: guard_secret called directly, with a digest the test chooses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"

__attribute__((section(".kata_seal"), used, aligned(32)))
unsigned char kata_seal[GUARD_DIGEST_SIZE] = "unsealed: run tamper.py seal it";

/* main.c's other global functions, so that guard.c finds the same symbols as in the program */
__attribute__((noinline, used)) void kata_refuse(const char *check) {
    if (guard_fail(check) != GUARD_OK) _exit(3);
}
__attribute__((noinline, used)) long kata_unused_diagnostics(const char *text, long rounds) {
    return (long)strlen(text) * rounds;
}

int main(int argc, char **argv) {
    unsigned char digest[GUARD_DIGEST_SIZE], out[GUARD_SECRET_MAX];
    if (argc != 3 || strlen(argv[2]) != 2 * GUARD_DIGEST_SIZE) return 2;
    for (int i = 0; i < GUARD_DIGEST_SIZE; i++) { /* argv[2]: the digest XOR kata_seal */
        unsigned v;
        if (sscanf(argv[2] + 2 * i, "%2x", &v) != 1) return 2;
        digest[i] = kata_seal[i] ^ (unsigned char)v;
    }
    int n = guard_secret(atoi(argv[1]), digest, out, sizeof out);
    printf("%d ", n);
    for (int i = 0; i < n && i < (int)sizeof out; i++) printf("%02x", out[i]);
    printf("\n");
    return 0;
}
"""


@pytest.mark.kata_gate(
    "guard_secret, called with a digest that differs from kata_seal, returned the secret: the "
    "digest is not an input of the decoding"
)
def test_integrity_digest_is_an_input_of_guard_secret(
    program: Any, kata: Any, tools: Any, kata_random: Any, tmp_path: Any
) -> None:
    """guard_secret linked into a driver of the tests' own (sealed, no main.c), called with the
    seal (must decode) and with fresh digests that differ from it (must not)."""
    from harness.native.build import build_executable

    (tmp_path / "driver.c").write_text(DRIVER_C)
    built = build_executable(
        [tmp_path / "driver.c", kata.source("guard.c"), kata.source("sha256.c")],
        include_dirs=[program.tmp / "inc", *kata.search_path],
    ).path
    exe = tmp_path / "driver"
    exe.write_bytes(Path(built).read_bytes())
    exe.chmod(0o755)
    seal = program.tamper.seal(exe)

    def decode(index: int, diff: bytes) -> tuple[Any, bytes | None]:
        run = program.run(str(index), diff.hex(), exe=exe)
        run.todo("guard_secret")
        run.must_not_crash(f"guard_secret({index}, ...) in the tests' driver")
        parts = run.stdout.split()
        if parts[:1] == ["-99"]:  # GUARD_TODO: guard_secret is still a stub
            from harness import todo

            todo("guard_secret answered GUARD_TODO")
        if run.returncode != 0 or len(parts) not in (1, 2):
            return run, None
        return run, bytes.fromhex(parts[1]) if len(parts) == 2 else b""

    for index, secret in enumerate(program.secrets):
        run, got = decode(index, bytes(32))
        if got != secret:
            raise tools.Precondition(
                f"guard_secret({index}, kata_seal, ...) called from the tests' driver (guard.c "
                f"with sha256.c and a main of the tests', sealed) does not give secret {index}, "
                f"so a wrong digest proves nothing: {run.describe()}"
            )
        at = kata_random.randrange(32)
        diffs = {
            f"kata_seal with byte {at} XOR 0x01": bytes(0x01 if i == at else 0 for i in range(32)),
            "an all-zero digest": seal,
            "a random digest": bytes(kata_random.getrandbits(8) for _ in range(32)),
        }
        for what, diff in diffs.items():
            _run, got = decode(index, diff)
            assert got != secret, (
                f"guard_secret({index}, digest, ...) called with {what} instead of kata_seal "
                f"returned secret {index} itself: the decoding must depend on the digest "
                f"argument (guard.h), or patching the branch of one check gives the secret"
            )


@pytest.mark.kata_gate(
    "guard_tracer said OK with a tracer attached and no file descriptor free: a check that cannot "
    "open /proc/self/status let the program answer"
)
def test_tracer_fails_safe_when_it_cannot_tell(program: Any, tools: Any, challenge: bytes) -> None:
    """After the first answer (whatever the guard opened or cached by then), a tracer attaches
    (main.c's attach) and the running program is left no free file descriptor (RLIMIT_NOFILE
    lowered to 3 with prlimit): a guard that can still read TracerPid (a descriptor it kept)
    sees the tracer, one that cannot must fail safe; either way the next request is refused."""
    import resource

    want = program.answer(1, challenge)
    traced, second = False, None
    with program.serve() as server:
        first = server.ask(f"1 {challenge.hex()}")
        if first == want:
            traced = server.attach(required=False)
            try:
                held = [
                    os.readlink(f"/proc/{server.pid}/fd/{fd}")
                    for fd in os.listdir(f"/proc/{server.pid}/fd")
                ]
            except OSError:
                held = []
            if not traced and any(h.endswith("/status") for h in held):
                pytest.skip(
                    "ptrace is not allowed on this machine and the program keeps "
                    "/proc/self/status open: with no tracer, it can still tell"
                )
            resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (3, 3))
            second = server.ask(f"1 {challenge.hex()}")
        run = server.finish()
    run.todo("guard_tracer", "guard_secret")
    if first != want:
        raise tools.Precondition(
            f"the program in --serve mode does not answer secret 1 right, so the test proves "
            f"nothing: got {first!r} ({run.describe()})"
        )
    tracer = "a tracer attached (main.c's attach) after the first answer and " if traced else ""
    assert second != want, (
        f"guard_tracer: with {tracer}no file descriptor free in the running program "
        f"(RLIMIT_NOFILE lowered to 3: /proc/self/status cannot be opened again), the next "
        f"request still got the right HMAC: fail safe when you cannot tell ({run.describe()})"
    )


@pytest.mark.kata_gate(
    "after its answers, the program's readable memory still holds a secret written as hex, "
    "base64, base32, reversed or UTF-16"
)
def test_failsafe_no_encoded_copy_left(program: Any, tools: Any, kata_random: Any) -> None:
    """Every secret answered, then the memory scanned for 12-byte pieces of each secret as hex
    text (lower and upper case), base64, base32, reversed, and UTF-16LE: a copy kept in another
    form."""
    challenge = bytes(kata_random.getrandbits(8) for _ in range(16))
    found: dict[str, list[str]] = {}
    with program.serve() as server:
        answers = [server.ask(f"{i} {challenge.hex()}") for i in range(len(program.secrets))]
        for k, s in enumerate(program.secrets):
            forms = {
                "hex": s.hex().encode(),
                "HEX": s.hex().upper().encode(),
                "base64": base64.b64encode(s),
                "base32": base64.b32encode(s),
                "reversed": s[::-1],
                "UTF-16LE": s.decode().encode("utf-16-le"),
            }
            for name, form in forms.items():
                for at in (0, (len(form) - 12) // 2, len(form) - 12):
                    piece = form[at : at + 12]
                    got = server.ask("scan " + bytes(b ^ 0xA5 for b in piece).hex())
                    if got != "found 0":
                        found.setdefault(f"secret {k} as {name}", []).append(f"{got} at {at}")
        run = server.finish()
    run.todo("guard_secret", "guard_harden")
    for i, got in enumerate(answers):
        if got != program.answer(i, challenge):
            raise tools.Precondition(
                f"the program does not answer secret {i} right, so a scan proves nothing: "
                f"{run.describe()}"
            )
    assert not found, (
        f"guard_secret: after answering every secret, the program's readable memory holds "
        f"12-byte pieces of a secret in another form: {found}"
    )


GAP = 16  # the largest gap between two consecutive bytes of an in-order copy


def in_order_with_gaps(data: bytes, s: bytes, gap: int = GAP) -> int | None:
    """A file offset where s's bytes appear in order, each 1..gap bytes after the one before
    (plain, strided, cut into short pieces); None when nowhere."""
    where: dict[int, list[int]] = {}
    for b in set(s):
        out, at = [], data.find(bytes([b]))
        while at >= 0:
            out.append(at)
            at = data.find(bytes([b]), at + 1)
        where[b] = out
    reach = {p: p for p in where[s[0]]}  # position of the last byte matched -> start
    for b in s[1:]:
        nxt: dict[int, int] = {}
        cands = where[b]
        for p, start in reach.items():
            k = bisect_left(cands, p + 1)
            while k < len(cands) and cands[k] <= p + gap:
                nxt.setdefault(cands[k], start)
                k += 1
        reach = nxt
        if not reach:
            return None
    return min(reach.values())


def substitution(data: bytes, s: bytes, need: int = 5) -> tuple[int, int] | None:
    """(offset, period): len(s) bytes of the file that are s under byte-for-byte substitutions
    that repeat with a period of 1 to 4 (each byte value of s at positions j = r mod period
    always stored as the same other value, distinct values distinct: rol, nibble swap,
    multiply, an S-box, XOR or add a constant, alternating ones), pinned down by at least
    `need` repeated bytes of s; None when nowhere or when s repeats too few bytes to tell."""
    import numpy as np

    a = np.frombuffer(data, dtype=np.uint8)
    n = len(a) - len(s) + 1
    for period in range(1, 5):
        first: dict[tuple[int, int], int] = {}
        pairs = []
        for i, b in enumerate(s):
            key = (i % period, b)
            if key in first:
                pairs.append((first[key], i))
            else:
                first[key] = i
        if len(pairs) < need or n <= 0:
            continue
        ok = np.ones(n, dtype=bool)
        for i, j in pairs:
            ok &= a[i : i + n] == a[j : j + n]
        for o in np.flatnonzero(ok):
            window = data[o : o + len(s)]
            m: dict[tuple[int, int], int] = {}
            pairs_ok = all(
                m.setdefault((i % period, x), y) == y
                for i, (x, y) in enumerate(zip(s, window, strict=True))
            )
            if pairs_ok and all(
                len({y for (r, _x), y in m.items() if r == c})
                == len([1 for (r, _x) in m if r == c])
                for c in range(period)
            ):
                return int(o), period
    return None


def periodic_mask(
    data: bytes, s: bytes, longest: int = 64, spare: int = 8
) -> tuple[int, int, str] | None:
    """(offset, period, op): s stored XOR or minus a byte mask that repeats with a period up to
    `longest` (any, for a secret of at most 64 bytes), as long as at least `spare` bytes of s
    pin the mask down."""
    import numpy as np

    a = np.frombuffer(data, dtype=np.uint8).astype(np.int16)
    sv = np.frombuffer(s, dtype=np.uint8).astype(np.int16)
    n = len(a) - len(s) + 1
    for p in range(1, min(longest, len(s) - spare) + 1):
        for op in ("xor", "sub"):
            ok = np.ones(n, dtype=bool)
            for i in range(p, len(s)):
                x, y = a[i : i + n], a[i - p : i - p + n]
                if op == "xor":
                    ok &= (x ^ sv[i]) == (y ^ sv[i - p])
                else:
                    ok &= ((x - sv[i]) & 255) == ((y - sv[i - p]) & 255)
                if not ok.any():
                    break
            hits = np.flatnonzero(ok)
            if len(hits):
                return int(hits[0]), p, op
    return None


@pytest.mark.kata_gate(
    "a secret is in the program file in order with short gaps, under byte-for-byte "
    "substitutions, or under a repeating mask of any period that leaves 8 bytes to pin it"
)
def test_strings_no_simple_encoding(program: Any, challenge: bytes) -> None:
    """The file scanned for each secret (forward and reversed): in order with gaps of 1 to 16
    bytes (strides, short pieces), under any byte-for-byte substitution (rol, nibble swap,
    multiply, an S-box), and XOR or minus a mask repeating with any period that leaves 8 bytes
    of the secret to pin it down."""
    program.ask(0, challenge).todo("guard_secret")
    data = program.data
    for k, s in enumerate(program.secrets):
        for form, t in (("", s), (" reversed", s[::-1])):
            at = in_order_with_gaps(data, t)
            assert at is None, (
                f"secret {k}{form} ({len(s)} bytes) is in the program file in order, each byte "
                f"1 to {GAP} bytes after the one before, from file offset {at:#x}: plain, only "
                f"spread out or cut into short pieces"
            )
            sub = substitution(data, t)
            assert sub is None, (
                f"secret {k}{form} is in the program file at offset {sub[0]:#x} under "
                f"byte-for-byte substitutions repeating every {sub[1]} byte(s) (each byte value "
                f"of the secret always stored as the same other value): a keyless encoding a "
                f"known-plaintext scan undoes"
            )
            hit = periodic_mask(data, t)
            assert hit is None, (
                f"secret {k}{form} is in the program file at offset {hit[0]:#x} {hit[2]} a byte "
                f"mask that repeats every {hit[1]} bytes: a short repeating key"
            )


CELL = 1024  # the widest cell a secret's bytes (or chunks of them) may be spread over
CHUNK = 8  # the longest run of consecutive bytes in one cell
TEXT_PIECE = 16  # characters of an encoded secret that never occur by chance


def text_forms(s: bytes) -> dict[str, bytes]:
    """The secret written as text: hex, base64, base32, base85 (each alignment of the secret
    against the encoder's groups), a piece of TEXT_PIECE characters of each."""
    out: dict[str, bytes] = {"hex": s.hex().encode(), "HEX": s.hex().upper().encode()}
    for name, enc, group in (
        ("base64", base64.b64encode, 3), ("base64url", base64.urlsafe_b64encode, 3),
        ("base32", base64.b32encode, 5), ("base85", base64.b85encode, 4),
        ("ascii85", base64.a85encode, 4),
    ):  # fmt: skip
        for a in range(group):
            t = s[a:]
            full = enc(t[: len(t) - len(t) % group])
            out[f"{name} from byte {a}"] = full
    return {k: v[:TEXT_PIECE] for k, v in out.items() if len(v) >= TEXT_PIECE}


def in_cells(data: bytes, s: bytes) -> tuple[int, int, int] | None:
    """(offset, cell, run): s's bytes in order, `run` (1..CHUNK) consecutive bytes at the start
    of each `cell` bytes (run+1..CELL): one byte per struct, or short pieces at a fixed pitch."""
    a = np.frombuffer(data, np.uint8)
    starts = np.flatnonzero(a == s[0])
    L = len(s)
    for run in range(1, CHUNK + 1):
        cells = np.arange(run + 1, CELL + 1)
        last = starts[:, None] + ((L - 1) // run) * cells[None, :] + (L - 1) % run
        ok = last < len(a)
        for j in range(1, L):
            idx = starts[:, None] + (j // run) * cells[None, :] + j % run
            ok &= a[np.minimum(idx, len(a) - 1)] == s[j]
            if not ok.any():
                break
        else:
            o, c = np.argwhere(ok)[0]
            return int(starts[o]), int(cells[c]), run
    return None


def _rotations() -> np.ndarray:
    """Byte maps of the rotations by 0..7 bits, and of the bit reversal followed by each: XOR-
    linear (T(x) ^ T(y) == T(x ^ y)), so one XOR of the file per period finds the candidates."""
    x = np.arange(256, dtype=np.uint16)
    rev = np.array([int(f"{v:08b}"[::-1], 2) for v in range(256)], dtype=np.uint16)
    maps = [((v << r) | (v >> (8 - r))) & 255 for v in (x, rev) for r in range(8)]
    return np.array(maps, dtype=np.uint8)


ROTATIONS = _rotations()


def rotated_mask(data: bytes, s: bytes, spare: int = 10) -> tuple[int, int] | None:
    """(offset, period): s stored as T_r(s[j] ^ k_r) or T_r(s[j]) ^ k_r for r = j mod period,
    each T_r a bit rotation (of the bit-reversed byte, or not) and k_r a key byte: a periodic
    key with per-position bit rotations, any period that leaves `spare` bytes to pin it."""
    a = np.frombuffer(data, np.uint8)
    L = len(s)
    n = len(a) - L + 1
    sv = np.frombuffer(s, np.uint8)
    inverse = np.argsort(ROTATIONS, axis=1).astype(np.uint8)  # T^-1 byte maps
    for p in range(1, L - spare + 1):
        cand = np.arange(n)
        for i in range(L - p):  # a necessary condition per pair: T(x ^ y) == s[i] ^ s[i+p]
            allowed = np.zeros(256, bool)
            allowed[inverse[:, s[i] ^ s[i + p]]] = True
            cand = cand[allowed[a[cand + i] ^ a[cand + i + p]]]
            if len(cand) < 64:
                break
        if not len(cand):
            continue
        w = a[cand[:, None] + np.arange(L)[None, :]]  # (C, L)
        d = inverse[:, w] ^ sv  # (T, C, L): T^-1(stored) ^ s, constant in a class under its T
        ok = np.ones(len(cand), bool)
        for r in range(p):
            cls = d[:, :, r::p]
            if cls.shape[2] > 1:
                ok &= (cls == cls[:, :, :1]).all(axis=2).any(axis=0)
        if ok.any():
            return int(cand[np.flatnonzero(ok)[0]]), p
    return None


def neighbour_decodings(data: bytes) -> dict[str, bytes]:
    """The file decoded as a chain: each byte XOR, or minus, the byte before it (a secret
    stored as e[j] = s[j] ^ e[j-1] is plain in the first)."""
    a = np.frombuffer(data, np.uint8)
    return {
        "each byte XOR the one before": (a[1:] ^ a[:-1]).tobytes(),
        "each byte minus the one before": (a[1:] - a[:-1]).tobytes(),
    }


@pytest.mark.kata_gate(
    "a secret is in the program file as hex, base32, base64 or base85 text, in order in cells up "
    "to 1024 bytes apart, chained to the byte before, or under a repeating key with bit rotations"
)
def test_strings_no_cheap_decoding(program: Any, challenge: bytes) -> None:
    """The file scanned for each secret (forward and reversed) under decodings a reverse
    engineer tries next: text encodings (hex, base32, base64, base85, every alignment), one
    byte or a run of up to 8 at the start of each cell of up to 1024 bytes, each byte chained to
    the one before (XOR or difference), and a key of any period that leaves 10 bytes to pin it
    with each position's bits rotated (or reversed) a fixed way per position modulo the period."""
    program.ask(0, challenge).todo("guard_secret")
    data = program.data
    chains = neighbour_decodings(data)
    for k, s in enumerate(program.secrets):
        for form, t in (("", s), (" reversed", s[::-1])):
            text = [name for name, piece in text_forms(t).items() if piece in data]
            assert not text, (
                f"guard_secret: secret {k}{form} is in the program file as {text[0]} text "
                f"({text_forms(t)[text[0]].decode()}...): text any reader decodes"
            )
            cells = in_cells(data, t)
            assert cells is None, (
                f"guard_secret: secret {k}{form} ({len(s)} bytes) is in the program file in "
                f"order, {cells[2]} byte(s) at the start of each {cells[1]}-byte cell from file "
                f"offset {cells[0]:#x}: plain, only spread out"
            )
            hit = rotated_mask(data, t)
            assert hit is None, (
                f"guard_secret: secret {k}{form} is in the program file at offset {hit[0]:#x} "
                f"under a key repeating every {hit[1]} bytes, with at most a fixed bit rotation "
                f"(or reversal) per position modulo {hit[1]}: a repeating key"
            )
            for name, decoded in chains.items():
                hit = rotated_mask(decoded, t[1:])
                assert hit is None, (
                    f"guard_secret: secret {k}{form} is in the program file at offset "
                    f"{hit[0]:#x} chained, {name} (then a key repeating every {hit[1]} bytes "
                    f"at most): a chain undone with one pass over the file"
                )
