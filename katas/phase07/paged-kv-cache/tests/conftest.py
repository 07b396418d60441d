"""Fixtures of the paged-kv-cache tests: your modules and the given ones, loaded once per module."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def kv_math(kata: Any) -> Any:
    """kv_math.py (yours): task "memory"."""
    return kata.module("kv_math")


@pytest.fixture(scope="module")
def models(kata: Any) -> Any:
    """models.py (given): published model configurations and GPUs."""
    return kata.module("models")


@pytest.fixture(scope="module")
def bm(kata: Any) -> Any:
    """block_manager.py (yours): tasks "blocks", "prefix", "fork", "swap", "speed"."""
    return kata.module("block_manager")


@pytest.fixture(scope="module")
def kv_store(kata: Any) -> Any:
    """kv_store.py (given): KVPool, NoFreeBlocks, transfer."""
    return kata.module("kv_store")


@pytest.fixture(scope="module")
def checker(kata: Any) -> Any:
    """checker.py (given): the state machine that checks a BlockManager against a model."""
    return kata.module("checker")


@pytest.fixture(scope="module")
def replay(kata: Any) -> Any:
    """replay.py (given): runs a request trace through a BlockManager."""
    return kata.module("replay")


@pytest.fixture(scope="module")
def read_back() -> Any:
    """read_back(manager, pool, seq_id): the sequence's tokens, read through its block table
    from `pool` (the tests never ask your manager for the tokens themselves)."""

    def read(manager: Any, pool: Any, seq_id: int) -> list[int]:
        n, bs = manager.num_tokens(seq_id), pool.block_size
        table = manager.block_table(seq_id)
        assert len(table) == -(-n // bs), f"{n} tokens in {len(table)} blocks of {bs}: {table}"
        out: list[int] = []
        for i, block in enumerate(table):
            out += pool.read(block, 0, min(bs, n - i * bs))
        return out

    return read
