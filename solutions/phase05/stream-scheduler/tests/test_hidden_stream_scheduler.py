"""Hidden tests of stream-scheduler: exact logical clocks against a model, more default-stream
and deadlock cases, TSan again, and the gates against the shortcuts in ../shortcuts/."""

from __future__ import annotations

import heapq
import random
import re
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import todo
from harness.native.fixtures import NativeBuilder
from harness.testing import hidden_settings, random_for

FLAGS = ("-std=c++17", "-pthread")


def before(s: Any, a: int, b: int) -> bool:
    return 0 < s.ran(a)[1] < s.ran(b)[0]


def run_seed() -> int:
    """A seed for this test's drawn programs, from the run seed (--kata-seed reproduces it);
    every failure message names it."""
    return random_for().randrange(1 << 32)


def asap(m: Any) -> list[tuple[int, int]]:
    """The logical times of checker.Model's ops with a worker for every stream: each op starts
    when the last op it depends on ends (tick 0 without one), no later."""
    times: list[tuple[int, int]] = []
    for op, deps in enumerate(m.deps):
        start = max((times[d][1] for d in deps), default=0)
        times.append((start, start + (m.duration[op] if m.kernel[op] else 0)))
    return times


def check_no_extra_waits(m: Any, s: Any, what: str) -> None:
    """With as many workers as streams, no op waits for more than the model's dependencies."""
    want = asap(m)
    got = [s.times(op) for op in range(len(m.deps))]
    late = [(op, got[op], want[op]) for op in range(len(want)) if got[op] != want[op]]
    assert not late, (
        f"{what}: ops (op, logical times, expected) {late[:4]} start later than their "
        "dependencies end, with a worker free for every stream: they wait for work they do "
        "not depend on"
    )


# --------------------------------------------------------------------------- streams
@pytest.mark.kata_gate(
    "an op after wait_event runs before the event's record has completed, or waits for more "
    "than that record (later work of its stream): random programs of records and waits across "
    "non-blocking streams, drawn at run time"
)
def test_streams_waits_follow_the_events_last_record(new: Any, sched: Any, checker: Any) -> None:
    """Programs of kernels, records and waits on three non-blocking streams (no implicit
    synchronization: every order between them comes from events), on 4 workers. Each has at
    least one wait on another stream's record of a running kernel. Checked on real threads
    (check_run) and on the logical clock (check_clock) against checker.Model."""
    seed = run_seed()
    r = random.Random(seed)
    for program in range(6):
        s, m = new(4), checker.Model()
        streams = [s.stream(sched.NON_BLOCKING) for _ in range(3)]
        for sid in streams:
            m.stream(sid, sched.NON_BLOCKING)
        events = [s.event() for _ in range(2)]
        calls: list[str] = []
        forced = r.randrange(8)
        later = r.randrange(8, 14)  # a record, then more work on its stream, then the wait
        for i in range(14):
            if i == later:
                a, b = r.sample(streams, 2)
                e = r.choice(events)
                s.record(e, a)
                m.events[e] = m.op(a, False)
                s.launch(a, duration=4, sleep_us=2000)
                m.op(a, True, 4)
                s.wait_event(b, e)
                m.op(b, False, 0, {m.events[e]})
                s.launch(b, duration=1)
                m.op(b, True, 1)
                calls.append(f"record({e}, {a}); launch({a}, 4); wait({b}, {e}); launch({b}, 1)")
                continue
            if i == forced:  # a kernel on a, recorded; b waits for it, then launches
                a, b = r.sample(streams, 2)
                e = r.choice(events)
                s.launch(a, duration=3, sleep_us=3000)
                m.op(a, True, 3)
                s.record(e, a)
                m.events[e] = m.op(a, False)
                s.wait_event(b, e)
                m.op(b, False, 0, {m.events[e]})
                s.launch(b, duration=1)
                m.op(b, True, 1)
                calls.append(f"launch({a}, 3); record({e}, {a}); wait({b}, {e}); launch({b}, 1)")
                continue
            kind, st_, e = (
                r.choice(["launch", "launch", "record", "wait"]),
                r.choice(streams),
                r.choice(events),
            )
            if kind == "launch":
                d = r.randint(1, 4)
                s.launch(st_, duration=d, sleep_us=r.choice([0, 1000]))
                m.op(st_, True, d)
            elif kind == "record":
                s.record(e, st_)
                m.events[e] = m.op(st_, False)
            else:
                s.wait_event(st_, e)
                m.op(st_, False, 0, {m.events[e]} if e in m.events else set())
            calls.append(f"{kind}({st_}, {e})")
        s.synchronize()
        where = f"(seed {seed}, program {program}: {'; '.join(calls)})"
        try:
            checker.check_run(m, s)
            checker.check_clock(m, s)
            check_no_extra_waits(m, s, "wait_event waits for the event's record only")
        except AssertionError as err:
            raise AssertionError(f"wait_event: {err} {where}") from None


@pytest.mark.kata_gate(
    "more kernels run at once on real threads than there are workers, or on more threads: "
    "1 to 6 workers, more ready kernels than workers"
)
@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_streams_never_more_kernels_at_once_than_workers(new: Any, workers: int) -> None:
    """2 x workers + 1 streams, 2 kernels of 2 ms each: at the start more kernels are ready
    than there are workers (the logical clock shows `workers` of them starting at tick 0), but
    no more than `workers` may run at once (kernels.cpp counts them), on at most `workers`
    distinct threads."""
    s = new(workers)
    streams = [s.stream() for _ in range(2 * workers + 1)]
    ks = [s.launch(st_, duration=2, sleep_us=2000) for _ in range(2) for st_ in streams]
    s.synchronize()
    at_zero = sum(s.times(k)[0] == 0 for k in ks)
    assert at_zero == workers, (
        f"the logical clock, {workers} workers: {at_zero} of {len(ks)} ready kernels start at "
        f"tick 0, expected {workers}"
    )
    most, threads = s.max_concurrent(), len({s.ran(k)[2] for k in ks})
    assert most <= workers and threads <= workers, (
        f"{workers} workers: {most} kernels ran at the same time, on {threads} distinct "
        f"threads (at most {workers} each): a pool of {workers} worker threads runs the kernels"
    )


# --------------------------------------------------------------------------- the clock model
def priorities(calls: list[tuple[Any, ...]], n_ops: int) -> list[int]:
    """Each op's stream priority, following checker.replay's stream choice."""
    prio: list[int] = []
    streams, events = [0, 0], 0  # priorities of [legacy, per-thread, created ...]
    for call in calls:
        if call[0] == "stream":
            streams.append(call[2])
        elif call[0] == "event":
            events += 1
        elif call[0] == "launch":
            prio.append(streams[call[1] % len(streams)])
        elif events and call[0] == "record":
            prio.append(streams[call[2] % len(streams)])
        elif events and call[0] == "wait":
            prio.append(streams[call[1] % len(streams)])
    assert len(prio) == n_ops, f"the model counted {len(prio)} ops, the scheduler {n_ops}"
    return prio


def model_times(model: Any, prio: list[int], workers: int) -> list[tuple[int, int]]:
    n = len(model.deps)
    left = [len(d) for d in model.deps]
    after: list[list[int]] = [[] for _ in range(n)]
    for op, deps in enumerate(model.deps):
        for d in deps:
            after[d].append(op)
    times = [(-1, -1)] * n
    ready = {(prio[op], op) for op in range(n) if left[op] == 0}
    busy: list[tuple[int, int]] = []
    now = 0

    def complete(op: int) -> None:
        times[op] = (times[op][0], now)
        for a in after[op]:
            left[a] -= 1
            if left[a] == 0:
                ready.add((prio[a], a))

    while True:
        instant = sorted(x for x in ready if not model.kernel[x[1]])
        while instant:
            ready.discard(instant[0])
            times[instant[0][1]] = (now, now)
            complete(instant[0][1])
            instant = sorted(x for x in ready if not model.kernel[x[1]])
        while len(busy) < workers and ready:
            p, op = min(ready)
            ready.discard((p, op))
            times[op] = (now, -1)
            heapq.heappush(busy, (now + model.duration[op], op))
        if not busy:
            return times
        now = busy[0][0]
        while busy and busy[0][0] == now:
            complete(heapq.heappop(busy)[1])


@pytest.mark.kata_gate(
    "the logical clock disagrees with list scheduling (free workers take the ready kernels of the "
    "highest priority first, at most one per worker) on random workloads with 1-3 workers"
)
@hidden_settings(max_examples=60)
@given(data=st.data(), workers=st.sampled_from([1, 2, 3]))
def test_clock_exact_times(new: Any, checker: Any, data: Any, workers: int) -> None:
    calls = data.draw(checker.workloads())
    s = new(workers)
    model = checker.replay(s, calls)
    s.synchronize()
    want = model_times(model, priorities(calls, len(model.deps)), workers)
    got = [s.times(op) for op in range(len(model.deps))]
    assert got == want, (
        f"sched_times on {workers} workers: logical times {got}, list scheduling gives {want} "
        f"(calls {calls})"
    )


@pytest.mark.kata_gate(
    "the logical clock disagrees with list scheduling (free workers take the ready kernels of the "
    "highest priority first, at most one per worker) with more streams than workers"
)
def test_clock_more_streams_than_workers(new: Any, sched: Any, checker: Any) -> None:
    """Fresh random programs from the run seed: 4-6 non-blocking streams of random priorities,
    kernels of 1-4 ticks, on 2 or 3 workers, against list scheduling of checker.Model's ops."""
    seed = run_seed()
    r = random.Random(seed)
    for program in range(10):
        workers = r.choice((2, 3))
        s, m = new(workers), checker.Model()
        streams = {}
        for _ in range(r.randint(4, 6)):
            p = r.randint(-2, 0)
            sid = s.stream(sched.NON_BLOCKING, priority=p)
            m.stream(sid, sched.NON_BLOCKING)
            streams[sid] = p
        prio, calls = [], []
        for _ in range(r.randint(8, 16)):
            sid, d = r.choice(list(streams)), r.randint(1, 4)
            s.launch(sid, duration=d)
            m.op(sid, True, d)
            prio.append(streams[sid])
            calls.append(f"launch({sid} prio {streams[sid]}, {d})")
        s.synchronize()
        want = model_times(m, prio, workers)
        got = [s.times(op) for op in range(len(m.deps))]
        assert got == want, (
            f"sched_times on {workers} workers: logical times {got}, list scheduling gives {want} "
            f"(seed {seed}, program {program}: {'; '.join(calls)})"
        )


@pytest.mark.kata_gate(
    "the logical clock on 1 worker does not start ready kernels highest stream priority first"
    " (three streams of priorities 0, -1, -2)"
)
def test_clock_three_priorities_one_worker(new: Any) -> None:
    s = new(workers=1)
    a, b, c = s.stream(priority=0), s.stream(priority=-1), s.stream(priority=-2)
    ka, kb, kc = s.launch(a, duration=1), s.launch(b, duration=1), s.launch(c, duration=1)
    s.synchronize()
    got = [s.times(k)[0] for k in (kc, kb, ka)]
    assert got == [0, 1, 2], (
        f"the logical clock, 1 worker, priorities -2, -1, 0: the kernels start at {got} "
        "(highest priority first), expected [0, 1, 2]"
    )


# --------------------------------------------------------------------------- default stream
@pytest.mark.kata_gate("the legacy default stream does not synchronize with blocking streams")
def test_default_stream_two_blocking_streams_and_stream_zero(new: Any, sched: Any) -> None:
    s = new(workers=4)
    a, b = s.stream(), s.stream()
    k1 = s.launch(a, duration=3, sleep_us=20_000)
    k2 = s.launch(b, duration=2, sleep_us=20_000)
    k0 = s.launch(sched.LEGACY_DEFAULT, duration=1)
    k3 = s.launch(b, duration=1)
    s.synchronize()
    assert s.times(k0) == (3, 4), "stream 0 waits for both blocking streams"
    assert s.times(k3) == (4, 5), "a blocking stream waits for stream 0"
    assert before(s, k1, k0) and before(s, k2, k0) and before(s, k0, k3), (
        "on real threads: stream 0's kernel starts after both blocking streams' kernels end, "
        "and the blocking stream's next kernel after it"
    )


@pytest.mark.kata_gate("the legacy default stream does not synchronize with blocking streams")
def test_default_stream_per_thread_and_stream_zero_on_the_clock(new: Any, sched: Any) -> None:
    s = new(workers=4)
    k0 = s.launch(sched.LEGACY_DEFAULT, duration=4)
    k1 = s.launch(sched.PER_THREAD, duration=1)  # blocking: after stream 0's work
    nb = s.stream(sched.NON_BLOCKING)
    k2 = s.launch(nb, duration=1)  # not
    s.synchronize()
    got = [s.times(k) for k in (k0, k1, k2)]
    assert got == [(0, 4), (4, 5), (0, 1)], (
        f"the logical clock: stream 0, then the per-thread stream (blocking), and a "
        f"non-blocking stream: {got}, expected [(0, 4), (4, 5), (0, 1)]"
    )


@pytest.mark.kata_gate(
    "host threads share one per-thread default stream, or it is not a blocking stream of its "
    "own: 2 to 4 host threads, with and without the legacy default stream"
)
@pytest.mark.parametrize("threads", [2, 3, 4])
def test_default_stream_each_host_thread_has_its_own(new: Any, sched: Any, threads: int) -> None:
    """Each host thread launches 2 kernels of 3 ticks on cudaStreamPerThread, `threads` + 1
    workers: the threads' streams are independent (every first kernel at tick 0, every second
    at 3); a non-blocking stream's kernel runs beside them; then a kernel on the legacy default
    stream waits for every per-thread stream (blocking), and a per-thread kernel after it waits
    for stream 0."""
    s = new(threads + 1)
    mine: dict[int, list[int]] = {}
    lock = threading.Lock()
    go = threading.Barrier(threads)

    def host(t: int) -> None:
        go.wait()
        for _ in range(2):
            with lock:
                mine.setdefault(t, []).append(s.launch(sched.PER_THREAD, duration=3))

    hosts = [threading.Thread(target=host, args=(t,)) for t in range(threads)]
    for h in hosts:
        h.start()
    for h in hosts:
        h.join()
    nb = s.launch(s.stream(sched.NON_BLOCKING), duration=1)
    k0 = s.launch(sched.LEGACY_DEFAULT, duration=1)
    after = s.launch(sched.PER_THREAD, duration=1)  # this (the test's) thread's own stream
    s.synchronize()
    got = {t: [s.times(k) for k in ks] for t, ks in sorted(mine.items())}
    want = {t: [(0, 3), (3, 6)] for t in range(threads)}
    assert got == want, (
        f"cudaStreamPerThread from {threads} host threads on {threads + 1} workers: logical times "
        f"{got}, expected {want}: each host thread has its own in-order stream"
    )
    assert s.times(nb) == (0, 1), (
        f"a non-blocking stream's kernel, with a worker free, runs at {s.times(nb)}, expected "
        "(0, 1): it waits for nothing"
    )
    assert s.times(k0) == (6, 7) and s.times(after) == (7, 8), (
        f"the legacy default stream waits for every per-thread stream (they are blocking) and "
        f"a per-thread stream waits for it: stream 0's kernel {s.times(k0)}, expected (6, 7); "
        f"the per-thread kernel after it {s.times(after)}, expected (7, 8)"
    )


@pytest.mark.kata_gate(
    "the legacy default stream waits for other work than the earlier work of blocking streams, "
    "or they for other than its: random programs over stream 0, blocking and non-blocking "
    "streams, drawn at run time"
)
def test_default_stream_random_programs_wait_for_blocking_streams_only(
    new: Any, sched: Any, checker: Any
) -> None:
    """Kernels on stream 0, two blocking and two non-blocking streams, with a worker for each
    stream: every op starts exactly when what it depends on (its stream, and stream 0 <->
    blocking streams) has ended, on the logical clock, against checker.Model."""
    seed = run_seed()
    r = random.Random(seed)
    for program in range(8):
        s, m = new(5), checker.Model()
        blocking = [s.stream(sched.BLOCKING) for _ in range(2)]
        non_blocking = [s.stream(sched.NON_BLOCKING) for _ in range(2)]
        for sid in blocking:
            m.stream(sid, sched.BLOCKING)
        for sid in non_blocking:
            m.stream(sid, sched.NON_BLOCKING)
        streams = [sched.LEGACY_DEFAULT, *blocking, *non_blocking]
        calls: list[str] = []
        # forced: a long kernel on a non-blocking stream, then one on stream 0
        first = r.choice(non_blocking)
        s.launch(first, duration=5)
        m.op(first, True, 5)
        calls.append(f"launch({first}, 5)")
        for _ in range(r.randint(6, 12)):
            st_, d = r.choice(streams), r.randint(1, 4)
            s.launch(st_, duration=d)
            m.op(st_, True, d)
            calls.append(f"launch({st_}, {d})")
        s.launch(sched.LEGACY_DEFAULT, duration=1)
        m.op(sched.LEGACY_DEFAULT, True, 1)
        calls.append("launch(0, 1)")
        s.synchronize()
        try:
            checker.check_clock(m, s)
            check_no_extra_waits(m, s, "the legacy default stream")
        except AssertionError as err:
            raise AssertionError(
                f"the legacy default stream: {err} (seed {seed}, program {program}: "
                f"{'; '.join(calls)})"
            ) from None


def test_default_stream_events_on_stream_zero(new: Any, sched: Any) -> None:
    s = new(workers=2)
    nb, e = s.stream(sched.NON_BLOCKING), s.event()
    k0 = s.launch(sched.LEGACY_DEFAULT, duration=4)
    s.record(e, sched.LEGACY_DEFAULT)
    k1 = s.launch(nb, duration=1)
    s.wait_event(nb, e)
    k2 = s.launch(nb, duration=1)
    s.synchronize()
    got = [s.times(k) for k in (k0, k1, k2)]
    assert got == [(0, 4), (0, 1), (4, 5)], (
        f"the logical clock: an event recorded on stream 0, waited on by a non-blocking stream: "
        f"{got}, expected [(0, 4), (0, 1), (4, 5)]"
    )


# --------------------------------------------------------------------------- deadlock
def deadlock_report(s: Any, sched: Any, what: str) -> str:
    """The text of the Deadlock that s.synchronize() must raise on `what`."""
    try:
        s.synchronize()
    except sched.Deadlock as e:
        return str(e)
    raise AssertionError(f"sched_synchronize: {what} is a deadlock: it returned instead")


@pytest.mark.kata_gate("a deadlock is found but the message does not name the cycle")
def test_deadlock_three_streams_and_a_bystander(new: Any, sched: Any) -> None:
    s = new()
    a, b, c, d = s.stream(), s.stream(), s.stream(), s.stream()
    s.wait_value(a, 1, 5)  # a waits for c
    s.write_value(a, 2, 5)
    s.wait_value(b, 2, 5)  # b waits for a
    s.write_value(b, 3, 5)
    s.wait_value(c, 3, 5)  # c waits for b
    s.write_value(c, 1, 5)
    s.wait_value(d, 3, 9)  # d waits for a value nobody writes: stuck, but in no cycle
    text = deadlock_report(s, sched, "a cycle of three streams with a stuck bystander")
    found = [int(x) for x in re.findall(r"stream (\d+)", text)]
    assert found and found[0] == found[-1] and set(found) == {a, b, c}, (
        f"sched_synchronize: the report names streams {found}, the cycle is {a}, {c}, {b}: {text}"
    )
    cyc = found[:-1]
    i = cyc.index(a)
    assert cyc[i:] + cyc[:i] == [a, c, b], f"a waits for c, c for b, b for a: {text}"


@pytest.mark.kata_gate(
    "a deadlock is not reported as its cycle of streams, in wait-for order: cycles of 2 to 5 "
    "streams among bystanders, drawn at run time"
)
def test_deadlock_random_cycles_among_bystanders(new: Any, sched: Any) -> None:
    """Each member of the cycle waits for a flag that only the next member writes, after its
    own wait; the members are enqueued in a random order; bystanders run kernels, or wait
    for a cycle member's flag (stuck, but in no cycle). The report names the cycle's streams,
    each followed by the one it waits for."""
    seed = run_seed()
    r = random.Random(seed)
    for trial in range(4):
        s = new()
        n, extra = r.randint(2, 5), r.randint(0, 3)
        streams = [s.stream() for _ in range(n + extra)]
        cycle = r.sample(streams, n)  # cycle[i] waits for cycle[i + 1]
        flag = {st_: 100 + i for i, st_ in enumerate(streams)}
        for i in r.sample(range(n), n):
            me, nxt = cycle[i], cycle[(i + 1) % n]
            s.wait_value(me, flag[nxt], 1)
            s.write_value(me, flag[me], 1)
        for b in (st_ for st_ in streams if st_ not in cycle):
            if r.random() < 0.5:
                s.launch(b, duration=1)
            else:
                s.wait_value(b, flag[r.choice(cycle)], 1)
        where = f"(seed {seed}, trial {trial}: the cycle {cycle}, each waits for the next)"
        text = deadlock_report(s, sched, f"a cycle of {n} streams {where}")
        found = [int(x) for x in re.findall(r"stream (\d+)", text)]
        assert found and found[0] == found[-1] and sorted(found[:-1]) == sorted(cycle), (
            f"sched_synchronize: the deadlock report names streams {found}: {text} {where}"
        )
        i = found.index(cycle[0])
        assert found[i:-1] + found[:i] == cycle, (
            f"sched_synchronize: the report's order is not wait-for order: {text} {where}"
        )


def test_deadlock_value_written_twice(new: Any) -> None:
    s = new()
    a, b = s.stream(), s.stream()
    s.write_value(a, 4, 1)
    w = s.wait_value(b, 4, 2)  # 1 is not enough ...
    k = s.launch(b, duration=2)
    s.write_value(a, 4, 2)  # ... 2 is
    s.synchronize()
    assert s.times(w)[0] >= 0 and s.times(k) == (0, 2), (
        f"wait_value(flag 4 >= 2) after a write of 1, then of 2: the wait ends and the kernel "
        f"runs at {s.times(k)}, expected (0, 2)"
    )


# --------------------------------------------------------------------------- workloads
# Every call of scheduler.h from four host threads at once ("every call may come from any host
# thread at any time"): the given tsan_driver.cpp makes only some of them from threads.
EVERY_CALL_DRIVER = r"""
#include <atomic>
#include <thread>
#include <vector>

#include "scheduler.h"

int main() {
  k_reset();
  sched *s = sched_create(3);
  if (!s) return 3;
  std::atomic<int> failed{0};
  std::atomic<int64_t> last{-1}, finished{-1};
  std::vector<std::thread> hosts;
  for (int t = 0; t < 4; t++) {
    hosts.emplace_back([&, t] {
      int mine = sched_stream_create(s, t % 2 ? SCHED_NON_BLOCKING : SCHED_BLOCKING, -t);
      int event = sched_event_create(s);
      if (mine < 0 || event < 0) { failed = 1; return; }
      char err[256];
      for (int i = 1; i <= 150; i++) {
        int stream = i % 4 == 0 ? SCHED_PER_THREAD : mine;
        int64_t id = 0, start = 0, end = 0, done = finished;
        for (int k = 0; k < (i % 10 == 0 ? 8 : 0); k++)  // bursts: calls that overlap others'
          if ((event = sched_event_create(s)) < 0) failed = 1;
        switch (i % 6) {
          case 0: id = sched_launch(s, stream, k_work, nullptr, 1); break;
          case 1: id = sched_record(s, event, stream); break;
          case 2: id = sched_wait_event(s, stream, event); break;
          case 3: id = sched_write_value(s, stream, 10 + t, i); break;
          case 4: id = sched_wait_value(s, stream, 10 + t, i - 1); break;  // written at i - 1
          case 5:
            if (done >= 0 && sched_times(s, i % (done + 1), &start, &end) != SCHED_OK) failed = 1;
            break;
        }
        if (id < 0) failed = 1;
        for (int64_t seen = last; id > seen && !last.compare_exchange_weak(seen, id);) {}
        if (i % 50 == 0) {  // what was enqueued before a synchronize is finished after it
          int64_t before = last;
          if (sched_synchronize(s, err, sizeof err) != SCHED_OK) failed = 1;
          for (int64_t f = finished; before > f && !finished.compare_exchange_weak(f, before);) {}
        }
      }
    });
  }
  for (auto &h : hosts) h.join();
  char err[256];
  if (sched_synchronize(s, err, sizeof err) != SCHED_OK) return 4;
  sched_destroy(s);
  return failed ? 4 : 0;
}
"""


@pytest.mark.kata_gate(
    "a data race between host threads (ThreadSanitizer): the given driver, and one that makes "
    "every call of scheduler.h from four threads at once"
)
@pytest.mark.parametrize("driver", ["given", "every-call"])
def test_workloads_thread_sanitizer_again(kata: Any, new: Any, driver: str, tmp_path: Any) -> None:
    new()  # not started yet: no sanitizer build
    from harness.native.diagnostics import trim_sanitizer_report
    from harness.native.isolate import tsan_runtime

    if tsan_runtime() is None:
        pytest.skip("g++ has no ThreadSanitizer runtime here")
    import resource
    import subprocess

    source = "tsan_driver.cpp"
    if driver == "every-call":
        source = tmp_path / "every_call_driver.cpp"
        source.write_text(EVERY_CALL_DRIVER, encoding="utf-8")
    native = NativeBuilder(kata.source, kata.search_path)
    program = native.executable(
        "scheduler.cpp", "kernels.cpp", source, header="scheduler.h",
        sanitize="thread", flags=FLAGS, link_flags=("-pthread",),
    )  # fmt: skip

    def unlimited() -> None:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))

    proc = subprocess.run(
        [str(program.path)], capture_output=True, text=True, timeout=120, check=False,
        env={"TSAN_OPTIONS": "halt_on_error=1:exitcode=66"}, preexec_fn=unlimited,
    )  # fmt: skip
    if "FATAL: ThreadSanitizer" in proc.stderr:
        pytest.skip("ThreadSanitizer cannot run on this machine")
    if proc.returncode == 3:
        todo("scheduler.cpp: sched_create")
    assert proc.returncode == 0, (
        f"scheduler.cpp under ThreadSanitizer ({driver} driver): exit {proc.returncode} "
        f"(66: a data race, 4: a call failed)\n"
        + (trim_sanitizer_report(proc.stderr) or proc.stderr[-2000:])
    )


@hidden_settings(max_examples=40)
@given(data=st.data())
def test_workloads_more_workers(new: Any, checker: Any, data: Any) -> None:
    calls = data.draw(checker.workloads())
    s = new(workers=6)
    model = checker.replay(s, calls)
    s.synchronize()
    checker.check_run(model, s)


# --------------------------------------------------------------------------- overlap
@pytest.mark.kata_gate(
    "the wall time is not real overlap on the pool asked for: kernels skip their sleep, never "
    "run side by side, or run more at once than there are workers"
)
def test_overlap_kernels_sleep_their_time_side_by_side(new: Any) -> None:
    """4 streams x 3 kernels of 20 ms on 4 workers: each stream's 3 kernels run one after
    another, so no schedule takes less than 60 ms; the streams' kernels run at the same time."""
    import time

    s = new(4)
    streams = [s.stream() for _ in range(4)]
    start = time.perf_counter()
    for _ in range(3):
        for stream in streams:
            s.launch(stream, sleep_us=20_000)
    s.synchronize()
    elapsed = time.perf_counter() - start
    assert elapsed >= 0.06, (
        f"{elapsed * 1e3:.1f} ms: 3 kernels of 20 ms in order take 60 ms or more"
    )
    assert s.max_concurrent() >= 2, "kernels of different streams must run at the same time"
    s = new(2)
    for stream in [s.stream() for _ in range(6)]:
        s.launch(stream, sleep_us=20_000)
    s.synchronize()
    assert s.max_concurrent() <= 2, (
        f"6 streams with a kernel of 20 ms each on 2 workers: {s.max_concurrent()} kernels ran "
        "at once on real threads; the pool has 2 workers"
    )
