"""GIVEN (not graded): a sequential model of CUDA's ordering rules, and the checks the tests
run against your scheduler with it.

`Model` records the same calls as the scheduler and works out, for every op, the ops it must
wait for: the op before it on its stream; for a wait on an event, the event's last record
*before* the wait; for an op on the legacy default stream (0), the last op of every blocking
stream; for an op on a blocking stream, the last op of stream 0. (Waits on values are dynamic
and not modelled here; the deadlock tests check them by hand.)

`check_run` checks the real run: every kernel started after every kernel it (transitively)
depends on had ended. `check_clock` checks the logical clock: every op starts after its
dependencies end, a kernel takes exactly its duration, records and waits take none, and no more
than `workers` kernels run at any tick.

`workloads()` is the hypothesis strategy of random call sequences (streams with flags and
priorities, the legacy default and per-thread streams, kernels, records and waits) and
`replay(...)` runs one on a scheduler and the model together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from .sched import BLOCKING, LEGACY_DEFAULT, PER_THREAD, Scheduler


@dataclass
class Model:
    blocking: dict[Any, bool] = field(default_factory=lambda: {LEGACY_DEFAULT: True})
    last: dict[Any, int] = field(default_factory=dict)
    events: dict[int, int] = field(default_factory=dict)
    deps: list[set[int]] = field(default_factory=list)
    kernel: list[bool] = field(default_factory=list)
    duration: list[int] = field(default_factory=list)

    def stream(self, sid: int, flags: int) -> None:
        self.blocking[sid] = flags == BLOCKING

    def op(
        self, stream: int, is_kernel: bool, duration: int = 0, extra: set[int] | None = None
    ) -> int:
        key = stream
        if stream == PER_THREAD:
            self.blocking.setdefault(PER_THREAD, True)  # cudaStreamPerThread is blocking
        deps = set(extra or ())
        if key in self.last:
            deps.add(self.last[key])
        if key == LEGACY_DEFAULT:
            deps |= {o for s, o in self.last.items() if s != key and self.blocking[s]}
        elif self.blocking[key] and LEGACY_DEFAULT in self.last:
            deps.add(self.last[LEGACY_DEFAULT])
        self.deps.append(deps)
        self.kernel.append(is_kernel)
        self.duration.append(duration)
        op = len(self.deps) - 1
        self.last[key] = op
        return op

    def kernel_ancestors(self, op: int) -> set[int]:
        seen: set[int] = set()
        todo = list(self.deps[op])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(self.deps[d])
        return {d for d in seen if self.kernel[d]}


def check_run(model: Model, s: Scheduler) -> None:
    for op, is_kernel in enumerate(model.kernel):
        if not is_kernel:
            continue
        start, end, _ = s.ran(op)
        assert start > 0 and end > start, f"kernel op {op} did not run (start {start}, end {end})"
        for a in model.kernel_ancestors(op):
            a_end = s.ran(a)[1]
            assert a_end < start, (
                f"kernel op {op} started (#{start}) before op {a}, which it waits for, ended "
                f"(#{a_end})"
            )


def check_clock(model: Model, s: Scheduler) -> list[tuple[int, int]]:
    times = [s.times(op) for op in range(len(model.deps))]
    for op, (start, end) in enumerate(times):
        want = model.duration[op] if model.kernel[op] else 0
        assert end - start == want, f"op {op}: runs {start}..{end}, its duration is {want}"
        for d in model.deps[op]:
            assert start >= times[d][1], (
                f"op {op} starts at tick {start}, before op {d} it waits for ends ({times[d][1]})"
            )
    edges = sorted(
        [(t[0], 1) for op, t in enumerate(times) if model.kernel[op] and t[1] > t[0]]
        + [(t[1], -1) for op, t in enumerate(times) if model.kernel[op] and t[1] > t[0]]
    )
    running = 0
    for tick, delta in edges:  # ends (-1) sort before starts (+1) at the same tick
        running += delta
        assert running <= s.workers, f"{running} kernels at tick {tick} on {s.workers} workers"
    return times


CALL = st.one_of(
    st.tuples(st.just("stream"), st.sampled_from([0, 1]), st.integers(-2, 0)),
    st.tuples(st.just("event")),
    st.tuples(
        st.just("launch"), st.integers(0, 7), st.integers(1, 5), st.sampled_from([0, 0, 200])
    ),
    st.tuples(st.just("record"), st.integers(0, 3), st.integers(0, 7)),
    st.tuples(st.just("wait"), st.integers(0, 7), st.integers(0, 3)),
)


def workloads() -> Any:
    return st.lists(CALL, min_size=1, max_size=30)


def replay(s: Scheduler, calls: list[tuple[Any, ...]]) -> Model:
    """Run `calls` on `s` and on a model; stream index i picks from [0, per-thread, created...]."""
    m = Model()
    streams: list[int] = [LEGACY_DEFAULT, PER_THREAD]
    events: list[int] = []
    for call in calls:
        kind = call[0]
        if kind == "stream":
            sid = s.stream(call[1], call[2])
            m.stream(sid, call[1])
            streams.append(sid)
        elif kind == "event":
            events.append(s.event())
        elif kind == "launch":
            stream = streams[call[1] % len(streams)]
            s.launch(stream, duration=call[2], sleep_us=call[3])
            m.op(stream, True, call[2])
        elif events and kind == "record":
            e, stream = events[call[1] % len(events)], streams[call[2] % len(streams)]
            s.record(e, stream)
            m.events[e] = m.op(stream, False)
        elif events and kind == "wait":
            stream, e = streams[call[1] % len(streams)], events[call[2] % len(events)]
            s.wait_event(stream, e)
            m.op(stream, False, 0, {m.events[e]} if e in m.events else set())
    return m
