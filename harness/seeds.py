"""The run seed: every grading run draws its hidden tests' inputs fresh, reproducibly.

One integer per run (``--kata-seed=N`` / ``$KATA_SEED``, else drawn fresh when the run starts),
set by :mod:`harness.plugin` on the controller and handed to every xdist worker, so all the
processes of a run draw from the same seed. Each test gets its own stream, derived from the run
seed and the test's key (``<file name>::<test name with parameters>``: the same whichever
directory pytest runs from), so inputs change from run to run and reproduce with the seed.

No pytest here: kata tests read it through :mod:`harness.testing` (``kata_rng``/``kata_random``
fixtures, ``rng()``, ``random_for()``), the plugin sets it.
"""

from __future__ import annotations

import hashlib
import os
import random
import secrets
from typing import Any

ENV = "KATA_SEED"
VERIFY_SEED = 1  # `kata verify`'s (and so CI's) seed unless told otherwise: no grade by luck
SEED_LIMIT = 1_000_000  # fresh seeds are six digits at most: easy to read back and type

_run_seed: int | None = None
_current_key: str = ""  # the running test's key, while a kata test runs in this process


def parse(value: str | int) -> int:
    """A seed as given on the command line or in $KATA_SEED: a non-negative integer."""
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a seed: give a non-negative integer") from None
    if seed < 0:
        raise ValueError(f"{seed} is not a seed: give a non-negative integer")
    return seed


def fresh() -> int:
    """A new seed, from the operating system's randomness."""
    return secrets.randbelow(SEED_LIMIT)


def from_env() -> int | None:
    """$KATA_SEED, or None when it is unset or empty."""
    value = os.environ.get(ENV, "").strip()
    return parse(value) if value else None


def set_run_seed(seed: int) -> None:
    global _run_seed
    _run_seed = int(seed)


def run_seed() -> int:
    """This run's seed. Outside a pytest run (a test module imported by hand): $KATA_SEED, else 0."""
    if _run_seed is None:
        return from_env() or 0
    return _run_seed


def set_current_key(key: str) -> None:
    global _current_key
    _current_key = key


def current_key() -> str:
    return _current_key


def derive(key: str = "", seed: int | None = None) -> int:
    """A 64-bit seed for `key` (a test's key, or any label) from the run seed (or `seed`)."""
    base = run_seed() if seed is None else seed
    digest = hashlib.sha256(f"gpu-katas:{base}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def rng(key: str | None = None) -> Any:
    """A ``numpy.random.Generator`` for `key` (default: the running test's key)."""
    import numpy as np

    return np.random.default_rng(derive(_current_key if key is None else key))


def random_for(key: str | None = None) -> random.Random:
    """A ``random.Random`` for `key` (default: the running test's key)."""
    return random.Random(derive(_current_key if key is None else key))


def reproduce_hint(seed: int | None = None) -> str:
    return f"reproduce with --kata-seed={run_seed() if seed is None else seed}"


__all__ = [
    "ENV",
    "VERIFY_SEED",
    "current_key",
    "derive",
    "fresh",
    "from_env",
    "parse",
    "random_for",
    "reproduce_hint",
    "rng",
    "run_seed",
    "set_current_key",
    "set_run_seed",
]
