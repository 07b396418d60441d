"""Rollout order and the rollback plan of a rollout's dependency graph (task `rollback`)."""

from __future__ import annotations

from .release import Change, RollbackPlan, Undo


def _graph(changes: list[Change]) -> dict[str, Change]:
    """The changes by id; ValueError for a repeated id, a dependency on no change, or a cycle
    (naming a change on it)."""
    by_id: dict[str, Change] = {}
    for c in changes:
        if c.id in by_id:
            raise ValueError(f"change {c.id!r} appears twice")
        by_id[c.id] = c
    for c in changes:
        for d in c.after:
            if d not in by_id:
                raise ValueError(f"change {c.id!r} needs {d!r}, which is no change of the rollout")
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in by_id:
        if state.get(start):
            continue
        stack = [(start, iter(by_id[start].after))]
        state[start] = 1
        while stack:
            node, deps = stack[-1]
            nxt = next(deps, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                raise ValueError(f"the rollout has a cycle through {nxt!r}")
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(by_id[nxt].after)))
    return by_id


def rollout_order(changes: list[Change]) -> list[str]:
    """Every change id once, each after all the changes it needs (`after`); among the changes
    that are ready, the one listed first in `changes` goes first.

    ValueError when the graph is no rollout: a cycle (the message names a change on it), an id
    listed twice, or an `after` naming an id that is not in `changes`."""
    by_id = _graph(changes)
    done: set[str] = set()
    order: list[str] = []
    while len(order) < len(by_id):
        for c in changes:
            if c.id not in done and all(d in done for d in c.after):
                done.add(c.id)
                order.append(c.id)
                break
    return order


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
    by_id = _graph(changes)
    for a in applied:
        if a not in by_id:
            raise ValueError(f"applied change {a!r} is no change of the rollout")
        for d in by_id[a].after:
            if d not in applied:
                raise ValueError(f"{a!r} is applied but {d!r}, which it needs, is not")
    kept: dict[str, str] = {}
    todo = [c.id for c in changes if c.id in applied and not c.reversible]
    for cid in todo:
        kept[cid] = f"irreversible: {by_id[cid].why}"
    while todo:
        cid = todo.pop()
        for d in by_id[cid].after:
            if d not in kept:
                kept[d] = f"needed by {cid}"
                todo.append(d)
    undo_ids = [c.id for c in changes if c.id in applied and c.id not in kept]
    # Dependents first: the reverse of a rollout order of the changes being undone.
    forward = rollout_order(
        [Change(i, tuple(d for d in by_id[i].after if d in undo_ids)) for i in undo_ids]
    )
    return RollbackPlan([Undo(i, by_id[i].check) for i in reversed(forward)], kept)
