"""Public tests of anti-tamper: your guard.c built into the given program (main.c), sealed, and
attacked the way the hidden tests attack it, on a few cases each. The hidden tests draw fresh
secrets, challenges and patch offsets every run, and add the attacks the README lists."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

EXIT_TAMPERED, EXIT_TODO = 3, 99


# --------------------------------------------------------------------------- integrity
def test_integrity_answers_when_untampered(program: Any, challenge: bytes) -> None:
    run = program.ask(0, challenge)
    run.todo("guard_integrity")
    run.must_not_crash()
    if run.returncode == EXIT_TODO:  # guard_secret is a stub: the checks passed, that is all
        run.todo("guard_secret")
    assert run.returncode == 0, f"the sealed, unchanged program refused: {run.describe()}"
    assert run.stdout.strip() == program.answer(0, challenge), f"wrong answer: {run.describe()}"


def test_integrity_refuses_a_changed_byte_of_uncalled_code(
    program: Any, tools: Any, challenge: bytes
) -> None:
    fn = program.functions()["kata_unused_diagnostics"]  # main.c never calls it
    exe = program.patched({fn.offset + fn.size // 2: 0x01})
    run = program.ask(0, challenge, exe=exe)
    run.todo("guard_integrity")
    assert tools.refused(run, "integrity"), (
        f"byte {fn.size // 2} of kata_unused_diagnostics changed, and the program did not "
        f"refuse: {run.describe()}"
    )


# --------------------------------------------------------------------------- tracer
def test_tracer_answers_without_a_tracer(program: Any, challenge: bytes) -> None:
    run = program.ask(1, challenge)
    run.todo("guard_tracer")
    run.must_not_crash()
    if run.returncode == EXIT_TODO:
        run.todo("guard_secret")
    assert run.returncode == 0, f"the program refused with no tracer attached: {run.describe()}"


def test_tracer_refuses_under_strace(program: Any, tools: Any, challenge: bytes) -> None:
    run = tools.strace_run(program, "1", challenge.hex())
    run.todo("guard_tracer")
    assert tools.refused(run, "tracer"), (
        f"under strace -f the program did not refuse: {run.describe()}"
    )


# --------------------------------------------------------------------------- strings
def test_strings_answers_hmac_of_each_secret(program: Any, challenge: bytes) -> None:
    for index in range(len(program.secrets)):
        run = program.ask(index, challenge)
        run.todo("guard_secret")
        run.must_not_crash()
        want = program.answer(index, challenge)
        assert run.stdout.strip() == want, f"secret {index}: expected {want}: {run.describe()}"


def test_strings_strings_finds_no_secret(program: Any, tools: Any, challenge: bytes) -> None:
    run = program.ask(0, challenge)
    run.todo("guard_secret")
    strings = tools.need_tool("strings")
    out = subprocess.run(
        [strings, "-a", "-n", "4", str(program.path)], capture_output=True, timeout=60, check=True
    ).stdout
    found = [s.decode() for s in program.secrets if s in out]
    assert not found, f"`strings -a -n 4` on the program shows secret(s) {found}"


# --------------------------------------------------------------------------- failsafe
def test_failsafe_refusal_is_status_3_and_one_line(program: Any, challenge: bytes) -> None:
    fn = program.functions()["kata_unused_diagnostics"]
    run = program.ask(0, challenge, exe=program.patched({fn.offset + 3: 0x80}))
    run.todo("guard_integrity", "guard_fail")
    assert run.returncode == EXIT_TAMPERED, f"expected exit status 3: {run.describe()}"
    assert run.stdout == "", f"the refusing program wrote to stdout: {run.describe()}"
    lines = [s for s in run.stderr.splitlines() if not s.startswith("KATA_TODO")]
    assert len(lines) == 1 and "integrity" in lines[0], f"one line naming integrity: {lines}"


def test_failsafe_hardened_at_start(program: Any) -> None:
    # started with core files allowed (RLIMIT_CORE above 0) where the machine lets the tests
    with program.serve(core=True) as server:
        probe = server.ask("probe")
        run = server.finish()
    run.todo("guard_harden")
    assert probe == "dumpable=0 core=0", (
        f"guard_harden: the program, started with RLIMIT_CORE above 0 where allowed, reports "
        f"{probe!r} after it ({run.describe()})"
    )


@pytest.mark.parametrize("index", [0])
def test_failsafe_secret_wiped_after_use(program: Any, challenge: bytes, index: int) -> None:
    with program.serve() as server:
        answer = server.ask(f"{index} {challenge.hex()}")
        found = server.ask("scan " + bytes(b ^ 0xA5 for b in program.secrets[index]).hex())
        run = server.finish()
    run.todo("guard_secret", "guard_harden")
    assert answer == program.answer(index, challenge), f"wrong answer: {run.describe()}"
    assert found == "found 0", f"after the answer, secret {index} is still in memory: {found}"
