"""Public tests of continuous-batching, tasks "static", "continuous", "chunked", "preemption".

The analytic cases run on a toy GPU where a step costs max(0.2 ms per new token, 10 ms): up to
50 new tokens a step is memory-bound (10 ms), more is compute-bound. Every time below follows
from that by hand. The trace cases replay traces/*.json (gen_traces.py) on the engines they
name and compare with the reference's numbers (budgets).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest


def req(
    engine: Any,
    rid: int,
    arrival: float,
    prompt: int,
    output: int,
    max_tokens: int = 16,
    priority: int = 0,
) -> Any:
    return engine.Request(rid, arrival, prompt, output, max_tokens, priority)


def run(engine: Any, toy: Any, scheduler: Any, requests: list, **kw: Any) -> Any:
    kw.setdefault("num_blocks", 64)
    return engine.Engine(toy, **kw).run(scheduler, requests)


def times(r: Any) -> list[float]:
    return [round(t, 9) for t in r.token_times]


AB_C = lambda engine: [
    req(engine, 0, 0.0, 100, 3),
    req(engine, 1, 0.0, 50, 1),
    req(engine, 2, 0.001, 20, 2),
]


def trace_budget(
    kata_budget: Any,
    workload: Any,
    measure: Any,
    kind: str,
    make: Any,
    quantities: list[str],
    ratio: float = 1.05,
    tag: str = "",
) -> Any:
    """Run `make(schedulers_module)` on traces/<kind>.json, yours and the reference's; each
    quantity (lower is better) within `ratio` x the reference's (or the value recorded in
    kata.toml when this checkout has no reference)."""
    trace = workload.load(kind)
    reqs = workload.requests_of(trace)
    mine = workload.engine_for(trace).run(make(None), reqs)
    ref_run = None
    if kata_budget.reference_available:
        ref = kata_budget.reference
        ref_sched, ref_wl = ref.module("schedulers"), ref.module("workload")
        ref_run = ref_wl.engine_for(trace).run(make(ref_sched), ref_wl.requests_of(trace))
    for q in quantities:
        kata_budget.metrics[f"{q} ({kind}{tag})"] = round(measure(mine, q), 4)
        kata_budget.compare(
            lambda q=q: measure(mine, q),
            None if ref_run is None else (lambda q=q: measure(ref_run, q)),
            name=f"{q}-{kind}{tag}",
            metric="simulated seconds",
            ratio=ratio,
            rounds=1,
        )
    return mine


# --------------------------------------------------------------------------- static
def test_static_one_batch(engine: Any, toy: Any, schedulers: Any) -> None:
    r = run(engine, toy, schedulers.StaticBatcher(8), AB_C(engine)[:2]).results
    # Step 1 prefills both prompts (150 tokens: 30 ms) and each emits its first token.
    assert times(r[0]) == [0.03, 0.04, 0.05] and times(r[1]) == [0.03]


def test_static_waits_for_the_whole_batch(engine: Any, toy: Any, schedulers: Any) -> None:
    r = run(engine, toy, schedulers.StaticBatcher(8), AB_C(engine)).results
    # Request 2 arrives at 1 ms, while the batch runs: it starts when the batch is done (50 ms).
    assert times(r[2]) == [0.06, 0.07], "a static batch takes nobody in until it has finished"
    assert times(r[0]) == [0.03, 0.04, 0.05]


def test_static_max_batch_and_reservation(engine: Any, toy: Any, schedulers: Any) -> None:
    five = [req(engine, i, 0.0, 10, 2) for i in range(5)]
    r = run(engine, toy, schedulers.StaticBatcher(2), five).results
    assert [times(x)[0] for x in r] == [0.01, 0.01, 0.03, 0.03, 0.05]
    # 4 blocks of 16: each request reserves ceil((10 + 20) / 16) = 2 blocks: two per batch.
    three = [req(engine, i, 0.0, 10, 2, max_tokens=20) for i in range(3)]
    r = run(engine, toy, schedulers.StaticBatcher(8), three, num_blocks=4).results
    assert [times(x)[0] for x in r] == [0.01, 0.01, 0.03]
    with pytest.raises(ValueError):
        schedulers.StaticBatcher(0)


def test_static_trace_budget(
    kata_budget: Any, workload: Any, measure: Any, schedulers: Any
) -> None:
    """traces/chat.json with batches of 64: the time to serve it all (makespan) within 1.05x
    the reference's."""
    trace_budget(
        kata_budget,
        workload,
        measure,
        "chat",
        lambda m: (m or schedulers).StaticBatcher(64),
        ["makespan"],
        tag="-static",
    )


# --------------------------------------------------------------------------- continuous
def test_continuous_joins_at_the_next_step(engine: Any, toy: Any, schedulers: Any) -> None:
    res = run(engine, toy, schedulers.ContinuousBatcher(), AB_C(engine))
    r = res.results
    assert times(r[0]) == [0.03, 0.04, 0.05]
    # Request 2 arrives at 1 ms and joins step 2 (at 30 ms) next to request 0's decode:
    # 1 + 20 new tokens, 10 ms. Static batching made it wait until 50 ms.
    assert times(r[2]) == [0.04, 0.05], "a new request joins the running batch at the next step"
    assert res.steps[1].tokens == {0: 1, 2: 20}


def test_continuous_token_budget(engine: Any, toy: Any, schedulers: Any) -> None:
    two = [req(engine, 0, 0.0, 100, 3), req(engine, 1, 0.0, 50, 2)]
    res = run(engine, toy, schedulers.ContinuousBatcher(max_num_batched_tokens=120), two)
    # Step 1: request 0's 100 tokens; request 1's 50 do not fit in the 20 left (no chunking).
    assert [s.tokens for s in res.steps] == [{0: 100}, {0: 1, 1: 50}, {0: 1, 1: 1}]
    assert times(res.results[1]) == [0.0302, 0.0402]
    with pytest.raises(ValueError):
        schedulers.ContinuousBatcher(max_num_seqs=0)


def test_continuous_max_num_seqs(engine: Any, toy: Any, schedulers: Any) -> None:
    three = [req(engine, i, 0.0, 10, 3) for i in range(3)]
    r = run(engine, toy, schedulers.ContinuousBatcher(max_num_seqs=2), three).results
    assert times(r[0]) == times(r[1]) == [0.01, 0.02, 0.03]
    assert times(r[2]) == [0.04, 0.05, 0.06]


def test_continuous_admission_is_limited_by_kv_blocks(
    engine: Any, toy: Any, schedulers: Any
) -> None:
    # 3 blocks of 16: request 0 (40 + 2 tokens) holds all three; request 1 waits for them.
    two = [req(engine, 0, 0.0, 40, 3, max_tokens=8), req(engine, 1, 0.0, 10, 1, max_tokens=8)]
    res = run(engine, toy, schedulers.ContinuousBatcher(), two, num_blocks=3)
    assert [s.tokens for s in res.steps] == [{0: 40}, {0: 1}, {0: 1}, {1: 10}]


def test_continuous_beats_static_at_high_load(workload: Any, measure: Any, schedulers: Any) -> None:
    """traces/chat.json arrives faster than static batches of 64 can serve it: continuous
    batching serves it sooner and keeps (almost) every request within its SLOs."""
    trace = workload.load("chat")
    reqs, slo = workload.requests_of(trace), (trace["slo"]["ttft"], trace["slo"]["tpot"])
    static = workload.engine_for(trace).run(schedulers.StaticBatcher(64), reqs)
    cont = workload.engine_for(trace).run(schedulers.ContinuousBatcher(256, 8192), reqs)
    assert measure(cont, "makespan") < 0.75 * measure(static, "makespan")
    assert measure(cont, "slo_met", slo) > 3 * measure(static, "slo_met", slo)
    assert measure(cont, "ttft_p99") < 0.1 * measure(static, "ttft_p99")


def test_continuous_trace_budget(
    kata_budget: Any, workload: Any, measure: Any, schedulers: Any
) -> None:
    """traces/chat.json, 256 sequences, 8192 tokens a step: makespan and p99 TPOT within 1.05x
    the reference's."""
    trace_budget(
        kata_budget, workload, measure, "chat",
        lambda m: (m or schedulers).ContinuousBatcher(256, 8192), ["makespan", "tpot_p99"],
        tag="-continuous",
    )  # fmt: skip


# --------------------------------------------------------------------------- chunked
def test_chunked_splits_a_long_prompt(engine: Any, toy: Any, schedulers: Any) -> None:
    one = [req(engine, 0, 0.0, 150, 2)]
    res = run(
        engine,
        toy,
        schedulers.ContinuousBatcher(max_num_batched_tokens=64, chunked_prefill=True),
        one,
    )
    assert [s.tokens for s in res.steps] == [{0: 64}, {0: 64}, {0: 22}, {0: 1}]
    assert times(res.results[0]) == [0.0356, 0.0456]


def test_chunked_decodes_go_first(engine: Any, toy: Any, schedulers: Any) -> None:
    two = [req(engine, 0, 0.0, 10, 5), req(engine, 1, 0.001, 200, 1, max_tokens=8)]
    res = run(
        engine,
        toy,
        schedulers.ContinuousBatcher(max_num_batched_tokens=64, chunked_prefill=True),
        two,
    )
    assert [s.tokens for s in res.steps] == [
        {0: 10},
        {0: 1, 1: 63},
        {0: 1, 1: 63},
        {0: 1, 1: 63},
        {0: 1, 1: 11},
    ]
    # Request 0 decodes every step, at most 12.8 ms apart, while request 1 prefills.
    assert times(res.results[0]) == [0.01, 0.0228, 0.0356, 0.0484, 0.0584]


def test_chunked_lowers_the_tpot_tail(workload: Any, measure: Any, schedulers: Any) -> None:
    """traces/rag.json: 30 % of the prompts are 3-7k tokens. Whole, such a prefill makes one
    step of ~100-200 ms for everyone decoding beside it; in chunks of 512 no step exceeds ~15 ms."""
    trace = workload.load("rag")
    reqs = workload.requests_of(trace)
    whole = workload.engine_for(trace).run(schedulers.ContinuousBatcher(256, 8192), reqs)
    chunks = workload.engine_for(trace).run(
        schedulers.ContinuousBatcher(256, 512, chunked_prefill=True), reqs
    )
    assert measure(chunks, "tpot_p99") < 0.8 * measure(whole, "tpot_p99")
    assert measure(chunks, "itl_p99") < 0.25 * measure(whole, "itl_p99")


def test_chunked_trace_budget(
    kata_budget: Any, workload: Any, measure: Any, schedulers: Any
) -> None:
    """traces/rag.json in chunks of 512: p99 TPOT and makespan within 1.05x the reference's."""
    trace_budget(
        kata_budget, workload, measure, "rag",
        lambda m: (m or schedulers).ContinuousBatcher(256, 512, chunked_prefill=True), ["tpot_p99", "makespan"],
        tag="-chunked",
    )  # fmt: skip


def test_chunked_latency_throughput_picture(
    kata: Any, workload: Any, measure: Any, schedulers: Any, kata_metrics: Any
) -> None:
    """The picture in the report: the first 90 requests of traces/chat.json at half, once and
    twice its rate, under static batching, continuous batching, and chunked prefill."""
    plot = kata.module("plot")
    trace = workload.load("chat")
    trace["requests"] = trace["requests"][:90]
    policies = {
        "static (64)": lambda: schedulers.StaticBatcher(64),
        "continuous": lambda: schedulers.ContinuousBatcher(256, 8192),
        "chunked prefill (512)": lambda: schedulers.ContinuousBatcher(
            256, 512, chunked_prefill=True
        ),
    }
    series = {}
    for name, make in policies.items():
        series[name] = []
        for scale in (0.5, 1.0, 2.0):
            res = workload.engine_for(trace).run(make(), workload.requests_of(trace, scale))
            tokens = sum(len(r.token_times) for r in res.results)
            span = res.end - min(r.arrival for r in res.results)
            series[name].append((tokens / span, measure(res, "ttft_p99"), measure(res, "tpot_p99")))
    svg = plot.latency_throughput_svg(series, title="Llama-3-8B on an H100 (simulated), chat trace")
    ET.fromstring(svg)
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your schedulers: p99 TTFT and p99 TPOT against throughput, three loads"
    static_top, cont_top = series["static (64)"][-1][0], series["continuous"][-1][0]
    assert cont_top > static_top, "at twice the rate continuous batching must out-serve static"


# --------------------------------------------------------------------------- preemption
def test_preemption_by_recompute(engine: Any, toy: Any, schedulers: Any) -> None:
    # 4 blocks of 4 tokens. Both requests fit at first (2 blocks each); at step 4 request 0
    # needs a third block: request 1, the less important (later id), is preempted and
    # recomputed (its 5 prompt + 3 generated tokens) once request 0 has finished.
    two = [req(engine, 0, 0.0, 6, 8, max_tokens=10), req(engine, 1, 0.0, 5, 8, max_tokens=10)]
    res = run(engine, toy, schedulers.ContinuousBatcher(), two, num_blocks=4, block_size=4)
    r = res.results
    assert res.steps[3].preempted == (1,)
    assert times(r[0]) == [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
    assert times(r[1]) == [0.01, 0.02, 0.03, 0.09, 0.1, 0.11, 0.12, 0.13]
    assert (r[0].preemptions, r[1].preemptions) == (0, 1)
    assert res.steps[8].tokens == {1: 8}, "recompute: prompt + the 3 tokens generated so far"


def test_preemption_by_swap(engine: Any, toy: Any, schedulers: Any) -> None:
    # The same, swapping request 1 to the cpu: its 7 cached tokens cost 7 ms each way.
    two = [req(engine, 0, 0.0, 6, 8, max_tokens=10), req(engine, 1, 0.0, 5, 8, max_tokens=10)]
    res = run(
        engine,
        toy,
        schedulers.ContinuousBatcher(preemption="swap"),
        two,
        num_blocks=4,
        block_size=4,
        num_cpu_blocks=4,
    )
    r = res.results
    assert res.steps[3].preempted == (1,) and res.steps[8].swapped_in == (1,)
    assert times(r[0]) == [0.01, 0.02, 0.03, 0.047, 0.057, 0.067, 0.077, 0.087]
    assert times(r[1]) == [0.01, 0.02, 0.03, 0.104, 0.114, 0.124, 0.134, 0.144]
    assert res.steps[8].tokens == {1: 1}, "swapped back in, it just decodes"


def test_preemption_follows_priority(engine: Any, toy: Any, schedulers: Any) -> None:
    # Request 0 (priority 0) arrives after request 1 (priority 1): the batch job is preempted.
    two = [
        req(engine, 0, 0.001, 6, 8, max_tokens=10, priority=0),
        req(engine, 1, 0.0, 5, 8, max_tokens=11, priority=1),
    ]
    res = run(engine, toy, schedulers.ContinuousBatcher(), two, num_blocks=4, block_size=4)
    assert [x.preemptions for x in res.results] == [0, 1]
    # Waiting requests start in order of priority too.
    three = [
        req(engine, 0, 0.0, 10, 2, priority=1),
        req(engine, 1, 0.001, 10, 2, priority=1),
        req(engine, 2, 0.002, 10, 2, priority=0),
    ]
    r = run(engine, toy, schedulers.ContinuousBatcher(max_num_seqs=1), three).results
    assert [times(x)[0] for x in r] == [0.01, 0.05, 0.03]


def test_preemption_kv_bound_trace_budget(
    kata_budget: Any, workload: Any, measure: Any, schedulers: Any
) -> None:
    """traces/kv-bound.json: Llama-3-70B on 2 x H100 with 41k tokens of KV cache; requests are
    preempted. Makespan and p99 TTFT within 1.05x the reference's, by recompute and by swap."""
    for mode in ("recompute", "swap"):
        run_ = trace_budget(
            kata_budget, workload, measure, "kv-bound",
            lambda m, mode=mode: (m or schedulers).ContinuousBatcher(128, 8192, preemption=mode),
            ["makespan", "ttft_p99"], tag=f"-{mode}",
        )  # fmt: skip
        kata_budget.metrics[f"preemptions ({mode})"] = sum(r.preemptions for r in run_.results)
