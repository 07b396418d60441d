"""Public tests: the two worked examples of the README. Every other question is checked by a
hidden test, which names the question when the answer is not right and explains it when it is."""

from __future__ import annotations

from typing import Any


def test_worked_warp_size(answers: Any, kata_explain: Any) -> None:
    assert answers.warp_size() == 32, "warp_size: the README's worked example says 32"
    kata_explain("32 threads share one instruction stream on every NVIDIA GPU since Tesla (2006).")


def test_worked_max_threads(answers: Any, kata_explain: Any) -> None:
    assert answers.max_threads_per_block() == 1024, (
        "max_threads_per_block: the README's worked example says 1024"
    )
    kata_explain("1024 threads (32 warps) per block on every architecture since Fermi (sm_20).")
