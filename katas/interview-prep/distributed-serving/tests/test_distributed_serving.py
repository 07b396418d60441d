"""Public tests: the README's worked example. Every other question is checked by a hidden test
on fresh random inputs, which names the function and the input when the answer is not right and
explains the answer when it is."""

from __future__ import annotations

from typing import Any


def test_worked_kv_llama_70b(answers: Any, kata_explain: Any) -> None:
    got = answers.kv_bytes_per_token(80, 8, 128, 2)
    assert type(got) is int, f"kv_bytes_per_token: return an int, got {got!r}"
    assert got == 327_680, (
        f"kv_bytes_per_token(80, 8, 128, 2): the README's worked example says 327680, got {got}"
    )
    kata_explain(
        "K and V (2) x 80 layers x 8 KV heads x 128 dims x 2 bytes = 327,680 bytes = 320 KiB per "
        "token: a 4k-token sequence holds 1.25 GiB, so an 80 GB GPU that also holds 140 GB / 8 of "
        "weights fits a few dozen such sequences. GQA (8 KV heads for 64 query heads) made it 8x "
        "smaller than multi-head attention would."
    )


def test_worked_kv_small_model(answers: Any) -> None:
    got = answers.kv_bytes_per_token(32, 32, 128, 2)
    assert got == 524_288 and type(got) is int, (
        f"kv_bytes_per_token(32, 32, 128, 2) (Llama-2-7B, no GQA): expected 524288, got {got!r}"
    )
