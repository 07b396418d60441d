"""Fixtures of the distributed-serving tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def answers(kata: Any) -> Any:
    """answers.py (yours): one function per question."""
    return kata.module("answers")


@pytest.fixture(scope="module")
def questions(kata: Any) -> Any:
    """questions.py (given): the options the questions offer."""
    return kata.module("questions")
