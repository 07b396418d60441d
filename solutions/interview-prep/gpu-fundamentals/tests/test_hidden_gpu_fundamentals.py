"""Hidden tests of gpu-fundamentals: one per question. A wrong answer's message names the
question and what kind of answer it is not (an option it does not offer, a wrong order, a number
outside the tolerance) without giving the answer away; a right one is explained."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.testing import no_peeking


# ------------------------------------------------------------------------------ no peeking
def ask(answers: Any, name: str) -> Any:
    """answers.<name>(), checked to read no frame or code object while it answers (the expected
    values are constants of this file: red team rt26's frame-constants, traceback-order)."""
    with no_peeking(answers, __file__) as peeks:
        got = getattr(answers, name)()
    assert not peeks, (
        f"{name}: read frames or code objects while answering ({', '.join(sorted(set(peeks)))}): "
        "the answer comes from the question, not from the test that checks it"
    )
    return got


def options_only(name: str, got: Any, options: tuple[str, ...]) -> None:
    """An answer made of the module's option strings, each once."""
    unknown = [x for x in got if x not in options]
    assert not unknown, f"{name}: {unknown} are not among the question's options {options}"
    assert len(set(got)) == len(list(got)), f"{name}: an option appears twice in {got}"


def ordered(name: str, got: Any, options: tuple[str, ...], want: list[str]) -> None:
    assert isinstance(got, list), f"{name}: return a list of the options, got {type(got).__name__}"
    options_only(name, got, options)
    assert len(got) == len(options), (
        f"{name}: order all {len(options)} options, got {len(got)} of them"
    )
    # No count of the options in place: with it, 7 options fall in ~8 runs of guessing
    # (red team rt26's harvest-messages).
    assert got == want, f"{name}: not the right order"


# ------------------------------------------------------------------------------ untouched
def _fingerprint(namespace: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    """Which object each name of this module is, with each function's code and defaults."""
    return {
        k: (id(v), id(getattr(v, "__code__", None)), id(getattr(v, "__defaults__", None)))
        for k, v in namespace.items()
        if not k.startswith(("@", "__"))
    }


def _make_untouched() -> Callable[..., None]:
    sealed: list[dict[str, tuple[int, int, int]]] = []

    def untouched(seal: bool = False) -> None:
        """This module's checks run as written: learner code that rebinds or adds a name here
        through sys.modules (check_all to a no-op, REL to 1e9: red team rt26's
        rebind-check-all) or swaps a function's code fails the test. Each test holds this
        function as a default argument, so rebinding its name changes nothing."""
        now = _fingerprint(globals())
        if seal:
            sealed.append(now)
            return
        changed = sorted(k for k in now.keys() | sealed[0].keys() if now.get(k) != sealed[0].get(k))
        assert not changed, f"the hidden tests' names {changed} were rebound before the test ran"

    return untouched


_untouched = _make_untouched()


# ------------------------------------------------------------------------------ architecture
def test_bandwidth_order(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    want = [
        "register files (all SMs)",
        "shared memory (all SMs)",
        "L2 cache",
        "HBM3",
        "NVLink 4 (all links)",
        "PCIe Gen5 x16",
        "InfiniBand NDR port",
    ]
    ordered("bandwidth_order", ask(answers, "bandwidth_order"), questions.BANDWIDTH_OPTIONS, want)
    kata_explain(
        "Each level down is roughly an order of magnitude: the register files feed every FMA "
        "(hundreds of TB/s across 132 SMs), shared memory/L1 ~30 TB/s aggregate, L2 ~10 TB/s, "
        "HBM3 3.35 TB/s, NVLink 4 450 GB/s per direction (18 links), PCIe Gen5 x16 64 GB/s per "
        "direction, one InfiniBand NDR port 400 Gb/s = 50 GB/s. Every kernel optimisation moves "
        "traffic up this list; every distributed-training trick hides the bottom of it."
    )


def test_ridge_point(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    got = ask(answers, "ridge_point")
    assert isinstance(got, int | float), f"ridge_point: return a number, got {got!r}"
    assert got == pytest.approx(295.2, rel=0.02), (
        f"ridge_point: {got!r} FLOP/byte is not the ridge point of the numbers in the question"
    )
    kata_explain(
        "989e12 FLOP/s / 3.35e12 B/s = 295 FLOP per byte: a kernel needs ~295 FLOPs for every "
        "byte it moves from HBM to be compute-bound. A bf16 GEMV (decode at batch 1) does ~1 "
        "FLOP/byte, so it runs at ~0.3 % of peak FLOPs: decode is memory-bound until the batch "
        "is in the hundreds."
    )


def test_units_per_sm(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    got = ask(answers, "per_sm_units")
    assert isinstance(got, set | frozenset), f"per_sm_units: return a set, got {got!r}"
    options_only("per_sm_units", got, questions.PER_SM_OPTIONS)
    want = {"register file", "warp schedulers", "tensor cores", "L1 / shared memory"}
    assert got == want, "per_sm_units: not the right set (an option missing or one too many)"
    kata_explain(
        "Each SM has a 256 KB register file, 4 warp schedulers (one per sub-partition), 4 "
        "tensor cores and a 256 KB L1/shared memory. The L2 (50 MB on H100), the HBM memory "
        "controllers, the copy engines that run cudaMemcpyAsync and the GigaThread engine that "
        "hands blocks to SMs are shared by the whole chip."
    )


def test_divergence_issue_slots(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    got = ask(answers, "divergence_issue_slots")
    assert type(got) is int, f"divergence_issue_slots: return an int, got {got!r}"
    assert got == 20, f"divergence_issue_slots: {got} is not the number of issue slots"
    kata_explain(
        "Both sides of the branch run, one after the other, with the other half of the lanes "
        "masked off: 10 + 6, then 4 together = 20, not 14. Independent thread scheduling "
        "(Volta+) lets the paths interleave but not run at once: divergence within a warp always "
        "costs the sum of the paths."
    )


# ------------------------------------------------------------------------------ cuda
def test_occupancy_blocks_per_sm(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    got = ask(answers, "blocks_per_sm")
    assert type(got) is int, f"blocks_per_sm: return an int, got {got!r}"
    assert got == 3, f"blocks_per_sm: {got} blocks is not what the tightest limit allows"
    kata_explain(
        "Registers: 72 x 32 = 2304 per warp (a multiple of 256 already), 8 warps = 18,432 per "
        "block, 65,536 / 18,432 = 3. Threads allow 8, blocks 32, shared memory 228 / (40 + 1) = 5. "
        "The tightest limit wins: 3 blocks = 24 warps = 37.5 % occupancy. Cutting to 64 "
        "registers (__launch_bounds__ or -maxrregcount) gives 4."
    )


def test_sectors_per_request(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    got = ask(answers, "sectors_per_request")
    assert isinstance(got, list) and len(got) == 4, (
        f"sectors_per_request: return four counts (stride 1, 2, 8, 32), got {got!r}"
    )
    assert got == [4, 8, 32, 32], "sectors_per_request: not every one of the 4 counts is right"
    kata_explain(
        "Stride 1: 32 x 4 = 128 contiguous bytes = 4 sectors (fully coalesced). Stride 2: the "
        "warp spans 256 bytes = 8 sectors, half of each wasted. Stride 8 (32 bytes apart) and "
        "beyond: every thread touches its own sector, 32 sectors for 128 useful bytes — 8x the "
        "traffic. This is why structure-of-arrays beats array-of-structures on GPUs."
    )


def test_banks_conflict_ways(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    got = ask(answers, "bank_conflict_ways")
    assert isinstance(got, list) and len(got) == 4, (
        f"bank_conflict_ways: return four counts (W = 32, 33, 64, 16), got {got!r}"
    )
    assert got == [32, 1, 32, 16], "bank_conflict_ways: not every one of the 4 is right"
    kata_explain(
        "t[lane][0] is word lane x W; its bank is (lane x W) mod 32. W = 32 or 64: every lane "
        "in bank 0, 32-way. W = 33: banks 0..31, conflict-free (the padding trick of the tiled "
        "transpose). W = 16: banks 0 and 16 only, 16 lanes each: 16-way."
    )


def test_nvcc_order(
    answers: Any, questions: Any, kata_explain: Any, untouched: Callable[..., None] = _untouched
) -> None:
    untouched()
    want = [
        "C preprocessor",
        "cudafe++: splits host and device code",
        "cicc: NVVM IR to PTX",
        "ptxas: PTX to SASS",
        "fatbinary: packs SASS and PTX",
        "host compiler (gcc) builds the host code",
    ]
    ordered("nvcc_order", ask(answers, "nvcc_order"), questions.NVCC_OPTIONS, want)
    kata_explain(
        "nvcc -dryrun shows it: cpp, cudafe++ (splits the .cu into a device part and a host "
        ".cudafe1.cpp), cicc (EDG's C++ front end to NVVM IR, then the LLVM-based NVVM optimiser and back end to PTX), ptxas (PTX to SASS for "
        "each -arch), fatbinary (SASS + PTX into one blob), then the host compiler builds the "
        "host code, which embeds that fatbinary and registers its kernels at start-up."
    )


# The tests' own line last: every name above and every test is in the seal.
_untouched(seal=True)
