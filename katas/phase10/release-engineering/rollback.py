"""Rollout order and the rollback plan of a rollout's dependency graph (task `rollback`)."""

from __future__ import annotations

from harness import todo

from .release import Change, RollbackPlan


def rollout_order(changes: list[Change]) -> list[str]:
    """Every change id once, each after all the changes it needs (`after`); among the changes
    that are ready, the one listed first in `changes` goes first.

    ValueError when the graph is no rollout: a cycle (the message names a change on it), an id
    listed twice, or an `after` naming an id that is not in `changes`."""
    todo("rollout_order")


def rollback_plan(changes: list[Change], applied: set[str]) -> RollbackPlan:
    """How to undo the `applied` changes (a set: their order is not known).

    An applied change stays (`kept`) when it is irreversible ("irreversible: <why>") or when a
    change that stays needs it ("needed by <id>"). Every other applied change is undone, each
    after every applied change that needs it (directly or not) is undone: dependents first.
    Each Undo carries the change's check. ValueError when `changes` is no rollout (as
    rollout_order: a cycle, a repeated id, an unknown dependency), when `applied` names an
    unknown change, or when an applied change needs one that was not applied (not a state a
    rollout leaves).
    """
    todo("rollback_plan")
